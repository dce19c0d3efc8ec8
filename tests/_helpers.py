"""Helpers shared by the tests: error bounds, forced engines and seeded operands."""

import zlib

import numpy as np
import pytest

from convt import ConvTranspose, _dispatch, _engine
from convt._reference import reference_conv_transpose

# Every kernel path this machine can run: the direct engine with each kernel
# family's row kernels, and the GEMM engine with each kernel set (the
# families' micro-kernels, or scipy's BLAS).
FAMILIES = tuple(name for name in _dispatch.available_kernel_sets() if name != "blas")
ENGINES = tuple(f"direct-{name}" for name in FAMILIES) + tuple(
    f"gemm-{name}" for name in _dispatch.available_kernel_sets())
try:
    from ml_dtypes import bfloat16
except ImportError:  # bfloat16 tests need ml_dtypes (the test extra has it)
    bfloat16 = None
DTYPES = (np.float16, np.float32, np.float64) + ((bfloat16,) if bfloat16 else ())

# Unit roundoff of the accumulation type of each storage dtype.
ACCUMULATION_EPS = {
    np.dtype(np.float16): 2.0**-24,
    np.dtype(np.float32): 2.0**-24,
    np.dtype(np.float64): 2.0**-53,
}
# Narrow storage: outputs are rounded once, to nearest: (unit roundoff, half the
# smallest subnormal).
FINAL_ROUNDING = {np.dtype(np.float16): (2.0**-11, 2.0**-25)}
if bfloat16 is not None:
    ACCUMULATION_EPS[np.dtype(bfloat16)] = 2.0**-24
    FINAL_ROUNDING[np.dtype(bfloat16)] = (2.0**-8, 2.0**-134)


# ConvTranspose geometries that cross every engine's edges (with small_tiles: hundreds of
# GEMM work items): a batched 2-D k4s2, a grouped 3-D k3s2 with output padding, a long 1-D.
ENGINE_CASES = {
    "2d_k4s2": dict(x=(2, 32, 20, 24), w=(32, 16, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1)),
    "3d_k3s2_grouped": dict(x=(1, 16, 9, 8, 10), w=(16, 4, 3, 3, 3), strides=(2, 2, 2), group=2,
                            output_padding=(1, 1, 0)),
    "1d_long": dict(x=(1, 24, 700), w=(24, 8, 16), strides=(8,), pads=(4, 4)),
}


def engine_case(name, dtype, seed):
    """x, w, b (standard normal, in ``dtype``) and the attributes of ENGINE_CASES[name]."""
    params = dict(ENGINE_CASES[name])
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(params.pop("x")).astype(dtype)
    w = rng.standard_normal(params.pop("w")).astype(dtype)
    b = rng.standard_normal(w.shape[1] * params.get("group", 1)).astype(dtype)
    return x, w, b, params


def run_engine(engine, x, w, b=None, num_threads=None, overrides=None, **params):
    """ConvTranspose(**params) on x, w, b through one forced engine ('direct',
    'direct-<family>', 'gemm-<kernel set>'); ``overrides`` replace decision fields."""
    layer = ConvTranspose(num_threads=num_threads, **params)
    name, _, kernel_set = engine.partition("-")
    return layer._apply(x, w, b, engine=name, backend=kernel_set or None, **(overrides or {}))


def plan_of(kernel_set, x, w, b=None, engine="gemm", **params):
    """(decision, plan) that a forced engine and kernel set make for this call."""
    layer = ConvTranspose(**params)
    attributes, x, w, b, geometry = layer._prepare(x, w, b)
    y = np.empty(layer.output_shape_for(x.shape, w.shape), dtype=x.dtype)
    problem = _engine.problem_of(x, w, y, geometry, attributes.group)
    decision = _dispatch.decide(problem, engine=engine, kernel_set=kernel_set)
    return decision, _engine.plan_for(problem, decision)


