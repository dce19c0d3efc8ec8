"""Conv weights streamed from w during the call (_dispatch.streams_weights,
streamed_weights in _gemm.pxi) instead of packed and remembered: results against
the float64 reference and bitwise against the packed path on every kernel set with
transposed kernels, float32 and float64, bias, groups, 1-D to 3-D, strides,
dilation, K chunks that split channels, threads, non-finite weights, the weight
cache left untouched, the layouts left to packing, and the route."""

import numpy as np
import pytest

from _conv_helpers import conv_operands, exact_conv
from _helpers import FAMILIES, assert_same_results_or_non_finite, relative_error, use_kernel_set
from convt import Conv, _dispatch, _engine, _weight_cache, explain


# the kernel sets with transposed kernels (gemm_t), whose stacks the route serves
TRANSPOSED = tuple(family.name for family in _dispatch.families()
                   if family.name in FAMILIES and family.f32.has(_dispatch.SET_TRANSPOSED))


@pytest.fixture(autouse=True)
def small_weights_stream(monkeypatch):
    """The route on small, fast layers: its size limits lifted."""
    monkeypatch.setattr(_dispatch, "STREAM_MIN_WEIGHT_BYTES", 0)
    monkeypatch.setattr(_dispatch, "STREAM_MIN_WEIGHT_BYTES_AVX512", 0)
    monkeypatch.setattr(_dispatch, "STREAM_MAX_POSITIONS", 1 << 20)


@pytest.fixture
def whole_tiles(monkeypatch):
    """Plans for one core, with one work item per image: small layers are otherwise
    cut into row tiles for the cores, which the route leaves to packing (each tile
    would read the weights again).  The route needs transposed kernels (gemm_t):
    on a machine whose kernel set has none (NEON, portable) these tests skip."""
    if not explain(Conv(), (1, 8, 4, 4), (8, 8, 3, 3)).decision.blocking.transposed:
        pytest.skip("this machine's kernel set has no transposed kernels")
    monkeypatch.setattr(_dispatch, "WORK_ITEMS_PER_CORE", 0)
    monkeypatch.setattr(_dispatch.os, "cpu_count", lambda: 1)
    _engine._execution.cache_clear()  # decisions hold the machine's cores
    yield
    _engine._execution.cache_clear()


def _streams(layer, x_shape, w_shape, dtype=np.float32):
    return explain(layer, x_shape, w_shape, dtype).streamed


def _packed(monkeypatch, params, x, w, b):
    """The same call with the weights packed (the route closed)."""
    with monkeypatch.context() as patch:
        patch.setattr(_dispatch, "STREAM_MIN_WEIGHT_BYTES", 1 << 62)
        patch.setattr(_dispatch, "STREAM_MIN_WEIGHT_BYTES_AVX512", 1 << 62)
        layer = Conv(**params)
        assert not _streams(layer, x.shape, w.shape, x.dtype)
        return layer.apply(x, w, b)


