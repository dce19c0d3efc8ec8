# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled layer of convt: the Cython drivers and the registry of C kernel sets.

Two engines compute ``y[n, m, o] = b[m] + sum x[n, c, i] w[c, m, k]`` over
``o = i * stride + k * dilation - pad_begin`` (per axis), both organised by
stride phase: along an axis, the outputs ``o = r + t * stride`` of one residue
``r`` receive a fixed set of taps ``k`` reading input ``i = t + offset(k)``,
an ordinary stride-1 correlation over the un-expanded input.  Every output
element is written exactly once; there is no col2im scatter-add.

Files, by job (included here, one extension module):

* ``_storage.pxi``: element types, conversions between user arrays and
  accumulation-type buffers;
* ``_registry.pxi``: the kernel families of convt/src/registry.c, CPU
  features, the thread pool, and the check that plan records match convt._records;
* ``_tiles.pxi``: the GEMM engine's B operand (tile buffers filled from x);
* ``_gemm.pxi``: the GEMM engine driver (micro-kernels, exact stacks, work items);
* ``_scatter.pxi``: the GEMM engine's output side (product rows to y);
* ``_pack.pxi``: weight packing for the GEMM engine;
* ``_direct.pxi``: the direct engine driver (row kernels);
* ``_channels.pxi``: its channels-last depthwise rows (channels as vector lanes);
* ``_stencil.pxi``: its stencil blocks (one input channel per group, bands of rows);
* ``_winograd.pxi``: the Winograd engine (float32 3x3 layers);
* ``_planes.pxi``: depthwise 2-D Conv a whole input plane at a time;
* ``_col2im.pxi``: weight-bound ConvTranspose on small maps (products, then col2im);
* ``_bands.pxi``: strided Conv by bands of output rows (gemm_t over padded input rows);
* ``_repeat.pxi``: the repeated calls of a remembered GEMM call, without Python;
* ``_signals.pxi``: running Python's signal handlers between work items;
* ``_testing.pxi``: per-kernel testers against the scalar references.

Drivers take a few structs: the problem, the plan (records of
convt._records), the kernel set, the operands, the workspace.  How a call
runs is decided in convt._dispatch; the drivers obey the decision and infer
nothing.  Work items are shared by convt's thread pool (convt/src/pool.c):
threads claim items, and the caller never waits for a thread that has not
started, so a busy machine costs at most the work, not a barrier.  Work
decompositions never depend on the thread count, so results are bitwise
identical for every ``num_threads``.
"""

from libc.stdint cimport uint16_t
from libc.string cimport memcmp, memcpy, memset

from cpython.pycapsule cimport PyCapsule_GetName, PyCapsule_GetPointer

cimport numpy as cnp
import math
import os
import weakref

import numpy as np

cnp.import_array()


cdef inline const void* data_of(object array):
    """The data pointer of an ndarray, or NULL for None."""
    if array is None:
        return NULL
    return cnp.PyArray_DATA(<cnp.ndarray>array)


cdef inline char* aligned_data(object array):
    """The first 64-byte boundary in an ndarray's data: a workspace allocated 64
    bytes longer than its threads' buffers, which are 64-byte multiples."""
    cdef char* data = <char*>cnp.PyArray_DATA(<cnp.ndarray>array)
    return data + (-(<size_t>data)) % 64


cdef Operands operands_of(arrays) except *:
    """Pointers and element strides of a call's arrays (convt._engine.Operands)."""
    cdef Operands ops
    ops.x = <const char*>data_of(arrays.x)
    ops.w = <const char*>data_of(arrays.w)
    ops.y = <char*>data_of(arrays.y)
    ops.bias = <const char*>data_of(arrays.b)
    ops.bias_acc = <const char*>data_of(arrays.b_acc)
    ops.x_strides = <const Py_ssize_t*>data_of(arrays.x_strides)
    ops.w_strides = <const Py_ssize_t*>data_of(arrays.w_strides)
    ops.y_strides = <const Py_ssize_t*>data_of(arrays.y_strides)
    return ops


include "_storage.pxi"
include "_registry.pxi"
include "_signals.pxi"
include "_scatter.pxi"
include "_tiles.pxi"
include "_gemm.pxi"
include "_pack.pxi"
include "_direct.pxi"
include "_channels.pxi"
include "_stencil.pxi"
include "_winograd.pxi"
include "_planes.pxi"
include "_col2im.pxi"
include "_bands.pxi"
include "_repeat.pxi"
include "_testing.pxi"

_check_records()
