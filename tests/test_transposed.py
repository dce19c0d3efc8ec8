"""Transposed products (gemm_t): single-phase stacks whose rows are whole vectors
run with the weights as vectors and the positions broadcast, for each kernel set
with transposed kernels this machine runs.  Every output's arithmetic is the
standard orientation's, so results must be bitwise equal with the path on and
off, and within the rounding bound of the float64 reference."""

import numpy as np
import pytest

import convt
from convt import Conv, ConvTranspose, _dispatch, _plan

from _conv_helpers import assert_conv_matches_reference
from _helpers import assert_matches_reference

TRANSPOSED_SETS = [family.name for family in _dispatch.families()
                   if family.available and family.f32.has(_dispatch.SET_TRANSPOSED)]
pytestmark = pytest.mark.skipif(not TRANSPOSED_SETS,
                                reason="no kernel set with transposed kernels runs here")


@pytest.fixture(autouse=True)
def transposed_everywhere(monkeypatch):
    """Every set's transposed kernels on every stack the rule admits: sets that keep
    them for streamed weights alone (TRANSPOSED_FOR_STREAMED_WEIGHTS_ONLY, tested
    below) run them here on small layers too."""
    monkeypatch.setattr(_dispatch, "TRANSPOSED_FOR_STREAMED_WEIGHTS_ONLY", ())


# (operator, x shape, w shape, attributes): rows (output channels per group) in
# whole vectors of float32 and float64, positions not a multiple of MR, blocks of
# one and two vectors (24 rows), groups, strides, dilations, 1-D to 3-D.
CASES = {
    "conv3x3": (Conv, (1, 5, 9, 13), (16, 5, 3, 3), dict(pads=(1, 1, 1, 1))),
    "conv3x3_s2_24": (Conv, (2, 6, 11, 10), (24, 6, 3, 3), dict(strides=(2, 2),
                                                              pads=(1, 0, 1, 1))),
    "conv_grouped": (Conv, (1, 8, 7, 9), (32, 4, 3, 3), dict(group=2, pads=(1, 1, 1, 1))),
    "conv_dilated_1d": (Conv, (2, 7, 41), (40, 7, 5), dict(dilations=(2,), pads=(3, 2))),
    "conv_3d": (Conv, (1, 3, 5, 6, 7), (16, 3, 3, 3, 3), dict(pads=(1,) * 6)),
    "convT_s1": (ConvTranspose, (1, 6, 8, 11), (6, 16, 3, 3), dict(pads=(1, 1, 1, 1))),
    "convT_s1_lead": (ConvTranspose, (1, 4, 5, 3, 9), (4, 16, 1, 3, 3),
                      dict(strides=(2, 1, 1), pads=(0, 1, 1, 0, 1, 1))),
}


def _operands(name, dtype):
    op, x_shape, w_shape, params = CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    out_channels = w_shape[0] if op is Conv else w_shape[1] * params.get("group", 1)
    b = rng.standard_normal(out_channels).astype(dtype)
    return op, x, w, b, params


def _transposed_stacks(layer, x, w):
    plan = convt.explain(layer, x.shape, w.shape, x.dtype).plan
    return int(plan.stacks["transposed"].sum())


@pytest.mark.parametrize("kernel_set", TRANSPOSED_SETS)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_transposed_products_equal_the_standard_orientation(name, dtype, kernel_set,
                                                             monkeypatch):
    monkeypatch.setenv(_dispatch.KERNEL_SET_VARIABLE, kernel_set)
    op, x, w, b, params = _operands(name, dtype)
    monkeypatch.setattr(_dispatch, "TRANSPOSED_PRODUCTS", 1)
    layer = op(**params)
    assert _transposed_stacks(layer, x, w) > 0
    y = layer.apply(x, w, b)
    if op is Conv:
        assert_conv_matches_reference(y, x, w, b, **params)
    else:
        assert_matches_reference(y, x, w, b, **params)
    assert np.array_equal(op(num_threads=2, **params).apply(x, w, b), y)
    monkeypatch.setattr(_dispatch, "TRANSPOSED_PRODUCTS", 0)
    assert _transposed_stacks(layer, x, w) == 0
    assert np.array_equal(op(**params).apply(x, w, b), y)


