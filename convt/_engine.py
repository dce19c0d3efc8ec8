"""Running one validated ConvTranspose call: dispatch, plan, pack, drive.

Every front-end ends in :func:`compute` with a resolved geometry and arrays
in the (N, C, D...) / (C, M / group, k...) / (N, M, O...) layouts (views of
any strides); :mod:`convt._dispatch` decides how, :mod:`convt._plan` plans,
the drivers of :mod:`convt._kernels` run.
"""

from __future__ import annotations

import functools
import math
import operator
import time
from dataclasses import dataclass

import numpy as np

from . import (_arrays, _bands, _col2im, _dispatch, _environ, _outputs, _planes, _records,
               _weight_cache, _winograd, _workspace)
from ._compiled import load
from ._geometry import Geometry
from ._plan import conv_reaching_taps, direct_plan, gemm_plan


@dataclass(slots=True)
class Operands:
    """The arrays the compiled drivers read and write, with element strides (w's as
    a (group, C/group, M/group, k...) view, the layout every operator reduces to).
    Made on every call and never changed: not frozen, whose __init__ sets each field
    through object.__setattr__ (five times as long)."""

    x: np.ndarray
    w: np.ndarray
    y: np.ndarray
    b: np.ndarray | None
    b_acc: np.ndarray | None      # the bias in the accumulation type (exact stacks)
    x_strides: np.ndarray
    w_strides: np.ndarray
    y_strides: np.ndarray
    x_extent: int = 0             # elements readable from x's data pointer (0: unknown)
    x_channel_offsets: np.ndarray | None = None  # [c] = c * x's channel stride, c < C/group


