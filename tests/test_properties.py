"""Hypothesis: both compiled engines against the float64 reference.

Random N-D, grouped, strided, dilated, padded, output_shape and auto_pad cases
in all three dtypes.  Errors must stay within the rounding bound of the
accumulation type (tests/_helpers.error_bound), not a loose tolerance.
"""

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from _helpers import DTYPES, ENGINES, assert_matches_reference, run_engine
from convt._reference import reference_conv_transpose
from convt import ConvTranspose


@st.composite
def conv_cases(draw, max_ndim=3, max_size=6, max_channels=4):
    ndim = draw(st.integers(1, max_ndim))
    group = draw(st.integers(1, 3))
    cg = draw(st.integers(1, max_channels))
    mg = draw(st.integers(1, max_channels))
    batch = draw(st.integers(1, 2))
    axes = st.integers(1, max_size)
    inputs = draw(st.lists(axes, min_size=ndim, max_size=ndim))
    kernel = draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim))
    strides = draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim))
    dilations = draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim))
    output_padding = [draw(st.integers(0, max(s, d) - 1)) for s, d in zip(strides, dilations)]
    params = dict(strides=strides, dilations=dilations, group=group, output_padding=output_padding)
    mode = draw(st.sampled_from(["pads", "SAME_UPPER", "SAME_LOWER", "VALID", "output_shape", "none"]))
    if mode == "pads":
        params["pads"] = draw(st.lists(st.integers(0, 4), min_size=2 * ndim, max_size=2 * ndim))
    elif mode == "output_shape":
        params["output_shape"] = draw(st.lists(st.integers(1, 3 * max_size), min_size=ndim, max_size=ndim))
        params["auto_pad"] = draw(st.sampled_from(["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]))
    elif mode != "none":
        params["auto_pad"] = mode
    dtype = draw(st.sampled_from(DTYPES))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, cg * group, *inputs)).astype(dtype)
    w = rng.standard_normal((cg * group, mg, *kernel)).astype(dtype)
    b = rng.standard_normal(mg * group).astype(dtype) if draw(st.booleans()) else None
    try:
        ConvTranspose(**params).output_shape_for(x.shape, w.shape)
    except ValueError:
        assume(False)  # pads that leave an empty output
    return x, w, b, params


@pytest.mark.parametrize("engine", ENGINES)
@given(case=conv_cases())
def test_engine_matches_reference(engine, case):
    x, w, b, params = case
    assert_matches_reference(run_engine(engine, x, w, b, **params), x, w, b, **params)


@pytest.mark.parametrize("engine", ENGINES)
@given(case=conv_cases(max_ndim=2, max_size=7))
def test_engine_matches_reference_across_tiles(engine, case, small_tiles):
    # Tiles of a few positions and K chunks of a few rows: every tile and chunk edge is hit.
    x, w, b, params = case
    assert_matches_reference(run_engine(engine, x, w, b, **params), x, w, b, **params)


@given(case=conv_cases(max_ndim=4, max_size=4, max_channels=3))
def test_public_apply_matches_reference(case):
    # Whatever engine the dispatcher picks, for up to 4 spatial axes.
    x, w, b, params = case
    assert_matches_reference(ConvTranspose(**params).apply(x, w, b), x, w, b, **params)


EDGE_CASES = {
    "kernel_shorter_than_stride": dict(shape=(2, 3, 5, 4), kernel=(2, 1), strides=(3, 4)),
    "gcd_dilation_stride_2": dict(shape=(1, 4, 6, 5), kernel=(3, 3), strides=(2, 4), dilations=(2, 2)),
    "gcd_dilation_stride_3": dict(shape=(1, 4, 7), kernel=(4,), strides=(3,), dilations=(6,)),
    "negative_generated_pads": dict(shape=(1, 4, 3, 3), kernel=(3, 3), strides=(3, 2), output_shape=(14, 13)),
    "output_padding_selects_values": dict(shape=(1, 4, 5, 5), kernel=(3, 3), strides=(2, 2),
                                          pads=(1, 1, 2, 2), output_padding=(1, 1)),
    "same_lower_negative_total": dict(shape=(1, 4, 5, 5), kernel=(1, 1), strides=(3, 3),
                                      auto_pad="SAME_LOWER", output_padding=(2, 1)),
    "kernel_equals_stride": dict(shape=(2, 8, 6, 7), kernel=(2, 2), strides=(2, 2)),
    "kernel_equals_stride_padded": dict(shape=(1, 8, 6, 7), kernel=(2, 2), strides=(2, 2), pads=(1, 0, 1, 1)),
    "depthwise_groups": dict(shape=(1, 6, 5, 5), kernel=(4, 4), strides=(2, 2), pads=(1, 1, 1, 1), group=6, mg=1),
    "grouped_3d": dict(shape=(1, 6, 3, 4, 3), kernel=(3, 2, 3), strides=(2, 1, 2), group=3, output_padding=(1, 0, 1)),
    "one_d_audio_like": dict(shape=(1, 8, 17), kernel=(8,), strides=(4,), pads=(2, 2)),
    "five_d_spatial": dict(shape=(1, 2, 2, 3, 2, 2, 2), kernel=(2, 1, 2, 2, 1), strides=(2, 1, 1, 2, 3)),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_edge_case(name, engine, dtype):
    spec = dict(EDGE_CASES[name])
    shape, kernel = spec.pop("shape"), spec.pop("kernel")
    mg = spec.pop("mg", 3)
    rng = np.random.default_rng(sum(map(ord, name)))
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal((shape[1], mg, *kernel)).astype(dtype)
    b = rng.standard_normal(mg * spec.get("group", 1)).astype(dtype)
    assert_matches_reference(run_engine(engine, x, w, b, **spec), x, w, b, **spec)


@pytest.mark.parametrize("engine", [e for e in ENGINES if e.startswith("gemm-") and e != "gemm-blas"])
def test_float32_deep_reduction_is_summed_in_blocks(engine):
    # 256 channels x 4 taps = 1024 products per output. One float32 chain over all of
    # them errs by ~1e-6 of the output scale here (OpenBLAS: 5e-7); convt's kernels sum
    # blocks of 64 steps from zero and stay below 4e-7.  Fixed data: not flaky.
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 256, 12, 12)).astype(np.float32)
    w = (rng.standard_normal((256, 8, 4, 4)) / 32).astype(np.float32)
    params = dict(strides=(2, 2), pads=(1, 1, 1, 1))
    y = run_engine(engine, x, w, **params)
    expected = reference_conv_transpose(x, w, **params)
    assert np.abs(y - expected).max() / np.abs(expected).max() < 4e-7