@pytest.mark.parametrize("kernel_set", TRANSPOSED_SETS)
def test_stacks_off_the_rule_keep_the_standard_orientation(kernel_set, monkeypatch):
    """Rows not in whole vectors or several phases (k4s2; k2s2, read in place)."""
    monkeypatch.setenv(_dispatch.KERNEL_SET_VARIABLE, kernel_set)
    monkeypatch.setattr(_dispatch, "TRANSPOSED_PRODUCTS", 1)
    x = np.ones((1, 8, 12, 12), np.float32)
    assert _transposed_stacks(Conv(pads=(1,) * 4), x, np.ones((20, 8, 3, 3), np.float32)) == 0
    k4s2 = ConvTranspose(strides=(2, 2), pads=(1,) * 4)
    assert _transposed_stacks(k4s2, x, np.ones((8, 16, 4, 4), np.float32)) == 0
    k2s2 = ConvTranspose(strides=(2, 2))
    w = np.ones((8, 16, 2, 2), np.float32)
    assert _transposed_stacks(k2s2, x, w) == 0
    assert convt.explain(k2s2, x, w).plan.stacks["identity"].all()


@pytest.mark.parametrize("kernel_set", TRANSPOSED_SETS)
def test_pointwise_layers_read_small_planes_in_place(kernel_set, monkeypatch):
    """A 1x1 Conv reads x in place (standard orientation) while its channel planes
    are closer than IN_PLACE_MAX_CHANNEL_BYTES (or at any distance where the
    kernels pack no B panels) and hold at least
    CONV_IN_PLACE_MIN_POSITIONS positions, else copies its tiles and, rows in whole
    vectors, runs gemm_t; rows that gemm_t cannot take keep reading in place."""
    monkeypatch.setenv(_dispatch.KERNEL_SET_VARIABLE, kernel_set)
    monkeypatch.setattr(_dispatch, "TRANSPOSED_PRODUCTS", 1)
    rng = np.random.default_rng(3)
    for rows, side, in_place in ((32, 20, True), (32, 32, False), (32, 12, False),
                                 (12, 12, True)):
        w = rng.standard_normal((rows, 8, 1, 1)).astype(np.float32)
        x = rng.standard_normal((1, 8, side, side)).astype(np.float32)
        assert side * side * 4 < _plan.IN_PLACE_MAX_CHANNEL_BYTES or not in_place
        assert (side * side >= _plan.CONV_IN_PLACE_MIN_POSITIONS or rows % 8) or not in_place
        # kernels that pack no B panels read a 1x1 Conv's large planes in place
        # at any distance (see test_input_in_place.py)
        if not convt.explain(Conv(), x, w).decision.blocking.packs_b:
            in_place = in_place or side * side >= _plan.CONV_IN_PLACE_MIN_POSITIONS
        assert _transposed_stacks(Conv(), x, w) == (0 if in_place else 1)
        assert convt.explain(Conv(), x, w).plan.stacks["identity"].all() == in_place
        assert_conv_matches_reference(Conv().apply(x, w), x, w)


@pytest.mark.parametrize("kernel_set", TRANSPOSED_SETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_residue_pairs_keep_one_row_blocking(kernel_set, dtype, monkeypatch):
    """A stride-2 k3 layer's two residues run in one item and share its row
    groups: one may not cut its rows into gemm_t's blocks while the other keeps
    MR-row blocks (the odd outputs of the second row group came out wrong)."""
    monkeypatch.setenv(_dispatch.KERNEL_SET_VARIABLE, kernel_set)
    monkeypatch.setattr(_dispatch.os, "cpu_count", lambda: 2)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 16, 4500 if dtype == np.float32 else 2600)).astype(dtype)
    w = rng.standard_normal((16, 64, 3)).astype(dtype)
    layer = ConvTranspose(strides=(2,))
    stacks = convt.explain(layer, x, w).plan.stacks
    paired = (stacks["partner"] >= 0) | (stacks["items"] == 0)
    assert paired.any() and stacks["row_groups"][paired].max() > 1
    assert not stacks["transposed"][paired].any()
    assert_matches_reference(layer.apply(x, w), x, w, strides=(2,))