def element_strides(array):
    """Strides of ``array`` in elements, as an intp array for the kernels."""
    return np.array([stride // array.itemsize for stride in array.strides], dtype=np.intp)


def readable_extent(array):
    """Elements readable from ``array``'s data pointer: the span of its strides (0 for
    an empty array or a negative stride, which the engines then never read past a
    tile's own data)."""
    if array.size == 0 or any(stride < 0 for stride in array.strides):
        return 0
    return 1 + sum((size - 1) * (stride // array.itemsize)
                   for size, stride in zip(array.shape, array.strides))


def fill_with_bias(y, b):
    """y[n, m, ...] = b[m] (or 0 without bias)."""
    if b is None:
        y.fill(0)
    else:
        y[...] = b.reshape((1, -1) + (1,) * (y.ndim - 2))


def _spatially_contiguous(array):
    expected = 1
    strides = element_strides(array)
    for size, stride in zip(reversed(array.shape[2:]), reversed(strides[2:])):
        if size > 1 and stride != expected:
            return False
        expected *= size
    return 0 < strides[1] < 2**31 and strides[1] >= expected


def problem_of(x, w, y, geometry, group, transpose=True):
    """The dispatch point's view of a call (``transpose``: ConvTranspose, else Conv)."""
    return _dispatch.Problem(
        geometry=geometry,
        batch=x.shape[0],
        in_channels=x.shape[1],
        out_channels=y.shape[1],
        group=group,
        dtype=x.dtype,
        y_rows_contiguous=y.shape[-1] <= 1 or y.strides[-1] == y.itemsize,
        x_spatially_contiguous=_spatially_contiguous(x),
        channels_innermost=(x.strides[1] == x.itemsize or x.shape[1] <= 1)
        and (y.strides[1] == y.itemsize or y.shape[1] <= 1),
        transpose=transpose,
    )


@functools.lru_cache(maxsize=256)
def problem_records(problem):
    """The PROBLEM and AXIS records of a problem (convt._records)."""
    geometry = problem.geometry
    scalars = _records.record(
        _records.PROBLEM, ndim=geometry.ndim, storage=_dispatch.STORAGE[problem.dtype.name],
        batch=problem.batch, groups=problem.group, cg=problem.cg, mg=problem.mg,
        out_channels=problem.out_channels,
    )
    # ConvTranspose strides its outputs, Conv decimates its input
    ones = (1,) * geometry.ndim
    axes = _records.records(
        _records.AXIS,
        zip(geometry.input_shape, geometry.output_shape,
            geometry.strides if problem.transpose else ones,
            ones if problem.transpose else geometry.strides),
    )
    return scalars, axes


def gemm_layout(plan, decision):
    """The GEMM_LAYOUT record: workspace capacities and the decision's flags."""
    return _records.record(
        _records.GEMM_LAYOUT,
        operand=plan.operand_capacity,
        product=plan.product_capacity,
        per_thread=plan.workspace_per_thread,
        blas=int(decision.kernel_set == "blas"),
        pack_min_blocks=decision.pack_min_blocks,
        half_panels=int(decision.half_panels),
        masked_stores=int(decision.masked_stores),
        input_is_tile=int(decision.input_is_tile),
        pair_pack_min_blocks=decision.pair_pack_min_blocks,
        buffer_pack_min_blocks=decision.buffer_pack_min_blocks,
        transposed=plan.transposed_capacity,
        stream_output=int(decision.stream_output),
    )


def plan_for(problem, decision):
    """The engine's plan for a problem under a decision (cached)."""
    geometry = problem.geometry
    if decision.engine == "gemm":
        return gemm_plan(geometry, problem.batch, problem.cg, problem.mg, problem.group,
                         decision.blocking, problem.transpose)
    interleave = problem.y_rows_contiguous and problem.dtype == decision.accumulation
    return direct_plan(geometry, problem.batch, problem.out_channels,
                       _dispatch.DIRECT_MAX_SOURCES, interleave, decision.masked_stores,
                       problem.transpose, decision.channel_vectors,
                       problem.dtype != decision.accumulation, decision.stencil_rows,
                       decision.stream_output)


def work_items(plan):
    """Units of work the engine shares between threads."""
    return len(plan.items) if hasattr(plan, "items") else int(plan.layout["rows"][0])


@dataclass(frozen=True)
class Execution:
    """Everything a call needs besides its arrays, made once per problem and decision."""

    problem: _dispatch.Problem
    decision: _dispatch.Decision
    plan: object
    scalars: np.ndarray          # PROBLEM record
    axes: np.ndarray             # AXIS records
    layout: np.ndarray | None    # GEMM_LAYOUT record (GEMM engine)
    engine: object               # convt._kernels.GemmEngine or DirectEngine, prepared
    multiply_adds: int           # work the engine performs


def execution(problem, engine=None, kernel_set=None, **overrides):
    """The Execution of a problem (see convt._dispatch.decide for the arguments);
    remembered per problem, request, environment and tuning."""
    requested = _environ.value(_dispatch.KERNEL_SET_VARIABLE) or None
    return _execution(problem, engine, kernel_set, requested,
                      tuple(sorted(overrides.items())), _dispatch.tuning())


@functools.lru_cache(maxsize=256)
def _execution(problem, engine, kernel_set, requested, overrides, tuning):
    environ = {} if requested is None else {_dispatch.KERNEL_SET_VARIABLE: requested}
    decision = _dispatch.decide(problem, engine=engine, kernel_set=kernel_set, environ=environ,
                                **dict(overrides))
    _kernels = load()

    plan = plan_for(problem, decision)
    scalars, axes = problem_records(problem)
    if decision.engine == "gemm":
        layout = gemm_layout(plan, decision)
        engine = _kernels.GemmEngine(scalars, axes, plan, layout, decision)
    else:
        layout = None
        engine = _kernels.DirectEngine(scalars, axes, plan, decision)
    return Execution(problem, decision, plan, scalars, axes, layout, engine,
                     problem.multiply_adds())


@dataclass(frozen=True)
class Call:
    """What a call needs besides its arrays' data: valid for every call whose
    operands have the same shapes, strides and dtype (the front-ends reuse it)."""

    run: Execution
    transpose: bool              # ConvTranspose, else Conv
    geometry: object
    group: int
    work_items: int
    x_strides: np.ndarray        # element strides of x, w's grouped view and y
    w_strides: np.ndarray
    y_strides: np.ndarray
    x_extent: int                # see Operands
    x_channel_offsets: np.ndarray
    fold: bool = False           # images run as a leading axis (see folds_batch)
    padding_taps: bool = False   # Conv taps that read only padding (see _poison_padding_taps)
    channels_last: bool = False  # x and y run as channels-last copies (channels_last_views)
    winograd: object = None      # convt._winograd.WinogradRun when Winograd serves the call
    plane: object = None         # convt._planes.PlaneRun when depthwise planes serve it
    col2im: object = None        # convt._col2im.Col2imRun when col2im serves it
    bands: object = None         # convt._bands.BandRun when bands of output rows serve it
    streamed: bool = False       # the GEMM engine reads w as it goes (_dispatch.streams_weights)


def _grouped_weight(w, group, channels, transpose):
    """w as a (group, C/group, M/group, k...) view: the layout every operator reduces to."""
    if transpose:
        return w.reshape((group, channels // group) + w.shape[1:])  # an axis split
    mg = w.shape[0] // group
    return w.reshape((group, mg, channels // group) + w.shape[2:]).swapaxes(1, 2)


def prepare(x, w, y, geometry, group, transpose=True, engine=None, backend=None, **overrides):
    """The Call for these operands, or None when there is nothing to multiply (no
    image, no output channel or no input channel per group: see :func:`execute`).
    ``engine``, ``backend`` and ``overrides`` as in :func:`compute`."""
    batch, channels = x.shape[:2]
    if batch == 0 or y.shape[1] == 0 or channels // group == 0:
        return None
    problem = problem_of(x, w, y, geometry, group, transpose)
    fold = folds_batch(geometry, batch) and not (
        engine is None and not overrides and _col2im_serves_unfolded(problem, backend))
    if fold:
        x, w, y = folded(x, w, y)
        geometry = folded_geometry(geometry, batch)
        problem = problem_of(x, w, y, geometry, group, transpose)
    _dispatch.check_work(problem.multiply_adds())  # before planning: it is counted, not listed
    planes = engine is None and not overrides and _dispatch.plane_route(problem)
    channels_last = (engine is None and not planes
                     and _dispatch.channels_last_problem(problem) is not None)
    if channels_last:  # plan for the copies' layout: strides are all a plan reads of them
        x, y = channels_last_views(x.shape, y.shape, x.dtype)
        problem = problem_of(x, w, y, geometry, group, transpose)
    run = execution(problem, engine, backend, **overrides)
    x_strides = element_strides(x)
    padding_taps = not transpose and conv_reaching_taps(geometry) != geometry.kernel_shape
    winograd = (_winograd.plan(problem, run.decision) if engine is None and not overrides
                and _dispatch.winograd_route(problem, run.decision) else None)
    plane = _planes.plan(problem, run.decision.row_family, backend) if planes else None
    col2im = (_col2im.plan(problem, run.decision) if engine is None and not overrides
              and not fold and not channels_last
              and _dispatch.col2im_route(problem, run.decision) else None)
    bands = (_bands.plan(problem, run.decision) if engine is None and not overrides
             and not fold and not channels_last and winograd is None and not planes
             and _dispatch.band_route(problem, run.decision) else None)
    w_strides = element_strides(_grouped_weight(w, group, channels, transpose))
    streamed = _dispatch.streams_weights(problem, run.decision, run.plan, w_strides)
    return Call(run, transpose, geometry, group, work_items(run.plan), x_strides, w_strides,
                element_strides(y), readable_extent(x),
                np.arange(channels // group, dtype=np.intp) * x_strides[1], fold, padding_taps,
                channels_last, winograd, plane, col2im, bands, streamed)


def _col2im_serves_unfolded(problem, backend=None):
    """Whether col2im serves the batched ``problem`` as it is (its images' positions
    stacked, w read once per call), which batched 1-D calls then keep rather than
    fold: a folded call would run the GEMM engine, which reads w three times (a
    vocoder's 4 x 512 -> 256 k16 s8 on 32 positions)."""
    return problem.transpose and _dispatch.col2im_route(
        problem, execution(problem, None, backend).decision)


def channels_last_views(x_shape, y_shape, dtype):
    """Fresh channels-last arrays for x and y, as (N, C, D...) views (uninitialised)."""
    def view(shape):
        return np.moveaxis(np.empty((shape[0],) + tuple(shape[2:]) + (shape[1],), dtype), -1, 1)

    return view(x_shape), view(y_shape)


def channels_last_copy(family, x, x_view):
    """Fill ``x_view`` (from channels_last_views) with ``x``, plane by plane."""
    batch, channels = x.shape[:2]
    load().transpose_planes(family, np.ascontiguousarray(x.reshape(batch, channels, -1)),
                            np.moveaxis(x_view, 1, -1).reshape(batch, -1, channels))


def channels_first_copy(family, y_view, y):
    """Fill ``y`` with ``y_view`` (from channels_last_views), plane by plane."""
    batch, channels = y.shape[:2]
    planes = y.reshape(batch, channels, -1) if y.flags.c_contiguous else np.empty(
        (batch, channels, math.prod(y.shape[2:])), y.dtype)
    load().transpose_planes(family, np.moveaxis(y_view, 1, -1).reshape(batch, -1, channels),
                            planes)
    if not y.flags.c_contiguous:
        np.copyto(y, planes.reshape(y.shape))


def folds_batch(geometry, batch):
    """Whether a call runs with its images as a leading spatial axis: batched 1-D
    signals.  The engines' tiles then span several images, so each block of weights
    is read once per tile rather than once per image (short signals with many
    channels re-streamed megabytes of weights per image)."""
    return geometry.ndim == 1 and batch > 1


def folded(x, w, y):
    """Views of (N, C, L) data as (1, C, N, L) and of the weights with a one-tap
    leading axis."""
    return np.moveaxis(x, 0, 1)[None], w[:, :, None], np.moveaxis(y, 0, 1)[None]


def folded_geometry(geometry, batch):
    """The geometry with the batch as a leading axis: one tap, no padding."""
    return Geometry(input_shape=(batch,) + geometry.input_shape,
                    kernel_shape=(1,) + geometry.kernel_shape,
                    strides=(1,) + geometry.strides,
                    dilations=(1,) + geometry.dilations,
                    output_padding=(0,) + geometry.output_padding,
                    pads_begin=(0,) + geometry.pads_begin,
                    pads_end=(0,) + geometry.pads_end,
                    output_shape=(batch,) + geometry.output_shape)


def execute(call, x, w, b, y, num_threads, backend=None):
    """Fill ``y`` by the prepared ``call`` (None: the bias alone, or nothing)."""
    if call is None:
        if x.shape[0] and y.shape[1]:
            fill_with_bias(y, b)
        return y
    run, decision = call.run, call.run.decision
    result = y
    if call.plane is not None:  # padding is multiplied: no taps to poison, no fallback
        plane = call.plane
        threads = _dispatch.resolve_threads(num_threads, plane.work_items, plane.multiply_adds)
        _planes.run(plane, x, w, b, y, threads)
        return result
    if call.bands is not None:  # padding is multiplied: no taps to poison
        bands = call.bands
        threads = _dispatch.resolve_threads(num_threads, bands.work_items, bands.multiply_adds)
        _bands.run(bands, x, w, b, y, call.geometry, call.group, threads)
        return result
    if call.winograd is not None:
        winograd = call.winograd
        threads = _dispatch.resolve_threads(num_threads, winograd.work_items,
                                            winograd.multiply_adds)
        if _winograd.run(winograd, x, w, b, y, call.geometry, call.group, threads):
            return result
    if call.col2im is not None:
        col2im = call.col2im
        threads = _dispatch.resolve_threads(num_threads, col2im.work_items, col2im.multiply_adds)
        if _col2im.run(col2im, x, w, b, y, call.group, threads):
            return result
    if call.fold:
        x, w, y = folded(x, w, y)
    if call.channels_last:
        x_view, y = channels_last_views(x.shape, y.shape, x.dtype)
        channels_last_copy(decision.row_family, x, x_view)
        x = x_view
    threads = _dispatch.resolve_threads(num_threads, call.work_items, run.multiply_adds)
    b_acc = None
    if b is not None and (decision.engine == "gemm" or decision.channel_vectors):
        b_acc = np.ascontiguousarray(b, dtype=decision.accumulation)
    arrays = Operands(x, w, y, b, b_acc, call.x_strides, call.w_strides, call.y_strides,
                      call.x_extent, call.x_channel_offsets)
    if call.transpose:
        if decision.engine == "direct" or not _run_gemm(arrays, run, threads):
            if decision.engine == "gemm":  # non-finite weights the GEMM cannot serve exactly
                run = execution(run.problem, "direct", backend if backend != "blas" else None)
            _run_direct(arrays, run, threads)
        return result
    if decision.engine == "direct" and not decision.stencil_rows and not np.isfinite(w).all():
        # the direct engine's rows skip padding; Conv multiplies its zeros by every
        # weight (as the stencil blocks do)
        run = execution(run.problem, "gemm", backend)
        threads = _dispatch.resolve_threads(num_threads, work_items(run.plan), run.multiply_adds)
        b_acc = None if b is None else np.ascontiguousarray(b, dtype=run.decision.accumulation)
        arrays = Operands(x, w, y, b, b_acc, call.x_strides, call.w_strides, call.y_strides,
                      call.x_extent, call.x_channel_offsets)
    if run.decision.engine == "direct":
        _run_direct(arrays, run, threads)
    else:
        # fixed weights (a bound layer's) are packed once for all calls: nothing to stream
        streamed = call.streamed and _weight_cache.fixed_weights_of(w) is None
        _run_gemm(arrays, run, threads, finite=False, streamed=streamed)
    if call.channels_last:
        channels_first_copy(decision.row_family, y, result)
        y = result
    if call.padding_taps:
        _poison_padding_taps(w, y, call.geometry)
    return result


class RepeatHooks:
    """The Python parts the compiled repeated calls (convt._kernels.RepeatedGemm and
    RepeatedPlanes) call: one object for all of them, so that each holds one reference."""

    operands = Operands
    fill_with_bias = staticmethod(fill_with_bias)
    dispatch = _dispatch           # resolve_threads, looked up on every call
    workspace = _workspace         # lend, give_back and MIN_BYTES (below it, plain arrays)
    weight_cache = _weight_cache
    nothing_packed = None         # set below, once _NOTHING_PACKED exists
    monotonic = staticmethod(time.monotonic)

    @staticmethod
    def fixed_packing(w, run, key):
        """The packing kept with fixed weights ``w`` (a bound layer's) under ``key``,
        found without comparing bytes, or None (not fixed, or not packed yet)."""
        fixed = _weight_cache.fixed_weights_of(w)
        return None if fixed is None else fixed.find(key, run)

    @staticmethod
    def budget_variable():
        return _environ.value(_weight_cache.BUDGET_VARIABLE, "")

    @staticmethod
    def pooled(shape, dtype):
        """Whether an output of ``shape`` and ``dtype`` comes from convt._outputs's blocks."""
        return _outputs.pooled(math.prod(shape) * np.dtype(dtype).itemsize)

    pooled_empty = staticmethod(_outputs.empty)


def repeated(call, num_threads, slow, x, w, y):
    """A compiled shortcut for the later calls of the remembered call ``slow``
    (convt._frontend.RememberedCall, whose first call ran on ``x``, ``w`` and made
    ``y``, all in the engines' layouts), or None where it would not serve them:
    Winograd, col2im, folded or channels-last copies, Conv's padding taps, the
    direct engine, BLAS.  The GEMM engine alone (RepeatedGemm) and depthwise planes
    (RepeatedPlanes) are served.  Their calls give ``slow``'s results bit for bit; a
    RepeatedGemm runs ``slow`` itself wherever its weights are not the weight
    cache's most recent entry."""
    if call is None:
        return None
    if call.plane is not None:
        if not _planes.kernels_contiguous(w):
            return None  # (convt._planes.run copies such weights)
        return load().RepeatedPlanes(slow, call, _HOOKS, tuple(y.shape), y.dtype, num_threads)
    if (call.winograd is not None or call.col2im is not None or call.bands is not None
            or call.fold or call.channels_last or call.padding_taps):
        return None
    run = call.run
    if (run.decision.engine != "gemm" or run.decision.kernel_set == "blas"
            or type(run.engine) is not load().GemmEngine):  # (tests wrap engines in Python)
        return None
    arrays = Operands(x, w, y, None, None, call.x_strides, call.w_strides, call.y_strides)
    key = _weight_cache.cache_key(run, arrays, finite=call.transpose)
    return load().RepeatedGemm(slow, run, call, _HOOKS, key, tuple(y.shape), y.dtype,
                               num_threads)


def compute(x, w, b, y, geometry, group, num_threads, engine=None, backend=None, **overrides):
    """Fill ``y`` with ConvTranspose(x, w, b); all arguments already validated.

    ``engine`` ('gemm', 'direct') and ``backend`` (a kernel set: 'avx512',
    'avx2', 'portable', 'blas') force a path, and ``overrides`` replace
    fields of the decision; tests use them to cover every path.
    """
    call = prepare(x, w, y, geometry, group, True, engine, backend, **overrides)
    return execute(call, x, w, b, y, num_threads, backend)


def compute_conv(x, w, b, y, geometry, group, num_threads, engine=None, backend=None,
                 **overrides):
    """Fill ``y`` with Conv(x, w, b); all arguments already validated.

    ``x`` is an (N, C, D...) array or view, ``w`` an (M, C/group, k...) one
    (Conv's ONNX layout), ``b`` (M,) or None, ``y`` an (N, M, O...) view.  In
    ``geometry`` (Conv's), the strides decimate the input and the output size
    is ``floor((in + pads - dilation * (k - 1) - 1) / stride) + 1``.  The GEMM
    engine runs it: the input is read decimated by the strides, one window
    plane per residue, so every output is one stride-1 correlation.  Zero
    padding is part of Conv's definition: non-finite weights multiply it.
    ``engine``, ``backend`` and ``overrides`` as in :func:`compute`.
    """
    call = prepare(x, w, y, geometry, group, False, engine, backend, **overrides)
    return execute(call, x, w, b, y, num_threads, backend)


def _poison_padding_taps(w, y, geometry):
    """Conv's taps that read only padding, for every output, are left out of the
    plan (their products are zeros); a non-finite weight there makes 0 x Inf or
    0 x NaN, so every output of its channel is NaN, as the definition says.

    A tap reads only padding when one of its coordinates does; those slabs of
    w are reduced (max and min: NaN and Inf survive them) without copying.
    Called only for geometries that have such taps (``Call.padding_taps``).
    """
    kept = conv_reaching_taps(geometry)
    bad = np.zeros(w.shape[0], dtype=bool)
    channels = tuple(range(1, w.ndim))
    for axis, (kernel, pad, dilation, stride, out, reach) in enumerate(zip(
            geometry.kernel_shape, geometry.pads_begin, geometry.dilations, geometry.strides,
            geometry.output_shape, kept)):
        low = max(0, -(-(pad - (out - 1) * stride) // dilation))
        for start, stop in ((0, low), (low + reach, kernel)):
            if start >= stop:
                continue
            index = [slice(None)] * w.ndim
            index[2 + axis] = slice(start, stop)
            slab = w[tuple(index)]
            with np.errstate(invalid="ignore"):
                bad |= ~np.isfinite(np.max(slab, axis=channels).astype(np.float64))
                bad |= ~np.isfinite(np.min(slab, axis=channels).astype(np.float64))
    if bad.any():
        y[:, bad] = np.nan


def _run_direct(arrays, run, threads):
    layout = run.plan.layout[0]
    scratch = np.empty((threads, layout["ints"]), dtype=np.intp)
    # channels-last rows: the weights as (kernel position, channel) vectors
    packed = np.empty((math.prod(run.problem.geometry.kernel_shape) if layout["channels"] else 0,
                       layout["channels"]), dtype=run.decision.accumulation)
    workspace, block = _workspace.lend((threads, layout["floats"]), run.decision.accumulation)
    try:
        run.engine.run(arrays, workspace, scratch, packed, threads)
    finally:
        _workspace.give_back(block)


# Non-finite weights whose exact contributions are added one by one after the
# GEMM, at most; more (or non-finite inputs too) run the direct engine instead.
MAX_NON_FINITE_WEIGHTS = 64


def _packed_weights(arrays, run, threads, finite):
    """The weights packed for ``run`` and how many non-finite ones were packed as 0:
    remembered from an earlier call with bitwise-equal weights when there is one
    (convt._weight_cache), else packed now."""
    packed, dense = _weight_cache.lookup(run, arrays, finite, threads)
    if packed is not None:
        return packed, 0
    packed = np.empty(run.plan.packed_size, dtype=run.decision.accumulation)
    non_finite = load().pack_weights(arrays, run.scalars, run.plan, packed, threads, finite)
    if dense is not None and not non_finite:
        _weight_cache.store(run, arrays, dense, finite, packed)
    return packed, non_finite


# The packed-weights argument of a run that streams w (never read).
_NOTHING_PACKED = (np.zeros(1, np.float32), np.zeros(1, np.float64))
RepeatHooks.nothing_packed = _NOTHING_PACKED
_HOOKS = RepeatHooks()


@functools.lru_cache(maxsize=64)
def _scratch_template(threads, width):
    template = np.full((threads, width), -1, dtype=np.intp)
    template.flags.writeable = False  # shared: only its copies are handed out
    return template


def _fresh_scratch(threads, width):
    """The GEMM engine's scratch rows, all -1: per thread, the leading grid
    coordinates of its tile, then what its tile buffer holds (none yet; see
    convt/_gemm.pxi, THREAD_STATE).  A copy of a kept template: numpy.full took
    a tenth of a tiny call's fixed cost."""
    return _scratch_template(threads, width).copy()


def _run_gemm(arrays, run, threads, finite=True, streamed=False):
    """Run the GEMM engine; False (nothing done) if the direct engine must serve
    the call: w holds non-finite weights the GEMM cannot handle exactly.
    ``finite``: ConvTranspose, whose zero padding is not part of the operator
    (Conv's is: its non-finite weights are packed as they are).  ``streamed``:
    the engine reads w itself (a Conv's, see _dispatch.streams_weights)."""
    plan, decision = run.plan, run.decision
    accumulation = decision.accumulation
    if streamed:
        packed, non_finite = _NOTHING_PACKED[accumulation.itemsize == 8], 0
    else:
        packed, non_finite = _packed_weights(arrays, run, threads, finite)
    if non_finite:
        bad = np.argwhere(~np.isfinite(arrays.w))
        if len(bad) > MAX_NON_FINITE_WEIGHTS or not np.isfinite(arrays.x).all():
            return False
    if plan.needs_fill:
        fill_with_bias(arrays.y, arrays.b)
    scratch = _fresh_scratch(threads, len(run.axes) + load().GEMM_THREAD_STATE)
    workspace, block = _workspace.lend((threads, plan.workspace_per_thread), accumulation)
    try:
        if decision.kernel_set == "blas":
            # BLAS is called from convt's own threads: hold its pool at one thread meanwhile
            from ._blas import controller

            with controller().single_threaded():
                run.engine.run(arrays, packed, workspace, scratch, threads)
        else:
            run.engine.run(arrays, packed, workspace, scratch, threads, streamed)
    finally:
        _workspace.give_back(block)
    if non_finite:
        add_weight_contributions(arrays, bad, run.problem)
    return True


def add_weight_contributions(arrays, weights, problem):
    """y += the contribution of each listed weight w[c, m, k...] (rows of indices)
    over every real input position, as the operator defines it.

    The GEMM engine packs non-finite weights as 0 (a zero-padded tile times NaN
    or Inf would spoil outputs the weight never reaches); their contributions
    are NaN or +-Inf wherever they reach, so the order of this addition cannot
    change any result.
    """
    x, w, y = arrays.x, arrays.w, arrays.y
    geometry, accumulation = problem.geometry, problem.accumulation
    cg, mg = problem.cg, problem.mg
    axes = tuple(zip(geometry.input_shape, geometry.output_shape, geometry.strides,
                     geometry.dilations, geometry.pads_begin))
    for c, m, *taps in weights.tolist():
        # per axis, the inputs i whose output o = i * stride + k * dilation - pad exists
        sources, targets = [], []
        for (size, out, stride, dilation, pad), k in zip(axes, taps):
            inputs = np.arange(size)
            outputs = inputs * stride + (k * dilation - pad)
            reached = (outputs >= 0) & (outputs < out)
            sources.append(inputs[reached])
            targets.append(outputs[reached])
        if not all(len(source) for source in sources):
            continue
        channel = (c // cg) * mg + m
        with np.errstate(invalid="ignore", over="ignore"):  # 0 x Inf and Inf - Inf: NaN
            contribution = (x[:, c][(slice(None),) + np.ix_(*sources)].astype(accumulation)
                            * accumulation.type(w[(c, m, *taps)]))
            target = (slice(None),) + np.ix_(*targets)
            y[:, channel][target] = (y[:, channel][target].astype(accumulation)
                                     + contribution).astype(y.dtype)


def flop_count(x_shape, w_shape):
    """Floating-point operations (2 per multiply-add) of the textbook ConvTranspose."""
    batch, channels = x_shape[:2]
    return 2 * batch * channels * w_shape[1] * math.prod(x_shape[2:]) * math.prod(w_shape[2:])


@dataclass(frozen=True)
class Explanation:
    """Why a call runs as it does: the problem, the decision and its plan.

    ``str()`` gives a readable report; the attributes hold the objects.
    """

    problem: _dispatch.Problem
    decision: _dispatch.Decision
    plan: object
    threads: int
    channels_last_copies: bool = False  # see convt._dispatch.channels_last_problem
    winograd: object = None  # convt._winograd.WinogradRun when Winograd serves the call
    plane: object = None  # convt._planes.PlaneRun when depthwise planes serve the call
    col2im: object = None  # convt._col2im.Col2imRun when col2im serves the call
    streamed: bool = False  # the GEMM engine reads w as it goes (_dispatch.streams_weights)
    bands: object = None  # convt._bands.BandRun when bands of output rows serve the call
    bound: bool = False  # a BoundLayer's call: weights packed once, never compared

    def __str__(self):
        problem, decision, plan = self.problem, self.decision, self.plan
        geometry = problem.geometry
        lines = [
            f"problem: batch {problem.batch}, {problem.in_channels} -> {problem.out_channels} "
            f"channels in {problem.group} group(s), input {geometry.input_shape} -> output "
            f"{geometry.output_shape}, kernel {geometry.kernel_shape}, strides "
            f"{geometry.strides}, dilations {geometry.dilations}, pads "
            f"{tuple(zip(geometry.pads_begin, geometry.pads_end))}, {problem.dtype.name}",
            f"  {problem.multiply_adds():,} multiply-adds; accumulation in "
            f"{decision.accumulation.name}",
        ]
        if self.channels_last_copies:
            lines.append("  channels-last copies: a depthwise map of at most "
                         f"CHANNELS_LAST_MAX_OUTPUTS={_dispatch.CHANNELS_LAST_MAX_OUTPUTS} outputs "
                         "runs as channels-last rows, x and y transposed around them")
        if self.winograd is not None:
            layout = self.winograd.layout
            phases = len(self.winograd.phases)
            kind = ("F(2x2x2, 3x3x3): 64 products per 2x2x2" if problem.geometry.ndim == 3
                    else f"F(2x2, 2x2) on each of {phases} stride phase(s): 9 products per "
                    "2x2" if phases else "F(2x2, 3x3): 16 products per 2x2")
            lines.append(
                f"  winograd {kind} outputs and input channel, "
                f"blocks of {layout['tile_rows']} x {layout['tiles']} tiles, input channels "
                f"{layout['channel_chunk']} at a time (blocked sums of {layout['block']}), "
                f"{layout['out_chunk']} output channels per item, "
                f"{self.winograd.work_items} work items, kernel set {self.winograd.family}; "
                "non-finite weights, inputs or outputs: the GEMM engine below")
        if self.plane is not None:
            lines.append(f"  {_planes.describe(self.plane)} (instead of the engine below)")
        if self.bound:
            lines.append("  bound weights: packed on the first call of each plan, then used "
                         "without comparing them with a copy")
        if self.col2im is not None:
            lines.append(f"  {_col2im.describe(self.col2im, self.bound)} (instead of the engine "
                         "below)")
        if self.bands is not None:
            lines.append(f"  {_bands.describe(self.bands)} (instead of the engine below)")
        lines += [f"  {reason}" for reason in decision.reasons]
        if decision.engine == "gemm":
            blocking = decision.blocking
            flags = [name for name, on in (
                ("exact stacks", blocking.exact_stacks), ("residue pairs", blocking.residue_pairs),
                ("half panels", decision.half_panels), ("masked stores", decision.masked_stores),
                ("B packing", decision.pack_min_blocks > 0),
                ("pair packing", decision.pair_pack_min_blocks > 0),
                ("transposed kernels", blocking.transposed),
                ("x read as the BLAS operand", decision.input_is_tile)) if on]
            lines.append(f"  blocking: {blocking.mr or 'all'} rows x {blocking.nr or 'a tile of'}"
                         f" positions per kernel call, K chunks of up to {blocking.max_depth}"
                         f" steps; {', '.join(flags) or 'no options'}")
            for index, stack in enumerate(plan.stacks):
                kind = ("exact, stored into y" if stack["store_direct"] else
                        "exact" if stack["exact"] else "partnered" if stack["partner"] >= 0
                        else "")
                if stack["gather"] and decision.kernel_set != "blas":
                    kind = ", ".join(filter(None, (kind, "tiles gathered tap by tap")))
                if stack["transposed"]:
                    kind = ", ".join(filter(None, (kind, "transposed: weight rows as vectors,"
                                                         " positions broadcast (gemm_t)")))
                if stack["image_window"]:
                    kind = ", ".join(filter(None, (kind, "each thread keeps a window of the "
                                                         "whole image, each row copied once")))
                lines.append(
                    f"  stack {index}: {stack['phases']} phase(s) x {stack['taps']} tap(s), "
                    f"{stack['rows']} rows, depth {problem.cg * stack['taps']} in chunks of "
                    f"{stack['chunk'] * stack['taps']} (blocked sums of {stack['sum_block']}), "
                    f"tiles {stack['tile_rows']} x {stack['tile_cols']}, "
                    f"{stack['items']} item(s) per image and group" + (f"; {kind}" if kind else ""))
            workspace = plan.workspace_per_thread * decision.accumulation.itemsize
            weights = ("weights read from w block by block as they are used, not packed"
                       if self.streamed else "packed weights "
                       f"{plan.packed_size * decision.accumulation.itemsize / 2**10:.0f} KiB")
            lines.append(f"  {len(plan.items)} work items on {self.threads} thread(s); "
                         f"workspace {workspace / 2**20:.2f} MiB per thread, {weights}")
        else:
            layout = plan.layout[0]
            workspace = layout["floats"] * decision.accumulation.itemsize
            units = (f"blocks of up to {layout['band_rows']} output rows" if layout["band_rows"]
                     else "output rows")
            lines.append(f"  {layout['rows']} {units} on {self.threads} thread(s); "
                         f"workspace {workspace / 2**10:.1f} KiB per thread")
        return "\n".join(lines)


def _shape_of(value, name):
    """(shape, dtype or None) of a shape tuple or an array passed for one."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return tuple(value.shape), np.dtype(value.dtype)
    try:
        return tuple(operator.index(size) for size in value), None
    except TypeError:
        raise TypeError(f"{name} must be a shape (a tuple of ints) or an array, got "
                        f"{value!r} of type {type(value).__name__}") from None


def explain(layer, x_shape, w_shape=None, dtype=None):
    """How ``layer.apply`` would run on C-contiguous arrays of these shapes and dtype.

    Parameters
    ----------
    layer : ConvTranspose, Conv or BoundLayer
        The estimator, or a layer bound to its weights (``layer.bind(w)``): then
        the call ``bound(x)`` is explained, whose weights are packed on its first
        call and never compared again.
    x_shape, w_shape : tuple of int, or arrays
        Shapes of the input ``(N, C, D1, ..., Dn)`` and weight: ``(C, M/group,
        k1, ..., kn)`` for a ConvTranspose, ``(M, C/group, k1, ..., kn)`` for a Conv;
        arrays stand for their shapes.  ``w_shape`` is required unless ``layer`` is
        a BoundLayer (then it is the bound weights' shape, which it must match if
        given).
    dtype : dtype, optional
        The arrays' dtype: ``x``'s when ``x_shape`` is an array, else the bound
        weights' dtype for a BoundLayer, else float32.

    Returns
    -------
    Explanation
        Its ``str()`` is a report: the engine, the kernel set and why, the
        blocking, every GEMM stack, work items, threads and workspace.

    Examples
    --------
    >>> import numpy as np
    >>> from convt import ConvTranspose, explain
    >>> report = explain(ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1)),
    ...                  (1, 64, 32, 32), (64, 32, 4, 4), np.float32)
    >>> report.decision.engine
    'gemm'
    >>> print(report)  # doctest: +ELLIPSIS
    problem: batch 1, 64 -> 32 channels in 1 group(s), input (32, 32) -> output (64, 64), ...
    """
    x_shape, x_dtype = _shape_of(x_shape, "x_shape")
    layer, w_shape, bound_dtype = _unbound(layer, w_shape)
    geometry = layer._geometry_for(x_shape, w_shape)
    group = layer._attributes().group
    dtype = _explained_dtype(dtype if dtype is not None else x_dtype or bound_dtype or np.float32)
    out_shape = layer.output_shape_for(x_shape, w_shape)
    channel = 1 if getattr(layer, "data_format", "NCX") == "NCX" else -1
    transpose = not getattr(layer, "_forward", False)
    channels_last = channel == -1
    in_channels, out_channels = x_shape[channel], out_shape[channel]
    batch = x_shape[0]

    def problem_of_shape(geometry, batch):
        return _dispatch.Problem(
            geometry, batch, in_channels, out_channels, group, dtype,
            y_rows_contiguous=not channels_last or out_channels <= 1,
            x_spatially_contiguous=not channels_last or in_channels <= 1,
            channels_innermost=channels_last or (in_channels <= 1 and out_channels <= 1),
            transpose=transpose)

    problem = problem_of_shape(geometry, batch)
    # as prepare does: batched 1-D calls fold unless col2im serves them unfolded
    if folds_batch(geometry, batch) and not _col2im_serves_unfolded(problem):
        geometry, batch = folded_geometry(geometry, batch), 1
        problem = problem_of_shape(geometry, batch)
    planes = _dispatch.plane_route(problem)
    copied = None if planes else _dispatch.channels_last_problem(problem)
    problem = copied or problem
    run = execution(problem)
    threads = _dispatch.resolve_threads(layer._attributes().num_threads, work_items(run.plan),
                                        problem.multiply_adds())
    winograd = (_winograd.plan(problem, run.decision)
                if _dispatch.winograd_route(problem, run.decision) else None)
    plane = _planes.plan(problem, run.decision.row_family) if planes else None
    col2im = (_col2im.plan(problem, run.decision)
              if (copied is None and batch == x_shape[0]
                  and _dispatch.col2im_route(problem, run.decision)) else None)
    bands = (_bands.plan(problem, run.decision)
             if (copied is None and winograd is None and not planes
                 and _dispatch.band_route(problem, run.decision)) else None)
    streamed = False
    if not transpose and getattr(layer, "filter_format", "OIX") == "OIX":
        # a C-contiguous w, as a view of one element: only its strides are read (in
        # other filter layouts no output channel's weights are contiguous)
        c_strides = [dtype.itemsize * math.prod(w_shape[a + 1:]) for a in range(len(w_shape))]
        w_view = np.lib.stride_tricks.as_strided(np.empty(1, dtype), w_shape, c_strides)
        streamed = _dispatch.streams_weights(
            problem, run.decision, run.plan,
            element_strides(_grouped_weight(w_view, group, in_channels, transpose)))
    serving = plane or winograd or col2im or bands  # an engine that runs instead of the plan's
    if serving is not None:
        threads = _dispatch.resolve_threads(layer._attributes().num_threads,
                                            serving.work_items, serving.multiply_adds)
    return Explanation(problem, run.decision, run.plan, threads, copied is not None, winograd,
                       plane, col2im, streamed and serving is None and bound_dtype is None,
                       bands, bound_dtype is not None)


def _explained_dtype(value):
    """``value`` as one of the dtypes convt computes in (convt._arrays.is_supported), in
    native byte order; a TypeError naming them otherwise."""
    try:
        dtype = np.dtype(value)
    except TypeError:
        dtype = None
    if dtype is None or not _arrays.is_supported(dtype):
        raise TypeError(f"dtype must be one of {', '.join(_arrays.SUPPORTED_NAMES)} (bfloat16 "
                        f"from ml_dtypes), got {value!r}")
    return dtype.newbyteorder("=")


def _unbound(layer, w_shape):
    """(the estimator, w's shape, the bound weights' dtype or None) of explain's
    ``layer`` and ``w_shape`` arguments."""
    from ._bound import BoundLayer  # (imports the front end, which imports this module)

    given = None if w_shape is None else _shape_of(w_shape, "w_shape")[0]
    if isinstance(layer, BoundLayer):
        weights = layer.weights
        if given is not None and given != weights.shape:
            raise ValueError(f"w_shape must be the bound weights' shape {weights.shape} (or "
                             f"None), got {given}")
        return layer.layer, weights.shape, weights.dtype
    if not hasattr(layer, "_geometry_for"):
        raise TypeError("layer must be a ConvTranspose, a Conv or a BoundLayer, got "
                        f"{type(layer).__name__}")
    if given is None:
        raise TypeError("w_shape is required unless layer is a BoundLayer (layer.bind(w))")
    return layer, given, None

