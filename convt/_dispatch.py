"""The one dispatch point: how a resolved problem runs on this machine.

:func:`decide` takes the problem (shapes, pads, group, dtype, operand
layouts), the kernel families this CPU can run and the environment, and
returns a :class:`Decision`: the engine, the kernel set, the GEMM blocking and
every flag the compiled drivers obey.  Nothing downstream infers a capability;
``convt.explain`` and ``python -m convt info`` print the decision with its
reasons.

Every threshold is a named constant below, with the reason for its value;
``benchmarks/tune.py`` re-measures them on the machine at hand.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import types
from dataclasses import dataclass, field, replace

import numpy as np

from . import _environ
from ._compiled import load
from ._geometry import Geometry

# --- engine choice -----------------------------------------------------------
# The direct engine is chosen below this many multiply-adds per output position
# and group (cg * mg * kernel size), where the GEMM's row blocks and depth are a
# few elements.  Measured on 2 Zen 4 cores, interleaved: direct wins 1.05-1.7x
# at 4-9 (1 channel k2s2 and k3s1, depthwise k2s2 and k3s1), the GEMM engine
# wins 1.04-1.8x at 16 (depthwise k4s2, single channel k4s2) and 1.1-3.9x above.
DIRECT_MAX_WORK = 16
# ...on output rows of at least this many positions: the direct engine pays a
# fixed cost per row and tap, the GEMM per call.  On 2 Intel SPR-class cores,
# depthwise 3x3 Conv and ConvTranspose ran GEMM 1.1-1.75x faster on rows of 56
# to 160 (128 channels on 112x112: 0.84 against 1.12 ms), direct 1.03-1.4x
# faster on rows of 192 to 512; the Zen 4 figures above were on rows of 256 up.
DIRECT_MIN_ROW = 192

# Conv layers with one input channel per group (depthwise, single-channel
# filters) run the direct engine's stencil blocks (convt/_stencil.pxi): this
# many output rows of the band axis at a time, so that each input vector loaded
# feeds up to this many rows' FMAs and the edges are masked loads, not scalar
# code.  Four rows x two vectors keep 8 accumulators in registers (AVX2's 16
# registers included).
STENCIL_ROWS = 4
# ...for up to this many output channels per group: each output channel is its
# own pass over the input, where the GEMM reads its input once for all of them.
STENCIL_MAX_OUTPUTS = 4

# --- kernel set choice -------------------------------------------------------
# Below this reduction depth (input channels per group x taps of the deepest
# stack) the AVX-512 kernels' register totals cost more than their wider FMAs
# give: on 2 Zen 4 cores AVX2 was 5-6% faster at depths 4-32 (depthwise, 3-D
# with 4 channels), AVX-512 0-15% faster from 64 up.
AVX512_MIN_DEPTH = 64
# ...unless each group has at least this many output channels: then the 12-row
# blocks are full, and with a short reduction a kernel call is mostly its
# stores, of which 16-wide vectors need half as many.  On 1 / 2 Zen 4 threads
# (in one process, alternating, caches warm) against AVX2: wav2vec's 1 -> 512
# k10 s5 1.62x / 1.78x (AVX2 ran gemm_t), 2 and 4 channels 1.21-1.61x, 1x1 16
# -> 96 1.32x / 1.38x, 24 -> 144 1.09x / 1.17x, 32 -> 192 1.14x / 1.04x, 3 -> 64
# 3x3 within 4%; fewer rows lost: 4 x 4 ConvTranspose 0.85x / 0.91x, a k2s2 3-D
# one over 4 outputs 0.87x / 0.91x, a 3-D 2 -> 16 Conv 0.95x / 0.96x.  (With the
# caches flushed between calls, the 1 -> 512 layer ran gemm_t on AVX2 1.2x
# faster: its y, 6.5 MiB, is then written from memory either way.)
AVX512_SHALLOW_MIN_OUTPUTS = 64
# avx512_wide (8 rows x 32 floats) issues 10 loads per 16 FMAs, avx512 (12 x
# 16) 13 per 12.  Where 512-bit FMAs are native and loads the limit (2 Intel
# SPR-class cores, 1 and 2 threads, interleaved) the wide set ran plain GEMM
# layers of 50 M multiply-adds and more 1.06-1.17x faster (3x3 and 1x1 Conv
# on 56x56, k3s3 and k9s3 heads, k3s2 and k2s2 decoders, batch 3x3, audio
# k16s8) and lost on rows shorter than 32 positions (0.93-0.95x: 28-wide rows
# of a strided Conv, 12-wide rows of a 3-D decoder); on the exact stacks of
# 2-D even-kernel stride-2 layers (k4s2) it lost 8-12% below 2^28
# multiply-adds (64 -> 32 channels on 32x32 and 64x64 maps) and gained 3-20%
# above (float64 16 channels on 256x256, dcgan, VAE decoder).
WIDE_MIN_POSITIONS = 32
WIDE_MIN_WORK = 1 << 24
WIDE_MIN_WORK_PAIRED = 1 << 28
# Where a core splits 512-bit FMAs in two (AMD Zen 4: 1 zmm FMA per cycle, as
# many FLOPs as 2 ymm FMAs) the 12 x 16 kernel is already FMA-bound, not load-
# bound: on 2 Zen 4 cores the wide set ran the layers above 0.82-1.03x as fast
# (batch 3x3 0.94x, k4s2 on 32x32 0.87x).  So the wide set needs native 512-bit
# FMAs, measured at first use (convt_avx512_fma_speedup: 1.01 on Zen 4, about
# 2 on Intel SPR-class cores); anything from this ratio up counts as native.
NATIVE_512_MIN_SPEEDUP = 1.5

# --- GEMM blocking -----------------------------------------------------------
# Per-thread buffers: the tile's input, read by every row block, sized to stay
# in L2 (1-2 MiB per core on current x86 and Arm server cores); and the product
# of one item, written once and read once by the scatter.  Both are bounded by
# these constants whatever the volume.
OPERAND_BYTES = 384 * 1024
PRODUCT_BYTES = 1024 * 1024
# Longest K chunk (tile rows x taps) before input channels are split: longer
# chunks no longer fit the operand budget with useful tiles.
MAX_DEPTH = 2048
# Every row block re-reads its K chunk's B rows, about two cache lines per K
# step (unaligned vector loads; a pair kernel's sibling shares them), while each
# block's weights stream through once.  Chunks whose B rows fill two thirds of
# the L1 data cache keep them there: on 2 Intel Sapphire-Rapids-class cores
# (48 KiB, so 256 steps) 1.05-1.17x faster than chunks of 1024 on the deep
# layers (dcgan k4s2, batch 3x3, audio k16s8, VAE decoder, float16), within 2%
# elsewhere; chunks of 128 lost 8-10% on audio k16s8.  Exact stacks that store
# packed pair panels read both operands' full panels per step instead
# (pair_chunk_depth): 128 steps for avx512_wide's 32 floats, where 256 left
# dcgan 10-11% and the VAE decoder 4-5% slower.
K_STEP_BYTES = 128
MIN_DEPTH = 128
# Kernels that load B more slowly than L2 delivers it need no chunks sized to
# L1: short chunks only add passes over C, or over y for exact stacks that
# store into it.  That holds for the AVX-512 kernels where a core splits
# 512-bit FMAs in two (NATIVE_512_MIN_SPEEDUP: one 512-bit FMA per cycle, half
# a native core's loads) and for the AVX2 kernels on any core (two 256-bit B
# loads per 12 FMAs, a pair kernel four: at most a third of what L2 delivers).
# Their chunks are sized as if L1 were this many times larger.  On 2 Zen 4
# cores (AVX-512 split; separate processes, 3 runs each) every stack: k4s2
# layers 7-12% faster (dcgan in float32 and float16, VAE decoder, 64 -> 32 on
# 32x32), a k16s8 vocoder 8%, 3x3 and k16s8 layers 3-4%, 2x2x2 volumes 5%; 16
# times gained no more.  On 2 Zen 3 cores (AVX2 only; 1 thread, the two
# chunkings alternating in one process) only exact stacks storing into y gain
# (pair_chunk_depth: each chunk is a pass over y): dcgan k4s2 10-11%, its
# float16 twin 15% (one chunk: rounded once), VAE decoder 7% faster than with
# L1 chunks; the product path lost up to 15% with the longer chunks (3x3x3
# Conv on 64^3, whose tiles shrink to fit the operand budget; k3 Conv 2-6%),
# so there it keeps L1 chunks.
L2_CHUNK_L1_FACTOR = 8
# L1 data cache assumed when neither the CPU nor the OS reports one.
DEFAULT_L1_BYTES = 32 * 1024
# Columns a tile is cut into when a single grid row exceeds the budget (BLAS,
# whose panels are the tile).
MIN_TILE = 16
# Work items to aim for, so that threads finish together (dynamic schedule):
# WORK_ITEMS_PER_CORE per core of the machine (os.cpu_count, not the call's
# threads: plans never depend on the thread count, so results do not either),
# at most MAX_WORK_ITEMS.  Every item beyond one costs: smaller tiles re-read
# their halo, row groups repeat the tile's B packing (and its fill, but on a
# thread that runs a tile's groups in turn with one K chunk).  On 2 Zen 3
# cores (2 threads, same-process A/B) 8 items instead of 24 ran a k3 s2 Conv
# (128 -> 256 on 56x56) 8%, a k7 Conv on 4096 samples 13%, a batched k4s2
# vocoder 6%, dcgan k4s2 3% faster, the others within 1-2%; 4 items lost 9% on a
# k3 Conv (64 on 56x56).
MAX_WORK_ITEMS = 24
WORK_ITEMS_PER_CORE = 4
# Fewest grid rows per tile when tiles are split for work items: a tile
# re-reads its taps' span of rows (one row for k4s2), at most 1/4 more.
MIN_SPLIT_ROWS = 4
# Row blocks an item needs before the first block's B panel is packed for the
# others (sets with gemm_pack): B rows straddling cache lines cost ~10% per
# block, the copy ~1 block's loads (AVX-512 on 2 Intel SPR-class cores: unet2d
# k2s2 1.19x, unet3d 1.11x, audio k16s8 1.05x, the others within 1%).
PACK_MIN_BLOCKS = 4
# The same for exact stacks, whose full pair panels are copied before their
# row blocks run (two B rows per step): on 2 Intel SPR-class cores, 11 to 43
# blocks of 12 rows gained 3-11% (k4s2, 64 to 256 channels), 6 blocks lost 6%
# (16 channels, float64).
PAIR_PACK_MIN_BLOCKS = 8
# Neither packing pays where 512-bit FMAs are split (NATIVE_512_MIN_SPEEDUP):
# the AVX-512 kernels issue half the loads per cycle there, so straddling B rows
# cost little and the copy is pure overhead.  On 2 Zen 4 cores (separate
# processes, 3 runs each) turning B and pair packing off made unet2d k2s2 13%,
# unet3d 6%, dcgan k4s2 and the VAE decoder 3%, audio k16s8 and float64 k4s2
# 2%, batch 3x3 1.5% faster.  The AVX2 kernels (two B loads per row step) keep
# packing on every CPU (`tune.py --only pack`: never packing lost 6-20% on Zen 4).
# Exact stacks of the AVX2 set need at least this many reduction steps per 4
# bytes of output (256 float32, 512 float64): their pair kernels write y a few
# hundred bytes at a time for many channels at once, where the product path
# scatters whole rows, and on shallow reductions that costs more than the
# product buffer saves.  On 2 Zen 3 cores (1 thread, separate processes), k4s2
# against the product path: depth 64 lost 32-47% (16 channels on 256x256,
# float32 and float64), 128 lost 12-28%, 256 ranged from -12% (float64, 64x64)
# through a tie (float32, 64x64) to +5% and +15% (float32, 32x32 and 8x8), 512
# gained 3-12% (float32 and float64, VAE decoder), 1024 11% (dcgan).
AVX2_EXACT_MIN_DEPTH = 256
# The AVX2 kernels read B panels of a tile buffer (L2-resident, copied once per
# item) in place below this many row blocks in stacks of AVX2_BUFFER_MIN_TAPS
# taps or more: there the first block's copy cost more than the unaligned
# loads it saves.  On 2 Zen 3 cores (1 thread, separate processes, interleaved,
# against packing from PACK_MIN_BLOCKS; ranges over 2-3 runs): batch 3x3
# 1.6-7%, 3x3x3 Conv 1.5-6%, k4s2 float64 2.5-5%, k3 and k7 Conv 0-5% faster; a
# k3 s2 Conv 1-2% slower, a VAE k3s2 decoder -5% to +5%.  Stacks of 2 taps (k16s8 and k4s2 vocoders: 1-D, batched or
# not) lost 5-18% unpacked, so they keep PACK_MIN_BLOCKS, as does B read in
# place from x (1x1 layers, k2s2 phases: a 1x1 Conv ran 11%, unet2d/3d k2s2
# 40% slower unpacked).
AVX2_BUFFER_PACK_MIN_BLOCKS = 64
AVX2_BUFFER_MIN_TAPS = 4
# Blocked summation: about 2 sqrt(depth) steps per block minimise float32
# errors; these steps are cheap for the kernels' loop structure.  Each K chunk
# is cut into equal blocks of about this length (Blocking.sum_block).
SUM_BLOCK_SHALLOW = 32
SUM_BLOCK_DEEP = 64
SUM_BLOCK_SPLIT = 256  # depths above use SUM_BLOCK_DEEP
# ConvTranspose stacks of several taps over fewer channels than SUM_BLOCK_SHALLOW
# (FCN heads: 21 classes x 4 taps): engines that scatter a GEMM's columns (col2im) sum each
# tap's channels, then the few taps, so their sums are shorter than a shallow
# block.  Blocks of this many steps keep convt's float32 error below theirs
# (fcn8s k16s8: largest error 1.4e-7 -> 1.0e-7, PyTorch 1.1e-7; RMS 1.30e-8 ->
# 1.10e-8, PyTorch 1.16e-8) for depths above two shallow blocks.
SUM_BLOCK_FEW_CHANNELS = 16

# --- direct engine -----------------------------------------------------------
# Source rows (input channel x leading-axis taps) summed per row-kernel call:
# bounds the per-thread buffers whatever the channel count or kernel size.
DIRECT_MAX_SOURCES = 16
# Channels-last depthwise rows (every output channel reads its own input
# channel, channels innermost in x and y) are summed with the channels as
# vector lanes, a whole row (positions x channels) at a time: the channel-by-
# channel paths read and write one element per cache line there (depthwise k4s2
# on 64 channels: 15 ms against 2 ms channels-first on 2 Zen 4 cores).  Rows of
# more elements than this (per thread: the output row, and for converted input
# each source row) keep the channel-by-channel paths, so buffers stay bounded.
CHANNEL_ROW_MAX = 1 << 18
# Fewest channels for those rows: with 3 or 4 channels a vector pass does a
# few lanes per output and lost 1.5-3x to the channel-by-channel rows; from 8
# channels it won 1.2-3x (depthwise k4s2 and k3s1, ConvTranspose and Conv, on
# 2 Zen 4 cores).
CHANNEL_ROW_MIN_CHANNELS = 8

# Depthwise Conv with small channels-first output planes runs channels-last: x is
# transposed into channels-last rows, the channels-last rows above sum it with the
# channels as vector lanes, and y is transposed back.  A stencil block is one
# channel's 4 output rows, and on small maps each costs about 120 ns whatever its
# few outputs.  Output planes of at most this many positions take the route: on
# 1 Zen 3 thread (copies included; stencil or GEMM path before; the best of
# interleaved runs) 3x3 on 14x14 x 576 0.27 -> 0.20 ms, on 7x7 x 960 0.22 -> 0.12
# ms, 5x5 on 14x14 x 480 0.33 -> 0.30 ms, 3x3 s2 from 28x28 x 192 0.17 -> 0.12 ms;
# with 28x28 outputs the stencil's rows are long enough (3x3: equal, 5x5: 0.47
# against 0.52 ms channels-last).
CHANNELS_LAST_MAX_OUTPUTS = 256
# The route's two transposed copies (x and y) take at most this many bytes, so a
# call's extra memory stays bounded whatever the batch.
CHANNELS_LAST_MAX_BYTES = 8 << 20


def channels_last_problem(problem):
    """The problem of a channels-first Conv run on channels-last copies of x and y
    (CHANNELS_LAST_MAX_OUTPUTS), or None: 2 or more spatial axes, contiguous planes
    of the accumulation type, small output planes, copies within
    CHANNELS_LAST_MAX_BYTES, and the copies' rows summed with the channels as vector
    lanes (Problem.channel_vectors: depthwise, enough channels)."""
    geometry = problem.geometry
    if (problem.transpose or problem.channels_innermost or geometry.ndim < 2
            or problem.dtype != problem.accumulation or not problem.x_spatially_contiguous
            or not problem.y_rows_contiguous
            or math.prod(geometry.output_shape) > CHANNELS_LAST_MAX_OUTPUTS):
        return None
    positions = math.prod(geometry.input_shape) + math.prod(geometry.output_shape)
    copies = problem.batch * problem.out_channels * positions * np.dtype(problem.dtype).itemsize
    if copies > CHANNELS_LAST_MAX_BYTES:
        return None
    copied = replace(problem, channels_innermost=True,
                     x_spatially_contiguous=problem.in_channels <= 1,
                     y_rows_contiguous=problem.out_channels <= 1)
    return copied if copied.channel_vectors() else None


# --- depthwise planes --------------------------------------------------------
# 2-D Conv whose groups each have one input channel (depthwise, channel
# multipliers) runs a whole input plane at a time (convt/src/plane.h): the plane
# is copied into a zero-padded buffer split by column phase, and blocks of 8
# sums (rows x vectors) run over it with no edge cases, whatever the strides,
# dilations and pads; the stencil blocks' arithmetic (sums in kernel-row, then
# tap order from zero; padding multiplied like any input).  Planes whose padded
# buffer (per thread) takes more than this many bytes keep the stencil blocks.
# On 1 Zen 3 core (float32, best of interleaved runs) against the paths before
# (channels-last copies up to CHANNELS_LAST_MAX_OUTPUTS outputs, stencil blocks
# above), by buffer size: depthwise 3x3 on 7x7 x 960 (1.7 KiB) 1.39x faster,
# 14x14 x 576 1.62x, 5x5 on 14x14 x 480 1.41x, 5x5 on 28x28 x 240 1.31x, 3x3 s2
# from 28x28 x 192 1.52x, 3x3 on 56x56 x 144 (18 KiB) 1.30-1.40x, 3x3 s2 from
# 56x56 1.71x, 3x3 on 80x80 1.60x, on 112x112 x 128 (66 KiB) 1.03x (1.18x on 2
# threads), 3x3 s2 from 112x112 (86 KiB) 2.0x, 3x3 on 160x160 (114 KiB) 1.12x,
# on 224x224 (217 KiB) 1.13x; 5x5 on 512x512 x 3 (1 MiB) 0.87x: there the
# stencil blocks' long rows win.  (Since then, 3x3, 5x5 and 7x7 planes with unit
# row dilation share each block's loads between its rows: on 1 Zen 4 core 5x5 on
# 28x28 x 240 1.5x, 3x3 on 112x112 x 128 1.2x faster again.)
PLANE_MAX_BYTES = 256 * 1024
PLANE_MAX_TAPS = 32              # CONVT_PLANE_MAX_TAPS: taps along a kernel row
# Threads are granted per MIN_MULTIPLY_ADDS_PER_THREAD of work, a measure of the
# GEMM engine's time; a plane's multiply-add takes about this many of the GEMM's
# (one load each, short rows: 4.7 G/s on 7x7 planes, 11 G/s on 56x56, against
# about 40 G/s for the GEMM engine on one Zen 3 core).  So MobileNet's late
# depthwise layers get the second core: 3x3 on 7x7 x 960 (0.4 M multiply-adds)
# took 0.154 ms on 2 threads against 0.223 ms on one after a 50 ms pause, and on
# 14x14 x 576 0.217 against 0.302 ms (medians, 2 Zen 3 cores).
PLANE_WORK_SCALE = 8
# The AVX-512 sets' planes sum 512-bit vectors (a block: 4 rows x 2 vectors, 32
# floats of a row, or 8 rows of one vector); the AVX2 set's 256-bit ones.  The
# wider blocks load half as many vectors per output but cover a row in coarser
# steps, so a call runs them (wide_planes) where they compute no more columns per
# row than 256-bit blocks and every loaded vector feeds enough multiply-adds:
# rows of unit stride and dilation (blocks share their loads), and kernel rows of
# at least PLANE_WIDE_MIN_TAPS taps, or output rows of one 512-bit vector (blocks
# of 8 rows).  On 1 Zen 4 core, 512-bit against 256-bit planes (float32, one
# process per run, alternating): 7x7 on 14x14 x 384 1.45x, on 28x28 1.26x, on
# 56x56 1.15x; 5x5 on 14x14 x 480 1.33x, on 28x28 x 240 1.14x; 3x3 on 14x14 x
# 576 1.12x; float64 5x5 on 28x28 1.14x, 3x3 on 7x7 1.16x.  Elsewhere 256-bit
# won: 3x3 on 28x28 and 56x56 (0.91-0.96x), stride 2 (0.97-1.0x), row
# dilation 2 (0.79x), and wherever the wider steps compute more columns (7-wide
# rows: 0.6-0.7x; 112-wide: 0.89x).
PLANE_WIDE_MIN_TAPS = 5
# Planes (images x groups) a call needs, at least (see plane_route); None:
# work_items_target(), as many as a plan aims at work items.
PLANE_MIN_PLANES = None
# Depthwise calls (one input and one output channel per group, at least
# PLANE_CHANNELS_MIN_CHANNELS of them) whose rows are strided and whose output
# rows are at most PLANE_CHANNELS_MAX_WIDTH long run with channels side by side
# (convt._planes: the channels as vector lanes, PLANE_CHANNELS_BLOCK per work
# item, a multiple of 32).  A strided plane's output rows that short leave the
# plane sums' 256-bit vectors partly idle, one row per vector, with no loads to
# share.  On 1 Zen 4 core (AVX2 planes; separate processes, two runs each),
# against the planes: 576 channels 3x3 s2 14x14 -> 7x7 1.35-2.0x, 672 channels
# 5x5 s2 14x14 -> 7x7 2.2x faster; 256 channels 3x3 s2 16x16 -> 8x8 the same,
# 32 channels 7% slower.  Where the planes share loads (unit row stride) or fill
# their vectors, they kept up or won: 3x3 s1 on 7x7 x 960 and x 1152 0.9-1.5x,
# on 8x8 x 512 0.82x, 5x5 s1 on 7x7 0.7-1.4x, and strided rows of 14 outputs
# (0.8-0.93x) or more (28: 0.5x).  Sharing each input vector's loads across the
# outputs of a unit-stride row (as the planes do) made 3x3 s1 on 7x7 and 14x14
# 1.05-1.3x faster than the planes on 1 core, but 0.7-1.0x on 2, so unit strides
# keep the planes.
PLANE_CHANNELS_MAX_WIDTH = 8
PLANE_CHANNELS_MIN_STRIDE = 2
PLANE_CHANNELS_MIN_CHANNELS = 64
PLANE_CHANNELS_BLOCK = 64
# A thread's buffers (the block's input planes, padded, and its sums) at most:
# tall planes of short rows keep the planes.
PLANE_CHANNELS_MAX_BYTES = 1 << 20


def plane_bytes(problem):
    """Bytes of a thread's padded plane buffer (sized by convt_plane_prepare in plane.h)."""
    g = problem.geometry
    return load().plane_buffer_elements(g.input_shape, g.output_shape, g.kernel_shape,
                                        g.pads_begin, g.strides,
                                        g.dilations) * np.dtype(problem.dtype).itemsize