@pytest.mark.parametrize("masked", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_single_phase_stride2_stores(masked, dtype):
    # k3s2: each stack holds one stride phase of the last axis, stored every
    # other output (AVX-512 masked stores where the CPU has them, else scalar)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 8, 5, 37)).astype(dtype)
    w = rng.standard_normal((8, 3, 3, 3)).astype(dtype)
    b = rng.standard_normal(6).astype(dtype)
    params = dict(strides=(2, 2), pads=(1, 1, 1, 1), output_padding=(1, 1), group=2)
    for engine in ENGINES:
        y = run_engine(engine, x, w, b, overrides=dict(masked_stores=masked), **params)
        assert_matches_reference(y, x, w, b, **params)


# the SIMD families' GEMM kernels (not the portable set's, nor BLAS)
@pytest.mark.parametrize("engine", [e for e in ENGINES if e.startswith("gemm-")
                                    and e not in ("gemm-blas", "gemm-portable")])
@given(case=conv_cases(max_ndim=2, max_size=20, max_channels=14))
def test_wide_layers_match_reference(engine, case):
    # Rows of 8-40 outputs and 6-14 channels per group reach the exact stacks
    # (k4s2-like), the residue pairs (k3s2-like) and multi-block tiles.
    x, w, b, params = case
    assert_matches_reference(run_engine(engine, x, w, b, **params), x, w, b, **params)
