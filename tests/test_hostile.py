"""Hostile input: non-finite values, absurd geometry, huge kernels, bad `out=`.

Nothing a user passes may hang, exhaust memory or give a wrong number: every
case gets the operator's answer (only real input positions contribute, as the
definition says) or a clean ValueError, TypeError or MemoryError, quickly.
"""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from convt import ConvTranspose, conv_transpose, explain
from convt._reference import reference_conv_transpose

from _helpers import DTYPES, ENGINES, assert_matches_reference, run_engine


def _assert_same_non_finite(y, expected):
    """NaN exactly where the definition has NaN, the same infinities; finite values are
    left to assert_matches_reference."""
    y = y.astype(np.float64)
    assert np.array_equal(np.isnan(y), np.isnan(expected)), (
        f"NaN at {np.argwhere(np.isnan(y) != np.isnan(expected))[:5].tolist()}")
    infinite = np.isinf(expected)
    assert np.array_equal(y[infinite], expected[infinite])
    assert not np.isinf(y[~infinite & ~np.isnan(expected)]).any()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_nan_weight_spoils_only_the_outputs_it_reaches(engine):
    # the reproducer: outputs 0-2 see w[0, 0, 0], output 3 does not
    x = np.ones((1, 16, 3), np.float32)
    w = np.ones((16, 1, 2), np.float32)
    w[0, 0, 0] = np.nan
    y = run_engine(engine, x, w)
    assert np.isnan(y[0, 0, :3]).all() and y[0, 0, 3] == 16


@pytest.mark.parametrize("engine", ENGINES)
def test_an_inf_weight_gives_no_nan_the_definition_lacks(engine):
    x = np.ones((1, 16, 3, 3), np.float32)
    w = np.ones((16, 1, 2, 2), np.float32)
    w[0, 0, 0, 0] = np.inf
    y = run_engine(engine, x, w, strides=(2, 2))
    expected = reference_conv_transpose(x, w, strides=(2, 2))
    assert not np.isnan(expected).any()
    _assert_same_non_finite(y, expected)


@st.composite
def planted_cases(draw):
    ndim = draw(st.integers(1, 2))
    group = draw(st.integers(1, 2))
    cg, mg = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    inputs = draw(st.lists(st.integers(1, 6), min_size=ndim, max_size=ndim))
    kernel = draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim))
    strides = draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim))
    # pads that crop up to most of the output, so some weights reach nothing
    pads = draw(st.lists(st.integers(0, 5), min_size=2 * ndim, max_size=2 * ndim))
    params = dict(strides=strides, pads=pads, group=group)
    dtype = draw(st.sampled_from(DTYPES))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((1, cg * group, *inputs))
    w = rng.standard_normal((cg * group, mg, *kernel))
    b = rng.standard_normal(mg * group) if draw(st.booleans()) else None
    for array in [a for a in (x, w, b) if a is not None]:
        for _ in range(draw(st.integers(0, 2))):
            array.flat[draw(st.integers(0, array.size - 1))] = draw(
                st.sampled_from([np.nan, np.inf, -np.inf]))
    try:
        ConvTranspose(**params).output_shape_for(x.shape, w.shape)
    except ValueError:
        assume(False)
    cast = [None if a is None else a.astype(dtype) for a in (x, w, b)]
    return (*cast, params)


@pytest.mark.parametrize("engine", ENGINES)
@given(case=planted_cases())
def test_planted_nan_and_inf_follow_the_definition(engine, case):
    x, w, b, params = case
    y = run_engine(engine, x, w, b, **params)
    expected = reference_conv_transpose(x, w, b, **params)
    _assert_same_non_finite(y, expected)
    finite = np.isfinite(expected)
    if finite.all():
        assert_matches_reference(y, x, w, b, **params)


def test_many_non_finite_weights_and_inputs_too():
    # beyond the GEMM's one-by-one corrections, and with Inf inputs meeting Inf
    # weights (0 x Inf in a zero-padded tile would be NaN): the direct engine serves
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 32, 6, 6)).astype(np.float32)
    w = rng.standard_normal((32, 16, 4, 4)).astype(np.float32)
    w.flat[rng.choice(w.size, 200, replace=False)] = np.inf
    x[0, 3, 2, 2] = np.inf
    params = dict(strides=(2, 2), pads=(1, 1, 1, 1))
    for engine in [e for e in ENGINES if e.startswith("gemm")]:
        _assert_same_non_finite(run_engine(engine, x, w, **params),
                                reference_conv_transpose(x, w, **params))


def test_memory_does_not_grow_with_dilation():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 16, 4)).astype(np.float32)
    w = rng.standard_normal((16, 16, 2)).astype(np.float32)
    for dilation in (2**24, 2**28, 2**31 - 1):
        params = dict(dilations=(dilation,), pads=(dilation, 0))
        report = explain(ConvTranspose(**params), x.shape, w.shape)
        if report.decision.engine == "gemm":
            assert report.plan.workspace_per_thread * 4 < 2**20
        assert_matches_reference(conv_transpose(x, w, **params), x, w, **params)