def error_bound(x, w, b, params):
    """Per-element bound on |computed - exact| for a sum of products in the accumulation type.

    With n terms per output, summation in precision u errs by at most
    (n + 1) u sum|terms| (plus the bias addition); float16 and bfloat16
    outputs add one final rounding of half an ulp of their type (and half the
    smallest subnormal).
    """
    dtype = np.asarray(x).dtype
    eps = ACCUMULATION_EPS[dtype]
    magnitude = reference_conv_transpose(
        np.abs(np.asarray(x, np.float64)), np.abs(np.asarray(w, np.float64)),
        None if b is None else np.abs(np.asarray(b, np.float64)), **params)
    group = params.get("group", 1)
    x_shape, w_shape = np.shape(x), np.shape(w)
    channels = x_shape[-1] if params.get("data_format") == "NXC" else x_shape[1]
    kernel = w_shape[:-2] if params.get("filter_format") == "XOI" else w_shape[2:]
    terms = channels // group * int(np.prod(kernel)) + 2
    bound = terms * eps * magnitude
    if dtype in FINAL_ROUNDING:
        unit, subnormal = FINAL_ROUNDING[dtype]
        exact = np.abs(reference_conv_transpose(x, w, b, **params))
        bound = bound + unit * (exact + bound) + subnormal
    return bound


def assert_matches_reference(y, x, w, b=None, **params):
    """y equals the float64 reference within the rounding bound of its dtype."""
    expected = reference_conv_transpose(x, w, b, **params)
    assert y.shape == expected.shape
    assert y.dtype == np.asarray(x).dtype
    error = np.abs(y.astype(np.float64) - expected)
    bound = error_bound(x, w, b, params)
    worst = np.unravel_index(np.argmax(error - bound), error.shape) if error.size else None
    assert np.all(error <= bound), (
        f"error {error[worst]} > bound {bound[worst]} at {worst} "
        f"(got {y[worst]}, expected {expected[worst]})"
    )


def case_operands(cases, name, dtype, with_bias=True):
    """x, w, bias (or None) and attributes of cases[name] = (x shape, w shape, attributes),
    drawn from a generator seeded by the name (the same values in every run)."""
    x_shape, w_shape, params = cases[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    b = rng.standard_normal(w_shape[1] * params.get("group", 1)).astype(dtype) if with_bias else None
    return x, w, b, params


def examples(default):
    """Hypothesis examples for one test: ``default``, or CONVT_HYPOTHESIS_EXAMPLES when set
    (the thorough profile)."""
    import os

    return int(os.environ.get("CONVT_HYPOTHESIS_EXAMPLES", default))


_NODE_CASES = []


def onnx_node_cases(op_type):
    """ONNX's own node test cases of one operator (pytest skips when onnx is missing).

    onnx's collect_testcases fills one global list on its first call and returns that
    list on every later call, whatever op_type they ask for; so the tests collect
    every operator's cases once, here, and filter them.
    """
    import pytest

    if not _NODE_CASES:
        node = pytest.importorskip("onnx.backend.test.case.node")
        _NODE_CASES.extend(node.collect_testcases(None))
    return [case for case in _NODE_CASES if case.model.graph.node[0].op_type == op_type]


def float32_operands(x_shape, w_shape, bias_channels, seed=0):
    """Standard-normal float32 x, w and b (``bias_channels`` of it)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    b = rng.standard_normal(bias_channels).astype(np.float32)
    return x, w, b


def relative_error(y, exact):
    """The largest error of ``y`` relative to the largest magnitude of ``exact``."""
    return float(np.abs(y - exact).max() / np.abs(exact).max())


def use_kernel_set(monkeypatch, family):
    """Route this test's calls to kernel set ``family``, or skip where it does not run."""
    if family not in FAMILIES:
        pytest.skip(f"{family} does not run here")
    monkeypatch.setenv(_dispatch.KERNEL_SET_VARIABLE, family)


def assert_same_results_or_non_finite(y, expected, tolerance=1e-4):
    """NaN, +Inf and -Inf of ``y`` where ``expected`` has them (which must have some),
    and the finite values close."""
    np.testing.assert_array_equal(np.isnan(y), np.isnan(expected))
    np.testing.assert_array_equal(np.isposinf(y), np.isposinf(expected))
    np.testing.assert_array_equal(np.isneginf(y), np.isneginf(expected))
    finite = np.isfinite(expected)
    assert not finite.all()
    np.testing.assert_allclose(y[finite], expected[finite], rtol=tolerance, atol=tolerance)


def wrap_engine_runs(monkeypatch, wrapper):
    """Route every prepared engine's ``run`` through ``wrapper(run, *arguments)``, which
    calls ``run`` (the real one) as it likes and returns its result."""
    from convt import _engine

    original = _engine.execution

    def wrapped(*args, **kwargs):
        execution = original(*args, **kwargs)
        real = execution.engine.run

        class Engine:
            def run(self, *arguments):
                return wrapper(real, *arguments)

        return _engine.Execution(**{**execution.__dict__, "engine": Engine()})

    monkeypatch.setattr(_engine, "execution", wrapped)