# (x shape, w shape, params): small maps of many channels, as the route serves
GEOMETRIES = {
    "3x3 on 7x7": ((1, 64, 7, 7), (48, 64, 3, 3), dict(pads=(1, 1, 1, 1))),
    "3x3 s2": ((1, 40, 9, 11), (32, 40, 3, 3), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    "1x1": ((1, 96, 5, 5), (64, 96, 1, 1), dict()),
    "groups": ((1, 64, 6, 6), (64, 16, 3, 3), dict(pads=(1, 1, 1, 1), group=4)),
    "dilation": ((1, 24, 8, 7), (32, 24, 3, 2), dict(dilations=(2, 3), pads=(2, 1, 2, 2))),
    "1-D k7": ((1, 48, 20), (40, 48, 7), dict(pads=(3, 3))),
    "2x3 kernel, pads": ((1, 30, 5, 9), (32, 30, 2, 3), dict(strides=(1, 2), pads=(1, 0, 0, 2))),
    "rows not whole vectors": ((1, 50, 6, 6), (40, 50, 3, 3), dict(pads=(0, 1, 2, 1))),
}


@pytest.mark.parametrize("family", TRANSPOSED)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_results_match_the_reference_and_the_packed_weights(monkeypatch, whole_tiles, family,
                                                            dtype, name):
    use_kernel_set(monkeypatch, family)
    x_shape, w_shape, params = GEOMETRIES[name]
    x, w, b = conv_operands(x_shape, w_shape, dtype)
    layer = Conv(**params)
    assert _streams(layer, x_shape, w_shape, dtype)
    for bias in (b, None):
        got = layer.apply(x, w, bias)
        assert relative_error(got, exact_conv(layer, x, w, bias)) < (2e-6 if dtype == np.float32
                                                                else 1e-14)
        np.testing.assert_array_equal(got, _packed(monkeypatch, params, x, w, bias))


@pytest.mark.parametrize("depth", [7, 16, 29])
def test_k_chunks_that_split_channels_read_their_part_of_each_row(monkeypatch, whole_tiles,
                                                                   depth):
    # chunks of depth // taps channels: each block copies its rows' runs from
    # k_begin on, which must follow the chunk, not the start of the row
    monkeypatch.setattr(_dispatch, "MAX_DEPTH", depth)
    x, w, b = conv_operands((1, 37, 6, 5), (32, 37, 3, 3), np.float32, seed=1)
    layer = Conv(pads=(1, 1, 1, 1))
    assert _streams(layer, x.shape, w.shape)
    got = layer.apply(x, w, b)
    assert relative_error(got, exact_conv(layer, x, w, b)) < 2e-6
    np.testing.assert_array_equal(got, _packed(monkeypatch, dict(pads=(1, 1, 1, 1)), x, w, b))


def test_results_are_bitwise_identical_for_every_thread_count(threads_for_any_work):
    # 1-D, 512 rows: one tile (a single grid row), its row groups the work items
    x, w, b = conv_operands((1, 32, 24), (512, 32, 3), np.float32, seed=2)
    first = Conv(pads=(1, 1), num_threads=1).apply(x, w, b)
    for threads in (2, 3, 5):
        layer = Conv(pads=(1, 1), num_threads=threads)
        report = explain(layer, x.shape, w.shape)
        if not report.decision.blocking.transposed:
            pytest.skip("this machine's kernel set has no transposed kernels")
        items = len(report.plan.items)
        assert report.streamed and items > 1 and report.threads == min(threads, items)
        np.testing.assert_array_equal(layer.apply(x, w, b), first)


def test_non_finite_weights_multiply_the_padding_as_the_definition_says(whole_tiles):
    x, w, b = conv_operands((1, 32, 5, 5), (32, 32, 3, 3), np.float64, seed=3)
    layer = Conv(pads=(1, 1, 1, 1))
    assert _streams(layer, x.shape, w.shape, np.float64)
    w[3, 2, 0, 0] = np.inf   # reads padding at the top-left outputs: 0 x Inf there
    w[5, 7, 1, 2] = np.nan
    x[0, 4, 2, 2] = np.inf
    assert_same_results_or_non_finite(layer.apply(x, w, b), exact_conv(layer, x, w, b))


def test_the_weight_cache_is_neither_read_nor_filled(whole_tiles):
    _weight_cache.clear()
    x, w, b = conv_operands((1, 64, 7, 7), (64, 64, 3, 3), np.float32, seed=4)
    layer = Conv(pads=(1, 1, 1, 1))
    first = layer.apply(x, w, b)
    assert _weight_cache.held_bytes() == 0
    w[10, 3, 1, 1] += 1.0    # edited in place: the next call reads the new value
    second = layer.apply(x, w, b)
    assert relative_error(second, exact_conv(layer, x, w, b)) < 2e-6
    assert not np.array_equal(first[0, 10], second[0, 10])
    np.testing.assert_array_equal(first[0, 11:], second[0, 11:])


def _call_streams(layer, x, w):
    """Whether the call on these very arrays streams (explain assumes C-contiguous w)."""
    y = np.empty(layer.output_shape_for(x.shape, w.shape), x.dtype)
    call = _engine.prepare(x, w, y, layer._geometry_for(x.shape, w.shape),
                           layer.get_params()["group"], transpose=False)
    return call.streamed


def test_output_channels_any_distance_apart(whole_tiles):
    # each output channel's weights contiguous, the channels reversed or with gaps
    x, w, b = conv_operands((1, 32, 6, 6), (48, 32, 3, 3), np.float32, seed=6)
    layer = Conv(pads=(1, 1, 1, 1))
    for view in (w[::-1], np.concatenate([w, w], axis=0)[::2]):
        assert _call_streams(layer, x, view)
        assert relative_error(layer.apply(x, view, b), exact_conv(layer, x, view, b)) < 2e-6


@pytest.mark.parametrize("layout", ["C order", "fortran w", "channels of w apart", "float16"])
def test_other_weights_are_packed(whole_tiles, layout):
    x, w, b = conv_operands((1, 32, 6, 6), (32, 32, 3, 3), np.float32, seed=5)
    layer = Conv(pads=(1, 1, 1, 1))
    if not explain(layer, x.shape, w.shape).decision.blocking.transposed:
        pytest.skip("this machine's kernel set has no transposed kernels")
    if layout == "fortran w":
        w = np.asfortranarray(w)
    elif layout == "channels of w apart":
        w = np.repeat(w, 2, axis=1)[:, ::2]
    elif layout == "float16":
        x, w, b = x.astype(np.float16), w.astype(np.float16), b.astype(np.float16)
    assert _call_streams(layer, x, w) == (layout == "C order")
    tolerance = 2e-3 if layout == "float16" else 2e-6
    assert relative_error(layer.apply(x, w, b), exact_conv(layer, x, w, b)) < tolerance


def test_route(monkeypatch):
    monkeypatch.setattr(_dispatch, "STREAM_MIN_WEIGHT_BYTES", 8 << 20)
    monkeypatch.setattr(_dispatch, "STREAM_MIN_WEIGHT_BYTES_AVX512", 2 << 20)
    monkeypatch.setattr(_dispatch, "STREAM_MAX_POSITIONS", 64)
    layer = Conv(pads=(1, 1, 1, 1))
    explanation = explain(layer, (1, 512, 7, 7), (512, 512, 3, 3))
    if not explanation.decision.blocking.transposed:
        pytest.skip("this machine's kernel set has no transposed kernels")
    assert _streams(layer, (1, 512, 7, 7), (512, 512, 3, 3))                 # 9 MiB
    assert _streams(layer, (1, 512, 7, 7), (512, 512, 3, 3), np.float64)
    assert _streams(Conv(strides=(2, 2), pads=(1, 1, 1, 1)), (1, 512, 14, 14),
                    (1024, 512, 3, 3))                                       # 7x7 outputs
    avx512 = explanation.decision.kernel_set == "avx512"
    assert _streams(layer, (1, 256, 7, 7), (512, 256, 3, 3)) == avx512       # 4.5 MiB
    assert not _streams(layer, (1, 128, 7, 7), (256, 128, 3, 3))             # 1.1 MiB
    assert not _streams(layer, (1, 512, 14, 14), (512, 512, 3, 3))           # 196 outputs
    assert not _streams(layer, (2, 512, 7, 7), (512, 512, 3, 3))             # two images
    assert not _streams(layer, (1, 512, 7, 7), (512, 512, 3, 3), np.float16)
    # 3-D: every plane is a tile of its own, which would read the weights again
    assert not _streams(Conv(pads=(1,) * 6), (1, 512, 3, 3, 3), (512, 512, 3, 3, 3))
    assert "read from w block by block" in str(explain(layer, (1, 512, 7, 7), (512, 512, 3, 3)))