def test_geometry_beyond_64_bit_arithmetic_is_a_value_error():
    x = np.ones((1, 1, 3, 3), np.float32)
    w = np.ones((1, 1, 3, 3), np.float32)
    with pytest.raises((ValueError, MemoryError)):
        conv_transpose(x, w, dilations=(2**30, 2**30))
    with pytest.raises(ValueError, match="64-bit index arithmetic"):
        ConvTranspose(strides=(2**31 - 1,)).output_shape_for((1, 1, 2**33), (1, 1, 1))


def _constant_kernel_output(x, value, kernel, stride, dilation, pad_begin, out):
    """1-D ConvTranspose with a kernel of `kernel` equal taps, by its definition:
    y[o] = value * sum of x[i] over the taps k = (o - i s + pad) / d in [0, kernel)."""
    i = np.arange(x.shape[-1])[:, None]
    o = np.arange(out)[None, :]
    numerator = o - i * stride + pad_begin
    reaches = (numerator % dilation == 0) & (numerator >= 0) & (numerator // dilation < kernel)
    return value * np.einsum("nci,io->no", x.astype(np.float64), reaches.astype(np.float64))


def test_a_kernel_far_longer_than_the_input_costs_what_reaches_the_output():
    # the zero-stride view of 2^32 + 10 taps, cropped to 12 outputs
    x = np.random.default_rng(6).standard_normal((1, 16, 4)).astype(np.float32)
    taps = 2**32 + 10
    w = np.lib.stride_tricks.as_strided(np.full(1, 0.5, np.float32), (16, 1, taps), (0, 0, 0))
    layer = ConvTranspose(output_shape=(12,))
    y = layer.apply(x, w)
    (begin, _), = layer.pads_for(x.shape, w.shape)
    expected = _constant_kernel_output(x, 0.5, taps, 1, 1, begin, 12)
    np.testing.assert_allclose(y[:, 0], expected, rtol=1e-5, atol=1e-5)
    assert explain(layer, x.shape, w.shape).problem.multiply_adds() < 10**4


def test_absurd_work_is_refused_with_the_estimate():
    # 2^20 channels x 2^30 taps reaching 8 outputs: 2^53 multiply-adds, no memory
    x = np.lib.stride_tricks.as_strided(np.ones(1, np.float32), (1, 2**20, 2**30), (0, 0, 0))
    w = np.lib.stride_tricks.as_strided(np.ones(1, np.float32), (2**20, 1, 2**30), (0, 0, 0))
    with pytest.raises(ValueError, match=r"would perform 9\.\d+e\+15 multiply-adds"):
        conv_transpose(x, w, output_shape=(8,))


def test_a_misaligned_out_is_refused():
    x = np.ones((1, 1, 4), np.float32)
    w = np.ones((1, 1, 2), np.float32)
    buffer = np.zeros(4 * 5 + 1, np.uint8)
    out = buffer[1:].view(np.float32).reshape(1, 1, 5)
    assert not out.flags.aligned
    with pytest.raises(ValueError, match="out must be aligned"):
        conv_transpose(x, w, out=out)


HOSTILE = textwrap.dedent('''
    import sys, numpy as np
    from hypothesis import given, settings, strategies as st, HealthCheck
    from convt import ConvTranspose, conv_transpose

    def constant_1d(x, value, kernel, stride, dilation, pad_begin, out):
        i = np.arange(x.shape[-1])[:, None]; o = np.arange(out)[None, :]
        num = o - i * stride + pad_begin
        reaches = (num % dilation == 0) & (num >= 0) & (num // dilation < kernel)
        return value * np.einsum("nci,io->no", x.astype(np.float64), reaches * 1.0)

    @settings(max_examples=int(sys.argv[1]), deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def hostile(data):
        size = data.draw(st.integers(1, 5))
        kernel = data.draw(st.sampled_from([1, 2, 7, 10**3, 10**6, 2**31, 2**40]))
        stride = data.draw(st.sampled_from([1, 2, 3, 2**20, 2**31 - 1]))
        dilation = data.draw(st.sampled_from([1, 2, 5, 2**24, 2**31 - 1]))
        channels = data.draw(st.integers(1, 4))
        out = data.draw(st.integers(1, 40))
        value = data.draw(st.sampled_from([0.5, -2.0]))
        x = np.random.default_rng(data.draw(st.integers(0, 99))).standard_normal(
            (1, channels, size)).astype(np.float32)
        w = np.lib.stride_tricks.as_strided(np.full(1, value, np.float32),
                                            (channels, 1, kernel), (0, 0, 0))
        layer = ConvTranspose(strides=(stride,), dilations=(dilation,), output_shape=(out,))
        try:
            y = layer.apply(x, w)
        except (ValueError, TypeError, MemoryError):
            return
        (begin, _), = layer.pads_for(x.shape, w.shape)
        expected = constant_1d(x, value, kernel, stride, dilation, begin, out)
        scale = np.abs(x).sum() * abs(value) + 1
        assert np.allclose(y[:, 0], expected, rtol=0, atol=1e-5 * scale), (y, expected)

    hostile()
    print("ok")
''')


def test_hostile_geometry_fuzz_finishes_in_time(tmp_path):
    # kernels from 1 to 2^40 taps, strides and dilations up to 2^31 - 1, pads from
    # output_shape: each example answers correctly or refuses cleanly; the run is
    # bounded by a subprocess timeout (a hang or an exhausted machine fails it)
    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE)
    result = subprocess.run([sys.executable, str(script), "60"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")
