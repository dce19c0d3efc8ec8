"""Running one validated ConvTranspose call: dispatch, plan, pack, drive.

Every front-end ends in :func:`compute` with a resolved geometry and arrays
in the (N, C, D...) / (C, M / group, k...) / (N, M, O...) layouts (views of
any strides); :mod:`convt._dispatch` decides how, :mod:`convt._plan` plans,
the drivers of :mod:`convt._kernels` run.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import os
from dataclasses import dataclass

import numpy as np

from . import _dispatch, _records
from ._plan import direct_plan, gemm_plan


@dataclass(frozen=True)
class Operands:
    """The arrays the compiled drivers read and write, with element strides."""

    x: np.ndarray
    w: np.ndarray
    y: np.ndarray
    b: np.ndarray | None
    b_acc: np.ndarray | None      # the bias in the accumulation type (exact stacks)
    x_strides: np.ndarray
    w_strides: np.ndarray
    y_strides: np.ndarray


def element_strides(array):
    """Strides of ``array`` in elements, as an intp array for the kernels."""
    return np.array([stride // array.itemsize for stride in array.strides], dtype=np.intp)


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


def problem_of(x, w, y, geometry, group):
    """The dispatch point's view of a call."""
    return _dispatch.Problem(
        geometry=geometry,
        batch=x.shape[0],
        in_channels=x.shape[1],
        out_channels=y.shape[1],
        group=group,
        dtype=x.dtype,
        y_rows_contiguous=y.shape[-1] <= 1 or y.strides[-1] == y.itemsize,
        x_spatially_contiguous=_spatially_contiguous(x),
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
    axes = _records.records(
        _records.AXIS,
        zip(geometry.input_shape, geometry.output_shape, geometry.strides),
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
    )


def plan_for(problem, decision):
    """The engine's plan for a problem under a decision (cached)."""
    geometry = problem.geometry
    if decision.engine == "gemm":
        return gemm_plan(geometry, problem.batch, problem.cg, problem.mg, problem.group,
                         decision.blocking)
    interleave = problem.y_rows_contiguous and problem.dtype == decision.accumulation
    return direct_plan(geometry, problem.batch, problem.out_channels,
                       _dispatch.DIRECT_MAX_SOURCES, interleave, decision.masked_stores)


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
    requested = os.environ.get(_dispatch.KERNEL_SET_VARIABLE) or None
    return _execution(problem, engine, kernel_set, requested,
                      tuple(sorted(overrides.items())), _dispatch.tuning())


@functools.lru_cache(maxsize=256)
def _execution(problem, engine, kernel_set, requested, overrides, tuning):
    environ = {} if requested is None else {_dispatch.KERNEL_SET_VARIABLE: requested}
    decision = _dispatch.decide(problem, engine=engine, kernel_set=kernel_set, environ=environ,
                                **dict(overrides))
    from . import _kernels

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


def compute(x, w, b, y, geometry, group, num_threads, engine=None, backend=None, **overrides):
    """Fill ``y`` with ConvTranspose(x, w, b); all arguments already validated.

    ``engine`` ('gemm', 'direct') and ``backend`` (a kernel set: 'avx512',
    'avx2', 'portable', 'blas') force a path, and ``overrides`` replace
    fields of the decision; tests use them to cover every path.
    """
    batch, channels = x.shape[:2]
    if batch == 0 or y.shape[1] == 0:
        return y
    if channels // group == 0:
        fill_with_bias(y, b)
        return y
    problem = problem_of(x, w, y, geometry, group)
    _dispatch.check_work(problem.multiply_adds())  # before planning: it is counted, not listed
    run = execution(problem, engine, backend, **overrides)
    decision = run.decision
    threads = _dispatch.resolve_threads(num_threads, work_items(run.plan), run.multiply_adds)
    b_acc = None
    if b is not None and decision.engine == "gemm":
        b_acc = np.ascontiguousarray(b, dtype=decision.accumulation)
    arrays = Operands(x, w, y, b, b_acc, element_strides(x), element_strides(w),
                      element_strides(y))
    if decision.engine == "direct" or not _run_gemm(arrays, run, threads):
        if decision.engine == "gemm":  # non-finite weights the GEMM cannot serve exactly
            run = execution(problem, "direct", backend if backend != "blas" else None)
        _run_direct(arrays, run, threads)
    return y


def _run_direct(arrays, run, threads):
    from . import _kernels

    layout = run.plan.layout[0]
    workspace = np.empty((threads, layout["floats"]), dtype=run.decision.accumulation)
    scratch = np.empty((threads, layout["ints"]), dtype=np.intp)
    run.engine.run(arrays, workspace, scratch, threads)


# Non-finite weights whose exact contributions are added one by one after the
# GEMM, at most; more (or non-finite inputs too) run the direct engine instead.
MAX_NON_FINITE_WEIGHTS = 64


def _run_gemm(arrays, run, threads):
    """Run the GEMM engine; False (nothing done) if the direct engine must serve
    the call: w holds non-finite weights the GEMM cannot handle exactly."""
    from . import _kernels

    plan, decision = run.plan, run.decision
    accumulation = decision.accumulation
    packed = np.empty(plan.packed_size, dtype=accumulation)
    non_finite = _kernels.pack_weights(arrays, run.scalars, plan, packed, threads)
    if non_finite:
        bad = np.argwhere(~np.isfinite(arrays.w))
        if len(bad) > MAX_NON_FINITE_WEIGHTS or not np.isfinite(arrays.x).all():
            return False
    if plan.needs_fill:
        fill_with_bias(arrays.y, arrays.b)
    workspace = np.empty((threads, plan.workspace_per_thread), dtype=accumulation)
    scratch = np.empty((threads, len(run.axes)), dtype=np.intp)
    guard = contextlib.nullcontext()
    if decision.kernel_set == "blas":
        # BLAS is called from convt's own threads: hold its pool at one thread meanwhile
        from ._blas import controller

        guard = controller().single_threaded()
    with guard:
        run.engine.run(arrays, packed, workspace, scratch, threads)
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
    for c, m, *taps in weights.tolist():
        source, target = [slice(None)], [slice(None)]
        for i_size, o_size, k, s, d, p in zip(geometry.input_shape, geometry.output_shape, taps,
                                              geometry.strides, geometry.dilations,
                                              geometry.pads_begin):
            shift = k * d - p  # o = i * s + shift
            lo = max(0, -(shift // s))
            hi = min(i_size - 1, (o_size - 1 - shift) // s)
            if hi < lo:
                break
            source.append(slice(lo, hi + 1))
            target.append(slice(lo * s + shift, hi * s + shift + 1, s))
        else:
            channel = (c // cg) * mg + m
            with np.errstate(invalid="ignore", over="ignore"):  # 0 x Inf is NaN, as defined
                contribution = x[(slice(None), c) + tuple(source[1:])].astype(accumulation) * \
                    accumulation.type(w[(c, m, *taps)])
            view = y[(slice(None), channel) + tuple(target[1:])]
            with np.errstate(invalid="ignore", over="ignore"):  # Inf - Inf is NaN, as defined
                view[...] = (view.astype(accumulation) + contribution).astype(y.dtype)


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
        lines += [f"  {reason}" for reason in decision.reasons]
        if decision.engine == "gemm":
            blocking = decision.blocking
            flags = [name for name, on in (
                ("exact stacks", blocking.exact_stacks), ("residue pairs", blocking.residue_pairs),
                ("half panels", decision.half_panels), ("masked stores", decision.masked_stores),
                ("B packing", decision.pack_min_blocks > 0),
                ("x read as the BLAS operand", decision.input_is_tile)) if on]
            lines.append(f"  blocking: {blocking.mr or 'all'} rows x {blocking.nr or 'a tile of'}"
                         f" positions per kernel call; {', '.join(flags) or 'no options'}")
            for index, stack in enumerate(plan.stacks):
                kind = ("exact, stored into y" if stack["store_direct"] else
                        "exact" if stack["exact"] else "partnered" if stack["partner"] >= 0
                        else "")
                if stack["gather"] and decision.kernel_set != "blas":
                    kind = ", ".join(filter(None, (kind, "tiles gathered tap by tap")))
                lines.append(
                    f"  stack {index}: {stack['phases']} phase(s) x {stack['taps']} tap(s), "
                    f"{stack['rows']} rows, depth {problem.cg * stack['taps']} in chunks of "
                    f"{stack['chunk'] * stack['taps']} (blocked sums of {stack['sum_block']}), "
                    f"tiles {stack['tile_rows']} x {stack['tile_cols']}, "
                    f"{stack['items']} item(s) per image and group" + (f"; {kind}" if kind else ""))
            workspace = plan.workspace_per_thread * decision.accumulation.itemsize
            lines.append(f"  {len(plan.items)} work items on {self.threads} thread(s); "
                         f"workspace {workspace / 2**20:.2f} MiB per thread, packed weights "
                         f"{plan.packed_size * decision.accumulation.itemsize / 2**10:.0f} KiB")
        else:
            layout = plan.layout[0]
            workspace = layout["floats"] * decision.accumulation.itemsize
            lines.append(f"  {layout['rows']} output rows on {self.threads} thread(s); "
                         f"workspace {workspace / 2**10:.0f} KiB per thread")
        return "\n".join(lines)


def explain(layer, x_shape, w_shape, dtype=np.float32):
    """How ``layer.apply`` would run on C-contiguous arrays of these shapes and dtype.

    Parameters
    ----------
    layer : ConvTranspose
        The estimator.
    x_shape, w_shape : tuple of int
        Shapes of the input ``(N, C, D1, ..., Dn)`` and weight ``(C, M/group, k1, ..., kn)``.
    dtype : dtype, default float32
        The arrays' dtype.

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
    x_shape, w_shape = tuple(x_shape), tuple(w_shape)
    geometry = layer._geometry_for(x_shape, w_shape)
    group = layer._attributes().group
    dtype = np.dtype(dtype)
    out_shape = layer.output_shape_for(x_shape, w_shape)
    problem = _dispatch.Problem(geometry, x_shape[0], x_shape[1], out_shape[1], group, dtype)
    run = execution(problem)
    threads = _dispatch.resolve_threads(layer._attributes().num_threads, work_items(run.plan),
                                        problem.multiply_adds())
    return Explanation(problem, run.decision, run.plan, threads)


# --- Conv, the forward operator ------------------------------------------------
#
# TEMPORARY: compute_conv runs a Conv on the ConvTranspose engine above.  The
# native Conv engine (input stride phases decimated into the tile buffer)
# replaces its body; its contract is compute_conv's docstring.
#
# Along one axis, output o reads input o * s + k * d - pad through tap k.  The
# taps whose k * d - pad leave the same residue r modulo s read one decimated
# input x[r::s] at offsets q = (k * d - pad) // s, which step by d / gcd(s, d):
# a stride-1 correlation, i.e. a stride-1 ConvTranspose with the taps reversed
# and the weight's channel axes swapped per group.  Every output sums the
# products of its phases; single-phase layers (every stride-1 Conv) are one
# ConvTranspose call written straight into y.


@dataclass(frozen=True)
class ConvPhase:
    """One combination of per-axis input residues of a Conv, as a stride-1 ConvTranspose:
    ``x[..., x_slices]`` times the taps ``w[..., w_slices]`` (then reversed) under
    ``geometry``."""

    x_slices: tuple
    w_slices: tuple
    geometry: object


def _axis_phases(size, outputs, kernel, stride, dilation, pad):
    """(x slice, w slice, ConvTranspose axis numbers) of every residue of one axis
    whose taps read at least one input position."""
    taps = {}
    for k in range(kernel):
        offset, residue = divmod(k * dilation - pad, stride)
        taps.setdefault(residue, []).append((k, offset))
    phases = []
    for residue, members in sorted(taps.items()):
        length = len(range(residue, size, stride))
        if length == 0:
            continue
        (first, offset), count = members[0], len(members)
        step, spacing = (members[1][0] - first, members[1][1] - offset) if count > 1 else (1, 1)
        # stride-1 ConvTranspose: input length, taps, dilation, pads (begin, end)
        numbers = (length, count, spacing, (count - 1) * spacing + offset,
                   length - outputs - offset)
        phases.append((slice(residue, None, stride),
                       slice(first, first + (count - 1) * step + 1, step), numbers))
    return phases


@functools.lru_cache(maxsize=256)
def conv_phases(geometry):
    """The ConvPhase list of a Conv geometry (empty when no tap reads an input)."""
    from ._geometry import build

    axes = [_axis_phases(*numbers) for numbers in zip(
        geometry.input_shape, geometry.output_shape, geometry.kernel_shape, geometry.strides,
        geometry.dilations, geometry.pads_begin)]
    phases = []
    for combination in itertools.product(*axes):
        inputs, kernel, dilations, begin, end = zip(*(numbers for _, _, numbers in combination))
        count = len(inputs)
        phase_geometry = build(inputs, kernel, (1,) * count, dilations, (0,) * count, begin, end)
        assert phase_geometry.output_shape == geometry.output_shape
        phases.append(ConvPhase(tuple(c[0] for c in combination),
                                tuple(c[1] for c in combination), phase_geometry))
    return tuple(phases)


def conv_weight_as_transposed(w, group):
    """ConvTranspose's (C, M/group, k...) weight of a Conv weight (M, C/group, k...): the
    channel axes swapped within each group (a view for group 1 or M == group)."""
    out_channels, cg = w.shape[:2]
    mg = out_channels // group
    kernel = w.shape[2:]
    return w.reshape(group, mg, cg, *kernel).swapaxes(1, 2).reshape(group * cg, mg, *kernel)


def _phase_operands(x, w_transposed, phase):
    whole = (slice(None), slice(None))
    reverse = (slice(None, None, -1),) * len(phase.w_slices)
    return x[whole + phase.x_slices], w_transposed[whole + phase.w_slices][whole + reverse]


def compute_conv(x, w, b, y, geometry, group, num_threads, engine=None, backend=None,
                 **overrides):
    """Fill ``y`` with Conv(x, w, b) as the ONNX text defines it; arguments validated.

    Parameters
    ----------
    x : ndarray (N, C, D1, ..., Dn)
        Any strides (a channels-last view included); float16, bfloat16, float32
        or float64.
    w : ndarray (M, C/group, k1, ..., kn)
        ONNX's Conv layout, any strides, x's dtype.
    b : ndarray (M,) or None
    y : ndarray (N, M, O1, ..., On)
        A writable view of x's dtype, not overlapping x, w or b, to fill.
    geometry : convt._geometry.Geometry
        From :func:`convt._geometry.resolve_conv`: per spatial axis the input
        size, kernel size, stride s, dilation d, pads_begin, pads_end (each >= 0)
        and output size ``floor((in + begin + end - d * (k - 1) - 1) / s) + 1``;
        output_padding is all zeros.
    group : int
        Input channels ``g * C/group ...`` feed output channels ``g * M/group ...``.
    num_threads : int or None
        Results are bitwise identical for every value.
    engine, backend, **overrides
        Force a ConvTranspose engine path, as in :func:`compute` (tests).

    Notes
    -----
    ``y[n, m, o] = b[m] + sum over c, k of xp[n, c, o * s + k * d] * w[m, c', k]``,
    with ``xp`` the input padded with ``pads_begin`` zeros before and ``pads_end``
    after each axis: padding positions are zeros multiplied by the weights, so a
    NaN or infinite weight makes NaN where it meets padding (0 x Inf), as the
    text's "pixels added" and onnxruntime, the onnx reference and PyTorch
    compute.  float64 accumulates in float64; float16 and bfloat16 accumulate
    in float32 and are rounded once.
    """
    if y.size == 0:
        return y
    phases = conv_phases(geometry)
    if x.shape[1] == 0 or not phases:
        fill_with_bias(y, b)
    else:
        w_transposed = conv_weight_as_transposed(w, group)
        arguments = dict(engine=engine, backend=backend, **overrides)
        if len(phases) == 1:
            x_phase, w_phase = _phase_operands(x, w_transposed, phases[0])
            compute(x_phase, w_phase, b, y, phases[0].geometry, group, num_threads, **arguments)
        else:
            _sum_phases(x, w_transposed, b, y, phases, group, num_threads, arguments)
    _multiply_padding(w, y, geometry)
    return y


def _sum_phases(x, w_transposed, b, y, phases, group, num_threads, arguments):
    """y = the sum of every phase's ConvTranspose, in phase order (so the same for any
    thread count), in the accumulation type: float16 and bfloat16 are rounded once."""
    accumulation = _dispatch.accumulation_dtype(x.dtype)
    narrow = accumulation != x.dtype
    total = np.empty(y.shape, accumulation) if narrow else y
    part = np.empty(y.shape, accumulation)
    if narrow:
        w_transposed = w_transposed.astype(accumulation)
        b = None if b is None else b.astype(accumulation)
    for index, phase in enumerate(phases):
        x_phase, w_phase = _phase_operands(x, w_transposed, phase)
        if narrow:
            x_phase = x_phase.astype(accumulation)
        target = total if index == 0 else part
        compute(x_phase, w_phase, b if index == 0 else None, target, phase.geometry, group,
                num_threads, **arguments)
        if index:
            with np.errstate(invalid="ignore", over="ignore"):  # Inf - Inf is NaN, as defined
                total += part
    if narrow:
        with np.errstate(over="ignore"):
            y[...] = total.astype(y.dtype)


def _multiply_padding(w, y, geometry):
    """NaN where a non-finite weight meets a padding position (0 x Inf and 0 x NaN are NaN).

    The ConvTranspose engine adds the products of real input positions only; a
    finite weight times a padding zero adds nothing, so only non-finite weights
    need this.
    """
    pads = geometry.pads_begin + geometry.pads_end
    if not any(pads) or np.isfinite(w).all():
        return
    spoilt = ~np.isfinite(w).all(axis=1)  # (M, k...): output channel and tap
    ndim = geometry.ndim
    for tap in np.argwhere(spoilt.any(axis=0)).tolist():
        real = np.ones(geometry.output_shape, dtype=bool)
        for axis, (k, size, outputs, s, d, p) in enumerate(zip(
                tap, geometry.input_shape, geometry.output_shape, geometry.strides,
                geometry.dilations, geometry.pads_begin)):
            position = np.arange(outputs) * s + k * d - p
            shape = [1] * ndim
            shape[axis] = outputs
            real &= ((position >= 0) & (position < size)).reshape(shape)
        padding = ~real
        if padding.any():
            for channel in np.flatnonzero(spoilt[(slice(None),) + tuple(tap)]).tolist():
                y[:, channel][..., padding] = np.nan