@pytest.mark.parametrize("kernel_set", TRANSPOSED_SETS)
def test_some_sets_run_transposed_kernels_only_where_weights_stream(kernel_set, monkeypatch):
    """Sets listed in TRANSPOSED_FOR_STREAMED_WEIGHTS_ONLY keep the standard
    orientation on a 3x3 Conv over 56x56 and run gemm_t on 512 -> 512 over 7x7 (9
    MiB of weights, 49 outputs: streamed); the other sets run gemm_t on both."""
    monkeypatch.setenv(_dispatch.KERNEL_SET_VARIABLE, kernel_set)
    monkeypatch.setattr(_dispatch, "TRANSPOSED_FOR_STREAMED_WEIGHTS_ONLY", (kernel_set,))
    large_map = (Conv(pads=(1,) * 4), (1, 64, 56, 56), (64, 64, 3, 3))
    weight_bound = (Conv(pads=(1,) * 4), (1, 512, 7, 7), (512, 512, 3, 3))
    assert not _dispatch.weights_may_stream(
        _engine_problem(*large_map), np.dtype(np.float32))
    assert _dispatch.weights_may_stream(_engine_problem(*weight_bound), np.dtype(np.float32))
    for (layer, x_shape, w_shape), expected in ((large_map, 0), (weight_bound, 1)):
        explanation = convt.explain(layer, x_shape, w_shape, np.float32)
        assert int(explanation.plan.stacks["transposed"].sum()) == expected
        assert explanation.streamed == bool(expected)
    monkeypatch.setattr(_dispatch, "TRANSPOSED_FOR_STREAMED_WEIGHTS_ONLY", ())
    layer, x_shape, w_shape = large_map
    assert int(convt.explain(layer, x_shape, w_shape, np.float32).plan.stacks["transposed"].sum())


def _engine_problem(layer, x_shape, w_shape):
    return convt.explain(layer, x_shape, w_shape, np.float32).problem


@pytest.mark.parametrize("kernel_set", TRANSPOSED_SETS)
def test_small_maps_run_transposed_kernels_on_every_set(kernel_set, monkeypatch):
    """Outputs of at most TRANSPOSED_MAX_POSITIONS positions per image run gemm_t
    whatever the set, packed weights too (1x1 160 -> 960 over 7x7: 600 KiB, not
    streamed); 14x14 keeps the standard orientation where the set is listed; the
    results are the reference's."""
    monkeypatch.setenv(_dispatch.KERNEL_SET_VARIABLE, kernel_set)
    monkeypatch.setattr(_dispatch, "TRANSPOSED_FOR_STREAMED_WEIGHTS_ONLY", (kernel_set,))
    rng = np.random.default_rng(3)
    for side, expected in ((7, 1), (12, 1), (14, 0)):
        assert (side * side <= _dispatch.TRANSPOSED_MAX_POSITIONS) == bool(expected)
        x = rng.standard_normal((2, 160, side, side)).astype(np.float32)
        w = rng.standard_normal((96, 160, 1, 1)).astype(np.float32)
        explanation = convt.explain(Conv(), x, w)
        assert not explanation.streamed
        assert int(explanation.plan.stacks["transposed"].sum()) == expected, side
        assert_conv_matches_reference(Conv().apply(x, w), x, w)



@pytest.mark.parametrize("kernel_set", TRANSPOSED_SETS)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_whole_row_tiles_store_like_the_standard_orientation(kernel_set, dtype, monkeypatch):
    """A transposed stack's tile of whole grid rows lying end to end in y (a 1x1 or
    3x3 Conv over 7x7) is stored with one transpose of all its positions, where
    other tiles go row by row: the same moves and roundings as the standard
    orientation's stores, so bitwise equal to them, with and without a bias, and
    the reference's; on 1 and 3 threads (tiles split into row groups)."""
    monkeypatch.setenv(_dispatch.KERNEL_SET_VARIABLE, kernel_set)
    rng = np.random.default_rng(11)
    for x_shape, w_shape, params in (((1, 40, 7, 7), (48, 40, 1, 1), {}),
                                     ((2, 24, 5, 9), (32, 24, 3, 3), dict(pads=(1,) * 4)),
                                     ((1, 16, 7, 7), (64, 16, 3, 3), dict(pads=(0, 1, 2, 1))),
                                     ((1, 8, 2, 3), (16, 8, 1, 1), {})):
        x = rng.standard_normal(x_shape).astype(dtype)
        w = rng.standard_normal(w_shape).astype(dtype)
        for b in (None, rng.standard_normal(w_shape[0]).astype(dtype)):
            monkeypatch.setattr(_dispatch, "TRANSPOSED_PRODUCTS", 1)
            assert _transposed_stacks(Conv(**params), x, w) > 0, x_shape
            y = Conv(**params).apply(x, w, b)
            assert_conv_matches_reference(y, x, w, b, **params)
            assert np.array_equal(Conv(num_threads=3, **params).apply(x, w, b), y)
            monkeypatch.setattr(_dispatch, "TRANSPOSED_PRODUCTS", 0)
            assert _transposed_stacks(Conv(**params), x, w) == 0
            assert np.array_equal(Conv(**params).apply(x, w, b), y), x_shape