def plane_route(problem):
    """Whether a call runs as depthwise planes: a 2-D Conv with one input channel
    and at most STENCIL_MAX_OUTPUTS output channels per group (more make a GEMM
    worth it: 1 -> 64 channels 9x9 over 128x128 ran 0.69x the GEMM engine's
    speed), planes for every work item a plan aims at (PLANE_MIN_PLANES: a plane
    is never split, so 3 RGB planes would leave cores idle), float32 or float64,
    unit column strides in x and y, at most PLANE_MAX_TAPS taps along a kernel
    row, and a padded plane buffer of at most PLANE_MAX_BYTES."""
    geometry = problem.geometry
    return (not problem.transpose and geometry.ndim == 2 and problem.cg == 1
            and problem.mg <= STENCIL_MAX_OUTPUTS
            and problem.batch * problem.group >= (work_items_target() if PLANE_MIN_PLANES is None
                                                  else PLANE_MIN_PLANES)
            and problem.dtype in (np.float32, np.float64)
            and problem.x_spatially_contiguous and problem.y_rows_contiguous
            and geometry.kernel_shape[-1] <= PLANE_MAX_TAPS  # before plane_bytes: it checks
            and plane_bytes(problem) <= PLANE_MAX_BYTES)


def _plane_columns(width, lanes):
    """Outputs a plane's blocks compute per row of ``width`` (plane_body.h: rows of
    one vector in blocks of 8 rows, longer ones in steps of 2 vectors)."""
    return lanes if width <= lanes else -(-width // (2 * lanes)) * 2 * lanes


def wide_planes(problem):
    """Whether a plane call runs 512-bit blocks where the CPU has both widths (see
    PLANE_WIDE_MIN_TAPS)."""
    g = problem.geometry
    lanes = 32 // np.dtype(problem.dtype).itemsize  # per 256-bit vector
    width = g.output_shape[-1]
    return (g.strides[0] == 1 and g.dilations[0] == 1
            and _plane_columns(width, 2 * lanes) <= _plane_columns(width, lanes)
            and (g.kernel_shape[-1] >= PLANE_WIDE_MIN_TAPS or width <= 2 * lanes))


def plane_channel_block(problem):
    """Channels per work item where a plane call runs with channels side by side
    (see PLANE_CHANNELS_MAX_WIDTH), else 0: PLANE_CHANNELS_BLOCK channels shared
    equally over the fewest blocks, in multiples of 32."""
    g = problem.geometry
    if (problem.mg != 1 or problem.group < PLANE_CHANNELS_MIN_CHANNELS
            or min(g.pads_begin) < 0 or g.strides[-1] < PLANE_CHANNELS_MIN_STRIDE
            or g.output_shape[-1] > PLANE_CHANNELS_MAX_WIDTH):
        return 0
    blocks = -(-problem.group // PLANE_CHANNELS_BLOCK)
    share = -(-problem.group // blocks)
    block = -(-share // 32) * 32
    buffer = load().plane_channels_bytes(g.input_shape, g.output_shape, g.kernel_shape,
                                         g.strides, g.dilations, block,
                                         np.dtype(problem.dtype).itemsize)
    return block if buffer <= PLANE_CHANNELS_MAX_BYTES else 0


def plane_family(problem, family, forced=None):
    """The kernel set whose planes serve a plane call on ``family``: an AVX-512 set
    hands calls that wide_planes declines to AVX2's 256-bit planes, unless a set
    was forced (``forced``, or CONVT_GEMM_BACKEND)."""
    if (family in ("avx512", "avx512_wide") and not forced
            and not _environ.value(KERNEL_SET_VARIABLE)
            and "avx2" in available_kernel_sets() and not wide_planes(problem)):
        return "avx2"
    return family


# --- Winograd ---------------------------------------------------------------
# float32 Conv with 3x3 kernels, stride 1 and no dilation runs Winograd F(2x2, 3x3)
# (convt/_winograd.py), as does such a ConvTranspose without output padding (the
# Conv with the flipped kernel), and 3-D Conv with 3x3x3 kernels F(2x2x2, 3x3x3): 16 products per 2x2 outputs and input channel
# instead of 36, for transforms that only add.  Its float32 error against float64 (3x3 64->64
# on 56x56: largest 2.7e-5, RMS 4.9e-6) stays below that of engines summing the
# 576 products in one run (PyTorch 1.2e-4 / 1.0e-5), though above the GEMM
# engine's blocked sums (2.2e-5 / 3.7e-6).  It needs channels to amortise the
# transforms and tiles to amortise streaming the 16 transformed weight matrices.
# On 1 Zen 3 thread (in-process A/B, medians): 64 -> 64 on 56x56 1.4x, 32 -> 32 on
# 112x112 1.6x, 128 on 28x28 1.1-1.45x faster than the GEMM engine; on 14x14 (49
# tiles) 64 to 512 channels 1.14-1.35x; 16 -> 16 on 128x128 0.75x; 512 on 7x7 (16
# tiles) 0.84x: 16 MiB of weights streamed for 64 outputs per channel.
# Stride-2 3x3 Conv layers (ResNet's downsampling) keep the GEMM engine: a stride-2
# F(2x2, 3x3) (per axis the outer taps an F(2, 2) over every other input, the middle
# tap one product per output: 25 products per 2x2 outputs and channel instead of
# 36) ran 0.70-0.97x the GEMM engine's speed on 1 Zen 4 thread (best times; 128 ->
# 256 and 128 -> 128 on 56x56, 64 -> 128 on 56x56, 64 -> 64 on 112x112, 256 -> 256
# on 28x28, 32 -> 64 on 128x128) and tied at 2 on 128 -> 256: its transformed
# weights, 2.8 times w, stream through L2 for every block of tiles, and
# the transforms took 17-25% of the call, where the GEMM engine's kernels run at
# 95% of the FMA peak.
WINOGRAD_MIN_CHANNELS = 32      # input and output channels per group, at least
WINOGRAD_MIN_TILES = 36         # 2x2 output tiles per image, at least
# Small calls keep the GEMM engine: the transforms' and the driver's fixed costs
# made Winograd 0.77-0.94x on 32-64 channels over 12x12 and 16x16 (2-9 million
# multiply-adds), a tie on 128 x 12x12 (21 million) and 1.03-1.28x from 64 x 24x24
# (21 million) up; in 3-D 0.87-0.92x on 32 x 12^3 (48 million), 0.91-1.02x on
# 32 x 24^3 (382 million), 1.21-1.31x on 64 x 16^3 (453 million) and 32 x 32^3.
# Counted as the call's direct multiply-adds (Problem.multiply_adds).
WINOGRAD_MIN_WORK = 2**24       # 2-D
WINOGRAD_3D_MIN_WORK = 2**28
# Blocking, swept on Zen 3 at 1 and 2 threads (64 channels on 56x56, batch 8, 128 on
# 28x28, 256 on 14x14, 32 on 112x112): 64 tiles per block was best (32: 20-28% slower,
# 96 and 128: 0-12%); input chunks of 32-128 channels tied.  Each work item transforms
# its block's inputs for its output channels, so fewer, wider output chunks transform
# them fewer times: 128 channels per item (3-D: 64) against 64 (32) ran 256 -> 256 on
# 14x14 1.05-1.29x faster (best of 4 / mean of medians, 1 and 2 Zen 3 threads), 128 on
# 28x28 1.07x, 3-D 64 -> 64 on 24^3 1.2-1.35x (alternating processes); 64-channel
# layers keep one chunk either way.  Small maps still get items for every core: their
# blocks shrink (below).
WINOGRAD_TILES = 64             # tiles per block (the GEMM's positions): bounds buffers
WINOGRAD_CHANNEL_CHUNK = 64     # input channels transformed at once
WINOGRAD_OUT_CHUNK = 128        # output channels per work item (rounded to row blocks)
# ConvTranspose's other engines (col2im) sum each tap's channels before the taps,
# more accurately than one run; Winograd's products of a ConvTranspose are summed
# in blocks of this many channels to stay below them (8 x 64 -> 64 on 56x56, float32
# against float64: blocks of 32 RMS 4.6e-6, 16 3.8e-6, 8 3.6e-6; PyTorch 3.8e-6;
# blocks of 8 cost 14% of the call, 16 6%).  Conv's keep the GEMM engine's blocks.
WINOGRAD_TRANSPOSE_SUM_BLOCK = 8
# F(2x2, 2x2) on the stride phases of a 2-D ConvTranspose with kernel 2 s (k4 s2): 9
# products per 2x2 outputs of a phase and input channel instead of 16, for transforms
# that only add, but 2.25 times the weights to stream.  On 2 Zen 3 vCPUs
# (benchmarks/tune.py --only winograd, medians at 2 / 1 threads): DCGAN's 256 -> 128
# on 64x64 (2^31 multiply-adds) 1.05-1.18x / 1.10x the GEMM engine's speed (1.15-1.4x
# with each engine looping in its own process), 64 -> 64 on 128x128 1.15x / 1.39x,
# 4 x 128 -> 64 on 32x32 (2^29) 1.09-1.14x / 1.14x; at 2^28 64 -> 64 on 64x64 won
# (1.04-1.18x) but 128 -> 128 on 32x32 lost (0.76-0.82x / 0.98x), at 2^27 256 -> 128
# on 16x16 0.67-0.70x / 0.94x, and with 32 channels 0.79-0.96x / 0.83x (32 -> 32 on
# 64x64).  Called back to back with another layer, which evicts its weights from the
# caches, it tied with the GEMM engine on DCGAN's layer.
WINOGRAD_PHASE_MIN_CHANNELS = 64
WINOGRAD_PHASE_MIN_WORK = 2**29
# Its products are summed in blocks of this many channels: float32 error against
# float64 on DCGAN's layer (256 -> 128 on 64x64), largest / RMS: blocks of 16
# 7.6e-7 / 1.1e-7, 64 1.1e-6 / 1.5e-7 (PyTorch 1.1e-6 / 1.4e-7, the GEMM engine
# 5.4e-7 / 8.1e-8); blocks of 16 cost about 7% of the call.
WINOGRAD_PHASE_SUM_BLOCK = 16
# Its work items hold their block of y rows (a row residue's phases interleaved,
# written to y once rather than once per phase): output channels per item are cut
# to keep that block at most this size.  Each item transforms its block's inputs
# for its output channels, so items of more channels transform them fewer times:
# up to 128 channels per item (WINOGRAD_PHASE_OUT_CHUNK) and a 256 KiB block
# instead of 64 and 128 KiB ran DCGAN's 256 -> 128 on 64x64 1.10x faster at 1 Zen 3
# thread (best of 4 rounds 40.7 against 44.6 ms; 1.04x at 2), its float16 twin 1.19x,
# 512 -> 256 on 32x32 1.24x, 64 -> 64 on 128x128 1.17x; the batch-8 VAE decoder
# (64 channels) tied.  Per thread the workspace grows to about 0.7 MiB.
WINOGRAD_PHASE_OUT_CHUNK = 128
WINOGRAD_PHASE_BLOCK_BYTES = 256 * 1024


def winograd_route(problem, decision):
    """Whether a call runs Winograd: a float32 2-D ConvTranspose whose kernel is twice
    its stride, without dilation (F(2x2, 2x2) on each stride phase; enough channels
    and work: WINOGRAD_PHASE_MIN_CHANNELS, WINOGRAD_PHASE_MIN_WORK), a float32 2-D
    Conv or ConvTranspose with 3x3
    kernels, stride 1, no dilation and no output padding (F(2x2, 3x3)), or a 3-D
    Conv with 3x3x3 kernels, stride 1, no dilation (F(2x2x2, 3x3x3); not
    ConvTranspose: col2im engines' float32 error stays lower there, RMS 3.9e-6 against
    5.0e-6 on 32 channels over 24^3), on the GEMM engine with a compiled kernel set,
    enough channels per group, tiles and work (WINOGRAD_MIN_CHANNELS,
    WINOGRAD_MIN_TILES, WINOGRAD_MIN_WORK, WINOGRAD_3D_MIN_WORK).  Dilated layers keep the GEMM engine: each residue of their
    outputs is a dense layer over strided views, which ran 1.12x the GEMM engine's speed
    on 64 channels over 56x56 (d2) but 0.84-0.93x on DeepLab's 256 channels over 33x33
    (residues of at most 81 tiles, the input read and the output written with stride 2)."""
    geometry = problem.geometry
    ones = (1,) * geometry.ndim
    if winograd_phased(problem):  # narrow types widened on the way in, rounded once out
        narrow = problem.dtype.name in NARROW
        return ((problem.dtype == np.float32 or narrow and problem.x_spatially_contiguous
                 and problem.y_rows_contiguous)
                and decision.engine == "gemm"
                and decision.kernel_set != "blas"
                and min(problem.cg, problem.mg) >= WINOGRAD_PHASE_MIN_CHANNELS
                and math.prod(winograd_tiles(geometry, geometry.strides)) >= WINOGRAD_MIN_TILES
                and problem.multiply_adds() >= WINOGRAD_PHASE_MIN_WORK)
    if (geometry.ndim not in (2, 3) or geometry.kernel_shape != (3,) * geometry.ndim
            or any(geometry.output_padding) or geometry.strides != ones
            or geometry.dilations != ones or (geometry.ndim == 3 and problem.transpose)
            or problem.dtype != np.float32
            or decision.engine != "gemm" or decision.kernel_set == "blas"
            or min(problem.cg, problem.mg) < WINOGRAD_MIN_CHANNELS):
        return False
    least = WINOGRAD_MIN_WORK if geometry.ndim == 2 else WINOGRAD_3D_MIN_WORK
    return (math.prod(winograd_tiles(geometry)) >= WINOGRAD_MIN_TILES
            and problem.multiply_adds() >= least)


# --- col2im (convt._col2im) ----------------------------------------------------
# ConvTranspose on maps of at most COL2IM_MAX_POSITIONS input positions whose
# weights take at least COL2IM_MIN_WEIGHT_BYTES: each weight then serves a few
# positions only, and the GEMM engine's three reads of the weights (them, the
# copy its cache compares them with, the packed weights) bound the call, where
# col2im reads them once.  k4s2 on 8x8, 1 Zen 3 thread, against the GEMM engine:
# 128 KiB of weights (64 -> 32) 0.87x, 256 KiB 0.98-1.08x, 512 KiB (128 -> 64)
# 1.22x (1.07x at 2 threads), 8 MiB (512 -> 256) 1.5x.
# Past 64 positions it needs more weight per position: 512 -> 256 (8 MiB) on 10x10
# and 12x12 1.31x and 1.36x (1.24x and 1.27x at 2 threads), 256 -> 128 (2 MiB) on
# 10x10 and 12x12 1.06x and 1.07x (1.03x at 2 threads), but on 16x16 0.92x (0.89x),
# 128 -> 64 (512 KiB) on 16x16 0.80x.
# Positions count every image's: a batch's are stacked (col2im_positions).
COL2IM_MAX_POSITIONS = 144
# Past that, up to COL2IM_MAX_STACKED_POSITIONS, where every position has at least
# COL2IM_STACKED_WEIGHT_BYTES of weights.  On 1 / 2 Zen 4 cores against the GEMM
# engine: 1024 -> 512 k4s2 on 4x4 at batch 16 (256 positions, 128 KiB each) 1.55x /
# 1.5x faster, 512 -> 256 on 8x8 at batch 4 (256, 32 KiB each) 1.05-1.08x, on one
# 16x16 map (256, 32 KiB) level; at batch 32 on 4x4 (512 positions, 64 KiB each) and
# 8 on 8x8 (512, 16 KiB) level; 256 -> 128 on 16x16 (256, 8 KiB) 0.87x / 0.77x.
COL2IM_MAX_STACKED_POSITIONS = 256
COL2IM_STACKED_WEIGHT_BYTES = 32 << 10
COL2IM_MIN_WEIGHT_BYTES = 512 << 10
COL2IM_MIN_WEIGHT_BYTES_PER_POSITION = 8 << 10
# Its products over the layer's multiply-adds (those reaching the output), at most.
COL2IM_MAX_CROPPED = 1.5
# The copy of x it makes (every image's positions in the kernels' row blocks), at most.
COL2IM_MAX_INPUT_BYTES = 16 << 20
# A work item's products (positions x its channels' taps) stay within this.
COL2IM_PRODUCT_BYTES = 128 * 1024
# The panels of w a work item copies per K chunk (its columns x the chunk) stay
# within this share of a core's L2 (col2im_panel_bytes).  w is read once per
# call, a run of the item's columns from each row in turn; the panels' size sets
# that run's length, and runs of 1 KiB (a 128 KiB budget) kept w's reads from
# memory far below its bandwidth.  On 1 and 2 Zen 4 cores (1 MiB L2; in one
# process, alternating, caches warm and flushed) against 128 KiB: 1024 -> 512 on
# 4x4 1.29-1.43x and 512 -> 256 on 8x8 1.03-1.11x faster with 512 KiB, 1.24x and
# 1.03-1.11x with 256 KiB.
COL2IM_PANEL_L2_SHARE = 0.5
# Input channels per kernel call: each call sums them into its products (blocked
# sums of 64 steps), whose loads and stores a shorter call pays more often.
COL2IM_DEPTH = 128
# col2im over at most this many input positions runs avx512_wide's kernels (8
# rows x 2 vectors) wherever the CPU has them, also where 512-bit FMAs are split:
# its in-place reads of w (gemm_stream) fetch two lines of a row per step, and
# 16 or 64 positions make whole blocks of 8 rows (12 + 4 with the AVX-512 set's
# 12-row kernels).  On 1 / 2 Zen 4 cores (split FMAs; in turn, one process per
# call) against the AVX-512 set: 1024 -> 512 k4s2 on 4x4 1.4x / 1.5x, a 1-D
# 1024 -> 512 k16s8 on 16 positions 1.4x / 1.5x, 512 -> 256 on 8x8 1.1x / 1.08x,
# 1024 -> 512 on 6x6 1.12x / 1.0x faster; on 12x12 (144 positions) 0.97x / 0.94x.
COL2IM_WIDE_MAX_POSITIONS = 64


def col2im_route(problem, decision):
    """Whether a ConvTranspose runs col2im (convt._col2im): float32 or float64, on the
    GEMM engine with a compiled kernel set, not served by Winograd, taps overlapping along some axis (a
    kernel longer than its stride; where they do not, as in k2s2, each stride phase
    is a one-tap product over x in place, which ran 0.8x as fast by col2im on 512 ->
    256 over 8x8), at most COL2IM_MAX_POSITIONS input positions per image, at least
    COL2IM_MIN_WEIGHT_BYTES of weights and COL2IM_MIN_WEIGHT_BYTES_PER_POSITION per
    position, an x of at most COL2IM_MAX_INPUT_BYTES
    (col2im copies it whole), and at most COL2IM_MAX_CROPPED times the
    layer's multiply-adds in products (pads crop the products of edge taps: a kernel
    far longer than the input must not cost its length).  Positions count every
    image's (col2im_positions); up to COL2IM_MAX_STACKED_POSITIONS of them where each
    has COL2IM_STACKED_WEIGHT_BYTES of weights."""
    positions = col2im_positions(problem)
    weight_bytes = (problem.group * problem.cg * problem.mg
                    * math.prod(problem.geometry.kernel_shape) * problem.dtype.itemsize)
    geometry = problem.geometry
    overlapping = any(geometry.dilations[a] * (geometry.kernel_shape[a] - 1) >= geometry.strides[a]
                      for a in range(geometry.ndim))
    # col2im multiplies every tap of every position, also those the pads crop
    products = (problem.group * problem.cg * problem.mg * positions
                * math.prod(geometry.kernel_shape))
    # x is copied once into the kernels' row blocks: bounded, whatever the batch
    input_bytes = problem.batch * problem.group * problem.cg * positions * problem.dtype.itemsize
    return (problem.transpose and problem.dtype in (np.float32, np.float64)
            and decision.engine == "gemm" and decision.kernel_set != "blas"
            and not winograd_route(problem, decision) and overlapping
            and (positions <= COL2IM_MAX_POSITIONS
                 or positions <= COL2IM_MAX_STACKED_POSITIONS
                 and weight_bytes >= COL2IM_STACKED_WEIGHT_BYTES * positions)
            and weight_bytes >= COL2IM_MIN_WEIGHT_BYTES
            and weight_bytes >= COL2IM_MIN_WEIGHT_BYTES_PER_POSITION * positions
            and input_bytes <= COL2IM_MAX_INPUT_BYTES
            and products <= COL2IM_MAX_CROPPED * problem.multiply_adds())


# Conv by bands of output rows (convt._bands): 1-D to 3-D Conv whose last axis
# is strided, float32 or float64, on the sets listed here (their gemm_t kernels
# read a stride-2 row's positions at constant displacements), with a depth
# (input channels per group x taps) of at least BAND_MIN_DEPTH, output channels
# per group in whole vectors of the set's lanes and at least BAND_MIN_OUTPUTS of
# them, kernel rows of at least BAND_MIN_TAPS taps and more than
# TRANSPOSED_MAX_POSITIONS outputs per image (each band reads all the weights:
# small maps, whose bands are few rows of few outputs, keep the GEMM engine).
# On 2 Zen 4 cores (split 512-bit FMAs), bands against the GEMM engine, both
# alternating call by call in one process, medians of the ratios, 1 / 2 threads:
# 3x3 s2 128 -> 256 over 56x56 1.02x / 1.01x (float64 1.10x), 256 -> 512 over
# 28x28 1.10x / 1.13x, 64 -> 128 over 112x112 1.0x / 1.04x, 64 -> 256 over
# 56x56 1.03x; level: 1-D k4 s2 256 -> 256 over 4096, 7x7 s2 32 -> 64 over
# 224x224 (0.99x); 3-D 3x3x3 s2 16 -> 32 over 64^3 1.12x / 1.12x, 32 -> 32 over
# 96^3 1.23x / 1.26x; slower, so excluded: 1x1 s2 256 -> 512 over 56x56 0.85x,
# 3x3 s2 512 -> 512 onto 7x7 0.89x.
BAND_SETS = ("avx512",)
BAND_MIN_STRIDE = 2
BAND_MIN_TAPS = 3
BAND_MIN_DEPTH = 256
BAND_MIN_OUTPUTS = 32
# A band's zero-padded input rows (per thread): they stay in L2 while every
# vector of output channels reads them.  Each band streams all the weights from
# L3 once, yet fewer, taller bands did not pay on 2 Zen 4 cores (2 threads,
# separate processes, A B A B): bands of 7 rows (4 items, 430 KiB buffers) or
# of 4 (7 items) against 14 of 2 rows ran level to 10% slower on 3x3 s2 128 ->
# 256 over 56x56, 256 -> 512 over 28x28 and the 3-D 32^3 layer; nor did half
# the vectors per item, half-major, which keeps each thread's half of the
# weights in L2 (0.94-1.0x: the band's copy is made twice).  On that first
# layer the kernel runs at 96% of the FMA peak; the rest is the copy and the
# transposed stores.
BAND_BUFFER_BYTES = 256 * 1024
# Work items a band plan aims for per core (at most MAX_WORK_ITEMS): more, shorter
# bands than the GEMM engine's items, so that the threads finish together (an item
# cannot be split).  On 2 Zen 4 cores, 3x3 s2 128 -> 256 over 56x56 in 14 bands of
# 2 rows against 10 of 3: 1.04x at 2 threads, 1.0x at 1; 64 -> 128 over 112x112
# 1.04x / 1.0x.
BAND_WORK_ITEMS_PER_CORE = 7


def band_route(problem, decision):
    """Whether a Conv runs by bands of output rows (convt._bands)."""
    geometry = problem.geometry
    if (problem.transpose or geometry.ndim > 3 or geometry.strides[-1] < BAND_MIN_STRIDE
            or problem.dtype not in (np.float32, np.float64)
            or decision.engine != "gemm" or decision.kernel_set not in BAND_SETS
            or problem.cg * math.prod(geometry.kernel_shape) < BAND_MIN_DEPTH
            or problem.mg < BAND_MIN_OUTPUTS or geometry.kernel_shape[-1] < BAND_MIN_TAPS
            or math.prod(geometry.output_shape) <= TRANSPOSED_MAX_POSITIONS):
        return False
    kernels = family_named(decision.kernel_set).kernel_set(decision.accumulation)
    if not kernels.has(SET_TRANSPOSED) or problem.mg % kernels.nr:
        return False
    from ._bands import fits  # (imports this module)
    return fits(problem, decision)


# Conv layers whose weights are read from w block by block during the call
# (GemmEngine.run's stream_weights) rather than packed once and remembered: more
# than STREAM_MIN_WEIGHT_BYTES of weights over at most STREAM_MAX_POSITIONS outputs
# per image.  A remembered packing costs each call a comparison of w with its copy
# and then the packed weights, three times the weights through the caches; the
# stream reads w once but transposes each block as it goes, which costs about what
# the comparison does.  On Zen 3 (1 and 2 threads, separate processes, alternating):
# 512 -> 512 3x3 over 7x7 (9 MiB) 1.1-1.25x and 512 -> 1024 3x3 s2 over 14x14
# (18 MiB) 1.2-1.35x faster streamed; 1024 -> 2048 1x1 s2 (8 MiB) 0.95-1.0x,
# 2048 -> 512 1x1 over 7x7 (4 MiB) 0.85-0.95x, 512 -> 512 3x3 over 14x14 (196
# outputs) 0.9-1.05x.
STREAM_MIN_WEIGHT_BYTES = 8 << 20
STREAM_MAX_POSITIONS = 64
# The AVX-512 set streams from fewer bytes: its transposed kernels (one 16-row
# vector of weights x up to 12 broadcast positions) waste no column on a 7x7 map,
# and the stream reads w once where the packing reads it, its copy and the packed
# weights.  On 2 Zen 4 cores (split 512-bit FMAs; 1 / 2 threads, separate
# processes, caches warm) streamed: 256 -> 512 3x3 over 8x8 (4.5 MiB) 1.19x /
# 1.23x, 512 -> 2048 1x1 over 7x7 (4 MiB) 1.19x / 1.11x, 1024 -> 2048 1x1 s2
# over 14x14 1.12x / 1.08x, 256 -> 256 3x3 over 7x7 (2.25 MiB) 1.15x / 1.12x; 1
# MiB ranged from 0.94x to 1.27x and 600 KiB (160 -> 960 1x1) lost 4-14%.
STREAM_MIN_WEIGHT_BYTES_AVX512 = 2 << 20


def weights_may_stream(problem, accumulation, kernel_set=None):
    """The problem's side of streams_weights (the plan's side needs a plan): a
    single-image Conv of the accumulation type with more than
    STREAM_MIN_WEIGHT_BYTES (STREAM_MIN_WEIGHT_BYTES_AVX512 on ``kernel_set``
    "avx512") of weights over at most STREAM_MAX_POSITIONS outputs."""
    weight_bytes = (problem.out_channels * problem.cg
                    * math.prod(problem.geometry.kernel_shape) * problem.dtype.itemsize)
    least = STREAM_MIN_WEIGHT_BYTES_AVX512 if kernel_set == "avx512" else STREAM_MIN_WEIGHT_BYTES
    return (not problem.transpose and problem.dtype == accumulation and problem.batch == 1
            and weight_bytes > least
            and math.prod(problem.geometry.output_shape) <= STREAM_MAX_POSITIONS)


def streams_weights(problem, decision, plan, w_strides):
    """Whether a Conv on the GEMM engine reads its weights from w itself, one row
    block and K chunk at a time (convt._gemm.pxi, streamed_weights), instead of
    packing them.  A packed copy is remembered between calls (convt._weight_cache),
    but every call compares w with the copy it came from: on 512 -> 512 3x3 over 7x7
    that comparison and the packed weights it pushes out of the caches took a
    quarter of the call.  Streaming reads w once per call, so it serves large weights
    over few outputs (STREAM_MIN_WEIGHT_BYTES, STREAM_MAX_POSITIONS) where each row
    block is used by one work item (one image, one tile; the row groups split the
    rows) of a transposed stack of one phase whose taps are the kernel's in C order,
    with w of the accumulation type and each output channel's weights contiguous
    (``w_strides``: the element strides of w's (group, C/group, M/group, k...) view)."""
    kernel = problem.geometry.kernel_shape
    taps = math.prod(kernel)
    if (decision.engine != "gemm" or decision.kernel_set == "blas"
            or not weights_may_stream(problem, decision.accumulation, decision.kernel_set)
            or len(plan.stacks) != 1):
        return False
    stack = plan.stacks[0]
    in_order = [taps] + [math.prod(kernel[a + 1:]) for a in range(len(kernel))]
    return bool(stack["transposed"] and stack["phases"] == 1 and stack["taps"] == taps
                and stack["items"] == stack["row_groups"]
                and [list(k) for k in plan.kernel_index] == [list(k) for k in np.ndindex(kernel)]
                and list(w_strides[1:2]) + list(w_strides[3:]) == in_order)


def winograd_phased(problem):
    """Whether a call is a 2-D ConvTranspose whose kernel is twice its stride on each
    axis, without dilation: each stride phase of its output is a 2x2 Conv of x, which
    Winograd F(2x2, 2x2) serves (convt._winograd.phases_of)."""
    geometry = problem.geometry
    return (problem.transpose and geometry.ndim == 2 and geometry.dilations == (1, 1)
            and all(k == 2 * s for k, s in zip(geometry.kernel_shape, geometry.strides)))


def winograd_tiles(geometry, strides=None):
    """Tiles of 2 outputs per axis ((planes,) rows, columns) of the output, or of its
    first stride phase (the largest) when ``strides`` are given."""
    sizes = geometry.output_shape if strides is None else [
        -(-size // stride) for size, stride in zip(geometry.output_shape, strides)]
    return tuple((size + 1) // 2 for size in sizes)


# --- limits ------------------------------------------------------------------
# Work refused before it starts: 2^50 multiply-adds take hours on any CPU
# (about 3 h at 100 GFLOP/s), so such a call is a mistake in its attributes.
MAX_MULTIPLY_ADDS = 2**50


def check_work(work):
    """A ValueError, with the estimate, for ``work`` multiply-adds that no machine
    does in reasonable time."""
    if work > MAX_MULTIPLY_ADDS:
        raise ValueError(
            f"This call would perform {work:.3g} multiply-adds (about {work / 1e11 / 3600:.3g} "
            f"hours at 100 GFLOP/s); convt refuses more than {MAX_MULTIPLY_ADDS:.3g}. Check "
            f"the shapes and the strides, dilations and pads: a kernel far longer than the "
            f"input costs only what reaches the output.")


# --- threads -----------------------------------------------------------------
# More threads than this only add workspace, never speed (the pool's limit).
MAX_THREADS = 256
# Multiply-adds a thread must get before another one is woken.  Back to back,
# the second thread pays off on small maps: on 2 Zen 4 vCPUs (benchmarks/
# tune.py --only threads) a 1 x 64 -> 32 k4 s2 layer ran 1.09x faster on 2
# threads at 0.5 M multiply-adds, 1.12x at 2.1 M (the 8x8 map; robustness.py:
# 0.079 -> 0.059 ms, onnxruntime 0.057) and 1.39x at 8.4 M.  After an idle
# pause, waking the second core cost the 8x8 call 10-30% (0.33-0.35 -> 0.38-0.43
# ms; PyTorch 1.7 ms), and with the other core busy it still ran faster on 2
# threads than on 1 (robustness.py).  Calls under 2 M multiply-adds stay on one
# thread: there the gain is within the noise and the wake after a pause costs
# more than it saves.
MIN_MULTIPLY_ADDS_PER_THREAD = 1 << 20

# Calls below this many multiply-adds run on their caller alone, by default,
# while the pool finds the cores contended (convt_pool_contended: a recent call
# waited for a worker descheduled in the middle of an item, which on a loaded
# machine costs a scheduler slice, milliseconds; or, on Linux, other runnable
# threads leave too few free CPUs).  A second thread gains at most half of
# such a call, and one worker descheduled in the middle of an item costs the
# call a scheduler slice; above, it gains more than it risks.  On 2 Zen 3 cores
# with both kept busy by other processes, a 1 -> 1 k4s2 call on 512x512 (4 M
# multiply-adds) took 1.68 ms with 2 threads against 1.01 ms with one; a 64 ->
# 32 k4s2 call on 32x32 (34 M) had the same median on 2 threads and on one but
# a mean 1.5 times one thread's in one run of three (its stalls), while the
# same layer on 64x64 (134 M) and larger ran 1.4-1.7x faster on 2 threads.
CONTENDED_MAX_MULTIPLY_ADDS = 1 << 26

# Product-path stacks of one phase whose rows are whole vectors and whose B is
# a tile buffer (convt._plan._transposed) run the transposed kernels (gemm_t)
# where the set has them: the weights are the vectors, read whole and aligned
# from the packed rows, and the tile's positions are broadcast, so no B row
# straddles cache lines and no B panel is packed; the product is transposed
# once per tile.  1: on, 0: off.
TRANSPOSED_PRODUCTS = 1
# Sets whose transposed kernels serve only Conv layers whose weights stream from
# w (weights_may_stream): the AVX-512 set's gemm_t (one vector of 16 weight rows
# x 12 broadcast positions) ran slower than its 12 x 16 gemm wherever the weights
# are packed.  On 2 Zen 4 cores (1 thread, in one process, alternating): 512 ->
# 512 3x3 over 7x7 (9 MiB of weights, streamed) 2.2x faster transposed; k7 1-D
# and 1024 -> 256 1x1 over 14x14 15% slower, 3x3 s2 and 160 -> 960 1x1 over 7x7
# 5% slower, 3x3 over 14x14 to 56x56 within 1%.  (Zen 3's AVX2 set gains from
# its transposed kernels everywhere they apply: see convt._plan._transposed.)
# Measured again once calls kept within a tile row (SET_T_RUNS), on packed
# weights: 160 -> 960 1x1 over 7x7 0.99x, 128 -> 128 3x3 over 7x7 0.99x, 960 ->
# 160 1x1 1.0x, 256 -> 512 1x1 over 12x12 1.0x, 3x3 over 10x10 0.98x: ties, so
# the rule stands.
TRANSPOSED_FOR_STREAMED_WEIGHTS_ONLY = ("avx512",)
# ...and outputs of at most this many positions per image (7x7 to 12x12 maps),
# where a row block's few 16-position panels cost more per multiply-add than
# gemm_t's broadcasts.  Measured again on Zen 4 once the AVX-512 kernels kept
# their totals in registers (1 thread, one process per setting, alternating),
# transposed against standard: 1x1 on 7x7 160 -> 960 1.09x, 960 -> 160 1.08x,
# 320 -> 1280 1.14x, 960 -> 320 1.19x, batch 2 1.10x; 3x3 on 7x7 128 -> 128
# 1.11x, 256 -> 192 1.10x; 1x1 on 5x5 1.15-1.25x, 10x10 1.12x, 12x12 1.1-1.3x;
# 3x3 on 10x10 1.12x; ties: 3x3 on 8x8 and 12x12, 3x3 s2 to 7x7, ConvTranspose
# 3x3 on 7x7; 1x1 512 -> 512 on 8x8 0.98x.  Larger maps keep the standard
# kernels: 1x1 on 14x14 0.94-1.02x.
TRANSPOSED_MAX_POSITIONS = 144

# Outputs of at least this many bytes have their interleaved rows (stride-2 last
# axes: the phase-pair scatter, the direct engine's rows) written with
# non-temporal stores where the set has them (SET_STREAM_STORES): such an
# output cannot stay in the caches for the next layer (32 MiB is the largest
# last-level cache one core complex of current x86 CPUs shares: Zen 3/4's
# CCX), so keeping its lines there only costs each line a read for ownership
# and evicts the operands.  On 2 Zen 3 vCPUs (old and new builds in separate
# processes, alternating, 6 rounds; best / mean of medians) streamed rows ran
# unet3d's 64 -> 32 k2s2 on 32^3 (32 MiB) 1.19x / 1.17x as fast at 1 thread and
# 1.10x / 1.25x at 2, a 1 -> 1 k4s2 on 2048^2 (64 MiB) 1.59x / 1.36x and
# 1.29x / 1.28x, float64 16 -> 16 k4s2 on 256^2 (32 MiB) 1.14x / 1.20x and
# 1.18x / 1.28x.  16 MiB outputs (unet2d, vnet3d) gained 3-13%, but a following
# layer may still find such an output in the last-level cache, so they keep
# ordinary stores.  Only whole lines are streamed (interleave_stream), from the
# first a row reaches, and a row that starts inside a line (every row of an `out=`
# from np.empty, which starts 16 bytes into one) only if it spans 512 bytes: a
# float32 3-D k2s2 onto 64^3 (256-byte rows, stored plainly) takes 1.15-1.2x the
# time into such an out as into an aligned one on 2 Zen 4 cores (convt's own
# outputs of this size are aligned, convt._outputs).
STREAM_OUTPUT_MIN_BYTES = 32 << 20

KERNEL_SET_VARIABLE = "CONVT_GEMM_BACKEND"

# Flags of a kernel set (CONVT_SET_* in convt/src/kernel_set.h).
SET_PACK = 1 << 0
SET_HALF = 1 << 1
SET_PAIRS = 1 << 2
SET_MASKED_STORES = 1 << 3
SET_FUSED = 1 << 4
SET_PACK_PAIRS = 1 << 5
SET_TRANSPOSED = 1 << 6
SET_STREAM_STORES = 1 << 7
SET_STREAM_B = 1 << 8
SET_T_RUNS = 1 << 9

# Storage types (CONVT_F16 ... in convt/src/storage.h) by NumPy dtype name.
STORAGE = {"float16": 0, "bfloat16": 1, "float32": 2, "float64": 3}
NARROW = ("float16", "bfloat16")  # rounded once from float32


def accumulation_dtype(dtype):
    """float64 accumulates in float64, everything narrower in float32."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


@dataclass(frozen=True)
class KernelSet:
    """One (family, accumulation type) record of the compiled registry."""

    family: str
    mr: int
    nr: int
    flags: int

    def has(self, flag):
        return bool(self.flags & flag)


@dataclass(frozen=True)
class Family:
    """A CPU family's kernel sets and whether this machine can run them."""

    name: str
    available: bool
    f32: KernelSet
    f64: KernelSet

    def kernel_set(self, accumulation):
        return self.f64 if np.dtype(accumulation) == np.float64 else self.f32


@functools.cache
def families():
    """The compiled families, best last (convt/src/registry.c)."""
    _kernels = load()

    return tuple(
        Family(
            name=entry["name"],
            available=entry["available"],
            f32=KernelSet(entry["name"], *entry["f32"]),
            f64=KernelSet(entry["name"], *entry["f64"]),
        )
        for entry in _kernels.families()
    )


def available_kernel_sets():
    """Names of the kernel sets this machine can run, best last ('blas' is scipy's BLAS)."""
    return ["blas"] + [family.name for family in families() if family.available]


def preferred_kernel_set():
    """The best family this CPU runs; scipy's BLAS where only the portable set exists."""
    best = [family.name for family in families() if family.available][-1]
    return "blas" if best == "portable" else best


@dataclass(frozen=True)
class Problem:
    """A resolved ConvTranspose call, as the dispatch point sees it."""

    geometry: Geometry
    batch: int
    in_channels: int
    out_channels: int
    group: int
    dtype: np.dtype
    y_rows_contiguous: bool = True   # y's last axis has unit stride
    x_spatially_contiguous: bool = True
    channels_innermost: bool = False  # x's and y's channel axes have unit stride
    transpose: bool = True           # ConvTranspose; else Conv (geometry.strides decimate x)

    @property
    def cg(self):
        return self.in_channels // self.group

    @property
    def mg(self):
        return self.out_channels // self.group

    @property
    def accumulation(self):
        return accumulation_dtype(self.dtype)

    def channel_vectors(self):
        """Whether rows can be summed with the channels as vector lanes: channels
        innermost, one input channel per output channel, at least
        CHANNEL_ROW_MIN_CHANNELS of them, rows within CHANNEL_ROW_MAX."""
        if not (self.channels_innermost and self.cg == 1 and self.mg == 1
                and self.out_channels >= CHANNEL_ROW_MIN_CHANNELS):
            return False
        geometry = self.geometry
        converted = self.dtype != self.accumulation
        return (geometry.output_shape[-1] * self.out_channels <= CHANNEL_ROW_MAX
                and (not converted
                     or geometry.input_shape[-1] * self.out_channels <= CHANNEL_ROW_MAX))

    def output_bytes(self):
        """Bytes of the output y."""
        return (self.batch * self.out_channels * math.prod(self.geometry.output_shape)
                * self.dtype.itemsize)

    def multiply_adds(self):
        """Multiply-adds the engines perform (taps that reach no output excluded)."""
        from ._plan import performed_multiply_adds

        return performed_multiply_adds(self.geometry, self.batch, self.in_channels,
                                       self.out_channels, self.group, self.transpose)


@dataclass(frozen=True)
class Blocking:
    """What the GEMM planner needs of a decision (hashable: plans are cached on it)."""

    mr: int                      # rows per micro-kernel block (0: BLAS, one block)
    nr: int                      # positions per panel (0: BLAS, one panel per tile)
    itemsize: int                # accumulation bytes
    exact_stacks: bool
    exact_min_depth: int         # shallower reductions keep the product path
    residue_pairs: bool
    store_direct: bool           # exact stacks may store straight into y
    rounds_once: bool            # narrow storage: straight stores need one K chunk
    operand_bytes: int           # the tuning constants above, as decided
    product_bytes: int
    max_depth: int
    pair_max_depth: int          # the same for exact stacks storing packed pair panels
    min_tile: int
    min_work_items: int
    min_split_rows: int
    sum_blocks: tuple[int, int, int, int]  # (shallow, deep, split depth, few channels)
    transposed: bool = False     # product-path stacks may run gemm_t (see TRANSPOSED_PRODUCTS)
    packs_b: bool = True         # the kernels copy B panels (gemm_pack, pack_pair) for reuse
    half_panels: bool = False    # a last panel of <= NR / 2 positions runs the half kernels
    cores: int = 1               # the machine's (os.cpu_count): work items are cut for them

    def sum_block(self, depth, first_sums, chunk_depth=None):
        """Steps per blocked sum for a reduction of ``depth`` steps that other engines
        sum in runs of ``first_sums`` steps before adding the runs (ConvTranspose by
        col2im: a tap's channels; Conv: the whole depth).

        With ``chunk_depth`` (the steps of one K chunk, each a kernel call), the chunk
        is cut into as many equal blocks as it holds blocks of that length, to the
        nearest: every block ends with a finish (its C rows loaded, added to and
        stored), which a short last block pays for a few steps, so 144 steps in
        blocks of 64 run as 72 + 72, not 64 + 64 + 16.  A chunk that holds fewer
        than one and a half blocks keeps its short second one (one block would be no
        blocking at all: a grouped 3x3 Conv over 4 channels per group, 36 steps, had
        a 7% larger RMS error so), and few-channel blocks stay as they are: their
        length is what keeps the float32 error below col2im engines'.

        On 2 Zen 3 cores (1 thread, both rules alternating call by call in one
        process, medians of the ratios, two runs): a k16s8 vocoder (148-step
        chunks) 1.04-1.06x as fast, its batched twin 1.01-1.02x, a 1x1 Conv over
        1024 channels 1.02x, a k3s2 Conv 1.02x (1.03x at 2 threads); k7, 7x7 and
        dilated 3x3 Conv within 0.6% (their chunks' blocks already nearly equal).
        float32 errors moved both ways, every one below PyTorch's
        (benchmarks/run.py's workloads).

        float64 sums each K chunk (a kernel call) as one block: blocks exist for
        float32's error, and a chunk of at most MAX_DEPTH steps summed in order adds
        at most MAX_DEPTH float64 roundings, far below any float32 engine's.  One
        block per call saves the kernels a pass over their sums per block (on 2 Zen 4
        cores, 1 thread, before the kernels kept their totals in registers: a 16 ->
        16 k4s2 ConvTranspose and a 16 -> 16 3x3 Conv on 256x256 ran 4-8% faster
        than in blocks of 16 and 32).
        """
        if self.itemsize == 8:
            return chunk_depth or depth
        shallow, deep, split, few_channels = self.sum_blocks
        if depth > split:
            block = deep
        elif first_sums < shallow and depth > 2 * shallow:
            return few_channels
        else:
            block = shallow
        count = 0 if chunk_depth is None else (chunk_depth + block // 2) // block
        return block if count < 2 else -(-chunk_depth // count)


@dataclass(frozen=True)
class Decision:
    """How one call runs: everything the planner and the drivers obey."""

    engine: str                  # 'gemm' or 'direct'
    kernel_set: str              # family name, or 'blas' (GEMM through scipy's BLAS)
    storage: str                 # dtype name of x, w, b, y
    accumulation: np.dtype
    blocking: Blocking | None    # GEMM only
    pack_min_blocks: int = 0     # 0: B panels are read in place
    buffer_pack_min_blocks: int = 0  # the same for B panels of a tile buffer (not x itself)
    pair_pack_min_blocks: int = 0  # 0: exact stacks read their pair panels in place
    half_panels: bool = False
    masked_stores: bool = False
    input_is_tile: bool = False  # BLAS: x itself is a tile's operand for 1-tap stacks
    channel_vectors: bool = False  # direct: channels-last rows, channels as vector lanes
    stencil_rows: int = 0        # direct: stencil blocks of this many band rows (0: rows)
    stream_output: bool = False  # interleaved output rows stored past the caches
    reasons: tuple[str, ...] = field(default=(), compare=False)

    @property
    def row_family(self):
        """The family whose row, store and conversion kernels serve the call."""
        return "portable" if self.kernel_set == "blas" else self.kernel_set


def _requested_kernel_set(environ):
    requested = environ.get(KERNEL_SET_VARIABLE)
    if not requested:
        return None
    available = available_kernel_sets()
    if requested not in available:
        raise ValueError(
            f"{KERNEL_SET_VARIABLE}={requested!r} cannot be used here; this machine can run "
            f"{', '.join(repr(name) for name in available)}."
        )
    return requested


def family_named(name):
    """The compiled Family called ``name``."""
    for family in families():
        if family.name == name:
            return family
    raise ValueError(f"no kernel family named {name!r}")


def stencil_rows(problem):
    """Band rows per stencil block for ``problem``, 0 where stencil blocks do not
    serve it: Conv with one input channel per group and at most STENCIL_MAX_OUTPUTS
    output channels per group, rows contiguous in x and y and of the accumulation
    type, stride 1 on the last axis; STENCIL_ROWS rows where the band axis (the
    second to last) has stride and dilation 1, else one."""
    geometry = problem.geometry
    if (problem.transpose or problem.cg != 1 or problem.mg > STENCIL_MAX_OUTPUTS
            or problem.dtype != problem.accumulation
            or not (problem.x_spatially_contiguous and problem.y_rows_contiguous)
            or geometry.strides[-1] != 1):
        return 0
    if geometry.ndim >= 2 and geometry.strides[-2] == 1 and geometry.dilations[-2] == 1:
        return STENCIL_ROWS
    return 1


def choose_engine(problem):
    """'direct' when a GEMM would be a few multiply-adds per position, else 'gemm'."""
    from ._plan import reaching_kernel_size

    if stencil_rows(problem):
        return "direct", ("stencil blocks: one input channel per group, "
                          f"{problem.mg} output channel(s) per group <= STENCIL_MAX_OUTPUTS="
                          f"{STENCIL_MAX_OUTPUTS}")
    if problem.channel_vectors():
        return "direct", ("channels-last depthwise: rows of all channels at once, the "
                          "channels as vector lanes")
    work = problem.cg * problem.mg * reaching_kernel_size(problem.geometry, problem.transpose)
    if work >= DIRECT_MAX_WORK:
        return "gemm", f"{work} multiply-adds per output and group >= DIRECT_MAX_WORK={DIRECT_MAX_WORK}"
    row = problem.geometry.output_shape[-1]
    if row < DIRECT_MIN_ROW:
        return "gemm", (f"{work} multiply-adds per output and group < DIRECT_MAX_WORK="
                        f"{DIRECT_MAX_WORK}, but output rows of {row} < DIRECT_MIN_ROW="
                        f"{DIRECT_MIN_ROW}")
    return "direct", (f"{work} multiply-adds per output and group < DIRECT_MAX_WORK="
                      f"{DIRECT_MAX_WORK} on output rows of {row}")


def _paired(problem):
    """Whether the plan will likely hold exact stacks (pair kernels over the two phases
    of a stride-2 last axis whose phases have equal tap counts and a halo: 2-D and up,
    an even dilated kernel of 4 or more), the case where the wide set needs more work."""
    geometry = problem.geometry
    reach = (geometry.kernel_shape[-1] - 1) * geometry.dilations[-1] + 1
    return (problem.transpose and len(geometry.strides) >= 2 and geometry.strides[-1] == 2
            and reach % 2 == 0 and reach >= 4)


def _choose_kernel_set(problem, engine, forced, environ):
    if forced:
        if forced not in available_kernel_sets():
            raise ValueError(f"kernel set {forced!r} cannot run on this machine")
        return forced, f"kernel set {forced!r} forced by the caller"
    requested = _requested_kernel_set(environ)
    if requested:
        return requested, f"{KERNEL_SET_VARIABLE}={requested}"
    best = preferred_kernel_set()
    if engine == "direct":
        return best, "the best family this CPU runs"
    if best == "avx512" and "avx2" in available_kernel_sets():
        from ._plan import max_stack_taps

        depth = problem.cg * max_stack_taps(problem.geometry, problem.transpose)
        if depth < AVX512_MIN_DEPTH and problem.mg < AVX512_SHALLOW_MIN_OUTPUTS:
            return "avx2", (f"reduction depth {depth} < AVX512_MIN_DEPTH={AVX512_MIN_DEPTH} "
                            f"over {problem.mg} output channels per group < "
                            f"AVX512_SHALLOW_MIN_OUTPUTS={AVX512_SHALLOW_MIN_OUTPUTS}")
    if best == "avx512" and "avx512_wide" in available_kernel_sets():
        if engine == "gemm" and _wide_col2im(problem):
            return "avx512_wide", (f"col2im over {col2im_positions(problem)} "
                                   f"input positions <= COL2IM_WIDE_MAX_POSITIONS="
                                   f"{COL2IM_WIDE_MAX_POSITIONS}")
        if not native_512_fma():
            return best, (f"the best family this CPU runs (512-bit FMAs measured at "
                          f"{fma_512_speedup():.2f}x the 256-bit rate < NATIVE_512_MIN_SPEEDUP="
                          f"{NATIVE_512_MIN_SPEEDUP}: split, so avx512_wide gains nothing)")
        work = problem.multiply_adds()
        positions = min(problem.geometry.input_shape[-1], problem.geometry.output_shape[-1])
        name, least = (("WIDE_MIN_WORK_PAIRED", WIDE_MIN_WORK_PAIRED) if _paired(problem)
                       else ("WIDE_MIN_WORK", WIDE_MIN_WORK))
        if work >= least and positions >= WIDE_MIN_POSITIONS:
            return "avx512_wide", (f"{work} multiply-adds >= {name}={least} and rows of "
                                   f"{positions} >= WIDE_MIN_POSITIONS={WIDE_MIN_POSITIONS}")
    if best == "blas":
        return best, "no SIMD kernel family for this CPU: scipy's BLAS multiplies"
    return best, "the best family this CPU runs"


def _buffer_pack_min_blocks(problem, name):
    """Row blocks from which B panels of tile buffers are packed: see
    AVX2_BUFFER_PACK_MIN_BLOCKS."""
    from ._plan import max_stack_taps

    if (name == "avx2"
            and max_stack_taps(problem.geometry, problem.transpose) >= AVX2_BUFFER_MIN_TAPS):
        return AVX2_BUFFER_PACK_MIN_BLOCKS
    return PACK_MIN_BLOCKS


def _pair_max_depth(name, kernels, accumulation, storage):
    """K chunk limit of exact stacks storing into y: pair_chunk_depth, or MAX_DEPTH
    for narrow storage where B streams from L2 (narrow outputs are rounded once, so
    straight stores need a single K chunk, which such kernels read from L2 anyway)."""
    if storage in NARROW and b_streams_from_l2(name):
        return MAX_DEPTH
    return pair_chunk_depth(name, kernels.nr * accumulation.itemsize)


def decide(problem, *, engine=None, kernel_set=None, environ=None, **overrides):
    """The :class:`Decision` for ``problem`` on this machine.

    ``engine`` ('gemm', 'direct') and ``kernel_set`` (a family name or 'blas')
    force a path, as tests do to cover each; ``environ`` defaults to
    ``os.environ`` (CONVT_GEMM_BACKEND names a kernel set); ``overrides``
    replace Decision fields (tests turn masked stores off, for example).
    """
    environ = os.environ if environ is None else environ
    reasons = []
    if engine is None:
        engine, why = choose_engine(problem)
    else:
        why = "engine forced by the caller"
    reasons.append(f"engine {engine}: {why}")
    name, why = _choose_kernel_set(problem, engine, kernel_set, environ)
    if engine == "direct" and name == "blas":
        name, why = "portable", why + " (the direct engine runs the portable rows instead of BLAS)"
    reasons.append(f"kernel set {name}: {why}")
    accumulation = problem.accumulation
    storage = problem.dtype.name
    kernels = family_named("portable" if name == "blas" else name).kernel_set(accumulation)
    masked = kernels.has(SET_MASKED_STORES)
    stream = (kernels.has(SET_STREAM_STORES)
              and problem.output_bytes() >= STREAM_OUTPUT_MIN_BYTES)
    if stream:
        reasons.append(f"an output of {problem.output_bytes() / 2**20:.0f} MiB >= "
                       f"STREAM_OUTPUT_MIN_BYTES={STREAM_OUTPUT_MIN_BYTES >> 20} MiB: "
                       "rows interleaved from two stride phases are stored past the caches")
    if engine == "direct":
        channels = problem.channel_vectors()
        if channels:
            reasons.append(f"rows vectorised over {problem.out_channels} channels "
                           f"(channels innermost, one input channel per output channel)")
        band = 0 if channels else stencil_rows(problem)
        if band:
            reasons.append(f"stencil blocks of {band} output row(s) (STENCIL_ROWS={STENCIL_ROWS}"
                           + ("" if band > 1 else "; the band axis is strided or dilated")
                           + "): each input vector feeds every row of the block, zero padding")
        decision = Decision("direct", name, storage, accumulation, None,
                            masked_stores=masked, channel_vectors=channels,
                            stencil_rows=band, stream_output=stream, reasons=tuple(reasons))
        return replace(decision, **overrides)
    blas = name == "blas"
    pairs = not blas and kernels.has(SET_PAIRS)
    # AVX-512 kernels on a core that splits their FMAs: B rows read in place
    packs = not blas and not (name in ("avx512", "avx512_wide") and split_512_fma())
    half = kernels.has(SET_HALF) and not blas
    blocking = Blocking(
        mr=0 if blas else kernels.mr,
        nr=0 if blas else kernels.nr,
        itemsize=accumulation.itemsize,
        exact_stacks=pairs,
        exact_min_depth=AVX2_EXACT_MIN_DEPTH * accumulation.itemsize // 4 if name == "avx2" else 0,
        residue_pairs=not blas,
        store_direct=pairs and problem.y_rows_contiguous,
        rounds_once=storage in NARROW,
        operand_bytes=OPERAND_BYTES,
        product_bytes=PRODUCT_BYTES,
        max_depth=chunk_depth(name),
        pair_max_depth=_pair_max_depth(name, kernels, accumulation, storage) if pairs else 0,
        min_tile=MIN_TILE,
        min_work_items=work_items_target(),
        cores=os.cpu_count() or 1,
        min_split_rows=MIN_SPLIT_ROWS,
        sum_blocks=(SUM_BLOCK_SHALLOW, SUM_BLOCK_DEEP, SUM_BLOCK_SPLIT, SUM_BLOCK_FEW_CHANNELS),
        transposed=(bool(TRANSPOSED_PRODUCTS) and not blas and kernels.has(SET_TRANSPOSED)
                    and (name not in TRANSPOSED_FOR_STREAMED_WEIGHTS_ONLY
                         or math.prod(problem.geometry.output_shape) <= TRANSPOSED_MAX_POSITIONS
                         or weights_may_stream(problem, accumulation, name))),
        packs_b=packs and kernels.has(SET_PACK),
        half_panels=half,
    )
    if pairs:
        reasons.append("exact stacks: the set has pair kernels"
                       + ("" if problem.y_rows_contiguous else
                          "; y's rows are strided, so they go through the product buffer"))
    if not packs and not blas and kernels.has(SET_PACK):
        reasons.append("no B packing: 512-bit FMAs split, the kernels' loads are not the limit")
    decision = Decision(
        engine="gemm",
        kernel_set=name,
        storage=storage,
        accumulation=accumulation,
        blocking=blocking,
        pack_min_blocks=PACK_MIN_BLOCKS if packs and kernels.has(SET_PACK) else 0,
        buffer_pack_min_blocks=(_buffer_pack_min_blocks(problem, name)
                                if packs and kernels.has(SET_PACK) else 0),
        pair_pack_min_blocks=(PAIR_PACK_MIN_BLOCKS if packs and pairs
                              and kernels.has(SET_PACK_PAIRS) else 0),
        half_panels=half,
        masked_stores=masked,
        stream_output=stream,
        input_is_tile=(blas and problem.dtype == accumulation
                       and problem.x_spatially_contiguous),
        reasons=tuple(reasons),
    )
    return replace(decision, **overrides)


@functools.cache
def fma_512_speedup():
    """512-bit over 256-bit FMA throughput per FLOP on this core, measured once
    (0 without AVX-512): about 2 where 512-bit FMAs are native, 1 where split."""
    return load().avx512_fma_speedup()


def native_512_fma():
    """Whether this core runs 512-bit FMAs at full width (see NATIVE_512_MIN_SPEEDUP)."""
    return fma_512_speedup() >= NATIVE_512_MIN_SPEEDUP


@functools.cache
def l1_data_bytes():
    """Bytes of one core's L1 data cache (DEFAULT_L1_BYTES when unknown)."""
    return load().l1_data_bytes() or DEFAULT_L1_BYTES


DEFAULT_L2_BYTES = 512 * 1024


@functools.cache
def l2_bytes():
    """Bytes of one core's L2 cache (DEFAULT_L2_BYTES when unknown)."""
    return load().l2_bytes() or DEFAULT_L2_BYTES


def col2im_positions(problem):
    """The positions col2im multiplies at once: every image's, stacked (w is then
    read once per call, whatever the batch)."""
    return problem.batch * math.prod(problem.geometry.input_shape)


def _wide_col2im(problem):
    """Whether col2im serves ``problem`` (on the GEMM engine with avx512_wide's
    kernels) over at most COL2IM_WIDE_MAX_POSITIONS input positions."""
    probe = types.SimpleNamespace(engine="gemm", kernel_set="avx512_wide")
    return (col2im_positions(problem) <= COL2IM_WIDE_MAX_POSITIONS
            and col2im_route(problem, probe))


def col2im_panel_bytes():
    """The budget of a col2im work item's panels of w: COL2IM_PANEL_L2_SHARE of L2."""
    return int(COL2IM_PANEL_L2_SHARE * l2_bytes())


def split_512_fma():
    """Whether this core has AVX-512 but splits its FMAs in two (see NATIVE_512_MIN_SPEEDUP)."""
    return 0 < fma_512_speedup() < NATIVE_512_MIN_SPEEDUP


def b_streams_from_l2(kernel_set):
    """Whether ``kernel_set``'s kernels load B rows slowly enough, on this core, to
    read them from L2 (see L2_CHUNK_L1_FACTOR): the AVX2 kernels anywhere, the
    AVX-512 kernels where 512-bit FMAs are split."""
    return kernel_set == "avx2" or (kernel_set in ("avx512", "avx512_wide") and split_512_fma())


def _l1_sized(bytes_per_step, factor):
    """Steps of ``bytes_per_step`` filling two thirds of ``factor`` L1 data caches,
    between MIN_DEPTH and MAX_DEPTH."""
    return min(MAX_DEPTH, max(MIN_DEPTH, l1_data_bytes() * factor * 2 // (3 * bytes_per_step)))


def chunk_depth(kernel_set):
    """Longest K chunk of ``kernel_set``'s product-path stacks on this CPU: their B
    rows (K_STEP_BYTES per step) fill two thirds of the L1 data cache, or of
    L2_CHUNK_L1_FACTOR times it where 512-bit FMAs are split (every set there)."""
    return _l1_sized(K_STEP_BYTES, L2_CHUNK_L1_FACTOR if split_512_fma() else 1)


def pair_chunk_depth(kernel_set, vector_bytes):
    """Longest K chunk of ``kernel_set``'s exact stacks storing into y: both operands'
    ``vector_bytes`` per step (a panel's positions, packed) fill two thirds of the L1
    data cache, or of L2_CHUNK_L1_FACTOR times it where the set's B rows stream from
    L2 (b_streams_from_l2)."""
    factor = L2_CHUNK_L1_FACTOR if b_streams_from_l2(kernel_set) else 1
    return _l1_sized(2 * vector_bytes, factor)


def work_items_target():
    """Work items a plan aims for on this machine: WORK_ITEMS_PER_CORE per core
    (os.cpu_count, whatever the call's threads), at most MAX_WORK_ITEMS."""
    return max(1, min(MAX_WORK_ITEMS, WORK_ITEMS_PER_CORE * (os.cpu_count() or 1)))


class _TunedModule(types.ModuleType):
    """This module's type: setting or deleting any of its attributes from outside
    (tests and benchmarks/tune.py change the tuning constants, monkeypatch puts
    them back) drops the tuple tuning() keeps, so every call need not build it
    anew (60 names, about 1.3 us of a tiny call's 13)."""

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        super().__setattr__("_tuning_now", None)
        super().__setattr__("_tuning_key_now", None)

    def __delattr__(self, name):
        super().__delattr__(name)
        super().__setattr__("_tuning_now", None)
        super().__setattr__("_tuning_key_now", None)


sys.modules[__name__].__class__ = _TunedModule
_tuning_now = None
_tuning_key_now = None
_tuning_keys = {}  # each tuning() seen -> its small int


def tuning():
    """The tuning constants now (tests and benchmarks/tune.py change them): part of
    every cache key that a decision feeds."""
    global _tuning_now
    if _tuning_now is None:
        _tuning_now = _tuning()
    return _tuning_now


def tuning_key():
    """A small int standing for tuning(), equal exactly when the constants are: for
    the keys every call hashes (hashing the tuple of 69 constants took 0.35 us of a
    tiny call's 11)."""
    global _tuning_key_now
    if _tuning_key_now is None:
        _tuning_key_now = _tuning_keys.setdefault(tuning(), len(_tuning_keys))
    return _tuning_key_now


def _tuning():
    return (DIRECT_MAX_WORK, DIRECT_MIN_ROW, AVX512_MIN_DEPTH, AVX512_SHALLOW_MIN_OUTPUTS,
            WIDE_MIN_WORK, WIDE_MIN_WORK_PAIRED,
            WIDE_MIN_POSITIONS, NATIVE_512_MIN_SPEEDUP, OPERAND_BYTES, PRODUCT_BYTES, MAX_DEPTH,
            K_STEP_BYTES, MIN_DEPTH, L2_CHUNK_L1_FACTOR, TRANSPOSED_PRODUCTS,
            TRANSPOSED_FOR_STREAMED_WEIGHTS_ONLY, TRANSPOSED_MAX_POSITIONS,
            AVX2_EXACT_MIN_DEPTH, MIN_TILE, MAX_WORK_ITEMS, WORK_ITEMS_PER_CORE, MIN_SPLIT_ROWS,
            PACK_MIN_BLOCKS, AVX2_BUFFER_PACK_MIN_BLOCKS, AVX2_BUFFER_MIN_TAPS,
            PAIR_PACK_MIN_BLOCKS, SUM_BLOCK_SHALLOW, SUM_BLOCK_DEEP, SUM_BLOCK_SPLIT,
            SUM_BLOCK_FEW_CHANNELS,
            DIRECT_MAX_SOURCES, STENCIL_ROWS, STENCIL_MAX_OUTPUTS, CHANNELS_LAST_MAX_OUTPUTS,
            CHANNELS_LAST_MAX_BYTES, WINOGRAD_MIN_CHANNELS, WINOGRAD_MIN_TILES, WINOGRAD_TILES,
            WINOGRAD_CHANNEL_CHUNK, WINOGRAD_OUT_CHUNK, WINOGRAD_TRANSPOSE_SUM_BLOCK,
            WINOGRAD_PHASE_MIN_CHANNELS, WINOGRAD_PHASE_MIN_WORK, WINOGRAD_PHASE_SUM_BLOCK,
            WINOGRAD_PHASE_BLOCK_BYTES, WINOGRAD_PHASE_OUT_CHUNK,
            WINOGRAD_MIN_WORK, WINOGRAD_3D_MIN_WORK, PLANE_MAX_BYTES, PLANE_WORK_SCALE,
            PLANE_MIN_PLANES, PLANE_WIDE_MIN_TAPS, PLANE_CHANNELS_MAX_WIDTH,
            PLANE_CHANNELS_MIN_STRIDE, PLANE_CHANNELS_MIN_CHANNELS, PLANE_CHANNELS_BLOCK,
            PLANE_CHANNELS_MAX_BYTES,
            COL2IM_MAX_POSITIONS, COL2IM_MIN_WEIGHT_BYTES,
            COL2IM_PRODUCT_BYTES, BAND_SETS, BAND_MIN_STRIDE, BAND_MIN_TAPS, BAND_MIN_DEPTH,
            BAND_MIN_OUTPUTS, BAND_BUFFER_BYTES, BAND_WORK_ITEMS_PER_CORE,
            COL2IM_PANEL_L2_SHARE, COL2IM_DEPTH, COL2IM_MAX_CROPPED,
            COL2IM_MAX_INPUT_BYTES, COL2IM_MIN_WEIGHT_BYTES_PER_POSITION,
            STREAM_MIN_WEIGHT_BYTES, STREAM_MIN_WEIGHT_BYTES_AVX512, STREAM_MAX_POSITIONS,
            STREAM_OUTPUT_MIN_BYTES)


# Environment variables that set the default thread count, first found wins
# (OMP_NUM_THREADS is what dask, joblib and job schedulers set for workers).
THREAD_VARIABLES = ("CONVT_NUM_THREADS", "OMP_NUM_THREADS")


def default_threads():
    """Threads a call uses by default: CONVT_NUM_THREADS or OMP_NUM_THREADS when
    set (the first number of a list), else every core this process may run on."""
    for name in THREAD_VARIABLES:
        value = _environ.value(name, "").split(",")[0].strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def resolve_threads(num_threads, work_items, multiply_adds):
    """Threads to use: ``num_threads``, or :func:`default_threads`; never more than
    the work items, nor than MIN_MULTIPLY_ADDS_PER_THREAD each can keep busy; by
    default, one for calls under CONTENDED_MAX_MULTIPLY_ADDS while the pool finds
    the cores contended.  Results do not depend on it."""
    feeds = max(1, multiply_adds // MIN_MULTIPLY_ADDS_PER_THREAD)
    if min(work_items, feeds) <= 1:
        return 1  # without asking the OS for the cores (a system call) on tiny calls
    if num_threads is None:
        threads = max(1, min(default_threads(), work_items, feeds, MAX_THREADS))
        if threads > 1 and multiply_adds < CONTENDED_MAX_MULTIPLY_ADDS and _pool_contended(threads):
            return 1
        return threads
    return max(1, min(num_threads, work_items, feeds, MAX_THREADS))


def _pool_contended(threads):
    return load().pool_contended(threads)
