"""Depthwise planes (convt/src/plane.h, convt/_planes.py): 2-D Conv with one input
channel per group, a whole input plane at a time.  Results against the float64
reference and, bit for bit, against the stencil blocks (the same arithmetic) on
every kernel set; non-finite weights and inputs; threads; strided operands and
out=; which calls take the route.  The same with channels side by side, against
the planes bit for bit."""

import platform

import numpy as np
import pytest

from _conv_helpers import assert_conv_matches_reference, run_conv_engine
from _helpers import FAMILIES
from convt import Conv, _dispatch, explain
from convt._reference import reference_conv

# (x shape, w shape, params): one input channel per group, 2-D
CASES = {
    "depthwise_7x7": ((1, 40, 7, 7), (40, 1, 3, 3), dict(group=40, pads=(1, 1, 1, 1))),
    "depthwise_14x14_batch": ((3, 9, 14, 14), (9, 1, 3, 3), dict(group=9, pads=(1, 1, 1, 1))),
    "k5_wide_rows": ((1, 5, 11, 45), (5, 1, 5, 5), dict(group=5, pads=(2, 2, 2, 2))),
    "k7_wide_rows": ((1, 3, 12, 37), (3, 1, 7, 7), dict(group=3, pads=(3, 3, 3, 3))),
    "k5_stride_2_wide_rows": ((2, 4, 23, 41), (4, 1, 5, 5),
                              dict(group=4, strides=(2, 2), pads=(2, 2, 2, 2))),
    "k3_stride_2_rows_in_blocks_and_a_bit": ((1, 3, 19, 70), (3, 1, 3, 3),
                                             dict(group=3, strides=(2, 2), pads=(1, 1, 1, 1))),
    "narrow_rows_in_blocks_of_8_and_a_bit": ((1, 3, 19, 6), (3, 1, 3, 3),
                                             dict(group=3, pads=(1, 1, 1, 1))),
    "rows_four_wide": ((1, 2, 21, 4), (2, 1, 3, 3), dict(group=2, pads=(1, 1, 1, 1))),
    "rows_four_wide_k5_stride_2": ((1, 2, 40, 7), (2, 1, 5, 5),
                                   dict(group=2, strides=(2, 2), pads=(2, 2, 2, 2))),
    "narrow_rows_stride_2": ((1, 3, 33, 12), (3, 1, 5, 5),
                             dict(group=3, strides=(2, 2), pads=(2, 2, 2, 2))),
    "rows_of_one_block_and_a_bit": ((1, 3, 6, 17), (3, 1, 3, 3), dict(group=3, pads=(1, 1, 1, 1))),
    "stride_2": ((2, 6, 28, 28), (6, 1, 3, 3), dict(group=6, strides=(2, 2), pads=(1, 1, 1, 1))),
    "stride_2_even_left_pad_odd_width": ((1, 3, 15, 21), (3, 1, 3, 4),
                                         dict(group=3, strides=(2, 2), pads=(2, 2, 1, 0))),
    "stride_3_1_uneven_pads": ((1, 4, 19, 23), (4, 1, 3, 5),
                               dict(group=4, strides=(3, 1), pads=(0, 2, 2, 1))),
    "stride_1_3": ((1, 4, 10, 40), (4, 1, 2, 4), dict(group=4, strides=(1, 3), pads=(1, 0, 0, 3))),
    "dilated_strided": ((1, 3, 30, 37), (3, 1, 5, 3),
                        dict(group=3, strides=(2, 2), dilations=(2, 3), pads=(4, 3, 4, 3))),
    "multiplier_3": ((2, 4, 9, 12), (12, 1, 3, 3), dict(group=4, pads=(1, 1, 1, 1))),
    "multiplier_4": ((1, 8, 9, 12), (32, 1, 3, 3), dict(group=8, pads=(1, 1, 1, 1))),
    "single_channel_batch_8": ((8, 1, 13, 9), (1, 1, 7, 7), dict(pads=(3, 3, 3, 3))),
    "kernel_1x1": ((1, 6, 5, 8), (6, 1, 1, 1), dict(group=6)),
    "pads_beyond_the_kernel": ((1, 2, 4, 5), (2, 1, 3, 3), dict(group=2, pads=(4, 5, 3, 6))),
    "kernel_wider_than_input": ((1, 2, 3, 4), (2, 1, 5, 7), dict(group=2, pads=(2, 3, 2, 3))),
    "plane_of_one": ((2, 3, 1, 1), (3, 1, 1, 1), dict(group=3)),
    "one_row": ((1, 3, 1, 30), (3, 1, 1, 5), dict(group=3, pads=(0, 2, 0, 2))),
    "one_column": ((1, 3, 30, 1), (3, 1, 5, 1), dict(group=3, pads=(2, 0, 2, 0))),
    "valid_taps_32": ((1, 2, 3, 40), (2, 1, 1, 32), dict(group=2)),
}


@pytest.fixture(autouse=True)
def small_calls_run_planes(monkeypatch, request):
    """Calls of a few planes take the route too (a test of the rule itself is marked
    keep_thresholds)."""
    if "keep_thresholds" not in request.keywords:
        monkeypatch.setattr(_dispatch, "PLANE_MIN_PLANES", 1)


def _data(name, dtype, seed=0):
    x_shape, w_shape, params = CASES[name]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    b = rng.standard_normal(w_shape[0]).astype(dtype)
    return x, w, b, params


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_planes_match_the_reference_on_every_kernel_set(name, dtype, family):
    x, w, b, params = _data(name, dtype)
    layer = Conv(**params)
    assert explain(layer, x.shape, w.shape, dtype).plane is not None
    for bias in (b, None):
        y = layer._apply(x, w, bias, backend=family)
        assert_conv_matches_reference(y, x, w, bias, **params)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(name for name, (_, _, params) in CASES.items()
                                        if params.get("strides", (1, 1))[1] == 1))
def test_planes_are_the_stencil_blocks_bit_for_bit(name, dtype, family):
    """Where stencil blocks serve a call (unit column stride), both sum each output
    from zero over kernel rows then taps with the set's multiply-add (fused in fused
    sets; the portable set's a multiply and an add on x86-64, which has no FMA in its
    baseline, and whatever the compiler contracts elsewhere)."""
    fused = _dispatch.family_named(family).kernel_set(np.dtype(dtype)).has(_dispatch.SET_FUSED)
    if not fused and platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("the portable stencil's multiply-adds are the compiler's choice here")
    x, w, b, params = _data(name, dtype, seed=1)
    y = Conv(**params)._apply(x, w, b, backend=family)
    stencil = run_conv_engine(f"direct-{family}", x, w, b, **params)
    np.testing.assert_array_equal(y, stencil)


def test_the_default_set_runs_the_planes_it_reports():
    x, w, b, params = _data("depthwise_14x14_batch", np.float32)
    layer = Conv(**params)
    explained = explain(layer, x.shape, w.shape, np.float32)
    plane = explained.plane
    # the preferred set's planes, or AVX2's where the AVX-512 ones gain nothing
    preferred = _dispatch.preferred_kernel_set()
    assert plane.family == _dispatch.plane_family(explained.problem, preferred)
    assert plane.family in (preferred, "avx2")
    assert "depthwise planes" in str(explain(layer, x.shape, w.shape, np.float32))
    np.testing.assert_array_equal(layer.apply(x, w, b), layer._apply(x, w, b,
                                                                       backend=plane.family))


def _same_non_finite_outputs(x, w, b, params):
    """Conv's outputs and the reference's have NaN and Inf at the same places; returns
    both."""
    with np.errstate(invalid="ignore"):
        expected = reference_conv(x, w, b, **params)
    y = Conv(**params).apply(x, w, b)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(expected))
    np.testing.assert_array_equal(np.isinf(y), np.isinf(expected))
    return y, expected


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_non_finite_weights_multiply_the_padding(dtype):
    """The text's zeros times Inf are NaN, at every output whose taps reach padding."""
    x, w, b, params = _data("depthwise_7x7", dtype)
    w[0, 0, 0, 0] = np.inf
    w[1, 0, 1, 1] = -np.inf
    w[2, 0, 2, 2] = np.nan
    y, expected = _same_non_finite_outputs(x, w, b, params)
    finite = np.isfinite(expected)
    np.testing.assert_allclose(y[finite], expected[finite],
                               rtol=1e-5 if dtype == np.float32 else 1e-12,
                               atol=1e-5 if dtype == np.float32 else 1e-12)


def test_non_finite_inputs_spoil_exactly_the_outputs_reading_them():
    x, w, b, params = _data("stride_2", np.float32)
    x[0, 1, 5, 6] = np.nan
    x[1, 3, 0, 0] = np.inf
    _same_non_finite_outputs(x, w, b, params)


@pytest.mark.parametrize("name", ["depthwise_14x14_batch", "dilated_strided", "multiplier_3"])
def test_bitwise_identical_across_thread_counts(name):
    x, w, b, params = _data(name, np.float32)
    results = [Conv(num_threads=threads, **params).apply(x, w, b) for threads in (1, 2, 3)]
    for y in results[1:]:
        np.testing.assert_array_equal(y, results[0])


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_strided_planes_are_read_and_written_in_place(dtype, family):
    """The driver itself on planes whose rows lie apart in larger arrays (x and y),
    where a block past a row's end cannot spill onto the next row."""
    from convt._compiled import load

    for name in ("rows_of_one_block_and_a_bit", "stride_2", "multiplier_3", "k5_wide_rows"):
        x, w, b, params = _data(name, dtype)
        expected = Conv(**params)._apply(x, w, b, backend=family)
        wide = np.zeros(x.shape[:2] + (x.shape[2] + 3, x.shape[3] + 5), dtype)
        wide[:, :, 1:-2, 2:-3] = x
        big = np.full(expected.shape[:3] + (expected.shape[3] + 7,), -7.0, dtype)
        pads = params.get("pads", (0, 0, 0, 0))
        load().plane_conv(family, wide[:, :, 1:-2, 2:-3], w, b, big[..., 3:-4], 1,
                          pads[:2], params.get("strides", (1, 1)),
                          params.get("dilations", (1, 1)), 2)
        np.testing.assert_array_equal(big[..., 3:-4], expected)
        np.testing.assert_array_equal(big[..., :3], -7.0)
        np.testing.assert_array_equal(big[..., -4:], -7.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_out_and_repeated_calls(dtype):
    x, w, b, params = _data("rows_of_one_block_and_a_bit", dtype)
    layer = Conv(**params)
    y = layer.apply(x, w, b)
    out = np.full_like(y, np.nan)
    assert layer.apply(x, w, b, out=out) is out
    np.testing.assert_array_equal(out, y)
    np.testing.assert_array_equal(layer.apply(x, w, b), y)
    w_view = np.ascontiguousarray(w[::-1])[::-1]  # kernels reversed in memory
    np.testing.assert_array_equal(layer.apply(x, w_view, b), y)


def _guarded_floats(count):
    """A float32 array of ``count`` elements ending exactly where an inaccessible page
    begins (Linux), or None."""
    ctypes = pytest.importorskip("ctypes")
    mmap = pytest.importorskip("mmap")
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        mprotect = libc.mprotect
    except (OSError, AttributeError):
        return None
    page = mmap.PAGESIZE
    pages = -(-count * 4 // page) + 1
    backing = mmap.mmap(-1, (pages + 1) * page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(backing))
    if mprotect(ctypes.c_void_p(base + pages * page), ctypes.c_size_t(page), 0) != 0:
        return None
    raw = np.frombuffer(backing, dtype=np.float32, count=pages * page // 4)
    return raw[raw.size - count:], backing


def test_row_copies_never_read_past_the_plane():
    """A row's copy may read whole vectors past its row, never past the input: here
    the input ends where a page that faults on access begins."""
    shape = (1, 2, 9, 7)
    guarded = _guarded_floats(int(np.prod(shape)))
    if guarded is None:
        pytest.skip("no mprotect here")
    flat, backing = guarded
    x = flat.reshape(shape)
    x[:] = np.random.default_rng(0).standard_normal(shape)
    w = np.random.default_rng(1).standard_normal((2, 1, 3, 3)).astype(np.float32)
    params = dict(group=2, pads=(1, 1, 1, 1))
    for family in FAMILIES:
        y = Conv(**params)._apply(x, w, backend=family)
        assert_conv_matches_reference(y, x.copy(), w, **params)


@pytest.mark.keep_thresholds
def test_which_calls_take_the_route():
    def plane(x_shape, w_shape, dtype=np.float32, **params):
        return explain(Conv(**params), x_shape, w_shape, dtype).plane is not None

    least = _dispatch.work_items_target()
    assert plane((1, least, 16, 16), (least, 1, 3, 3), group=least, pads=(1, 1, 1, 1))
    assert plane((1, least, 16, 16), (least, 1, 3, 3), np.float64, group=least)
    assert plane((least, 1, 16, 16), (1, 1, 3, 3))                  # single-channel images
    assert plane((least, 1, 16, 16), (3, 1, 3, 3))                  # one channel, 3 filters
    assert not plane((1, 1, 16, 16), (3, 1, 3, 3))                  # one plane: 1 work item
    assert not plane((1, 3, 64, 64), (3, 1, 5, 5), group=3)         # RGB: 3 planes
    assert not plane((least, 1, 64, 64), (64, 1, 9, 9))             # 64 filters: a GEMM
    many = 2 * least
    assert not plane((1, many, 16, 16), (many, 1, 3, 3), np.float16, group=many)  # converted
    assert not plane((1, many, 16, 16), (many // 2, 2, 3, 3), group=many // 2)  # 2 inputs
    assert not plane((1, many, 64), (many, 1, 3), group=many)       # 1-D
    assert not plane((1, many, 6, 6, 6), (many, 1, 3, 3, 3), group=many)  # 3-D
    assert not plane((1, 16, 16, many), (many, 1, 3, 3), group=many, data_format="NXC")
    assert not plane((1, many, 3, 40), (many, 1, 1, 33), group=many)  # > PLANE_MAX_TAPS
    side = 512  # 512 x 512 float32 planes: a buffer beyond PLANE_MAX_BYTES
    big = explain(Conv(group=3), (least, 3, side, side), (3, 1, 5, 5))
    assert _dispatch.plane_bytes(big.problem) > _dispatch.PLANE_MAX_BYTES
    assert big.plane is None and big.decision.stencil_rows


@pytest.mark.parametrize("filter_format", ["OIX", "XIO", "IOX"])
def test_filter_layouts_are_read_through_their_strides(filter_format):
    """XIO and IOX weights reach the planes as strided views of the OIX layout."""
    x, w, b, params = _data("multiplier_3", np.float32)
    layer = Conv(**params)
    expected = layer.apply(x, w, b)
    ws = {"OIX": w, "XIO": np.moveaxis(w, (0, 1), (-1, -2)).copy(),
          "IOX": np.swapaxes(w, 0, 1).copy()}[filter_format]
    layer = Conv(filter_format=filter_format, **params)
    assert explain(layer, x.shape, ws.shape, np.float32).plane is not None
    np.testing.assert_array_equal(layer.apply(x, ws, b), expected)


def test_the_wider_planes_serve_where_they_compute_no_more_columns(monkeypatch):
    """On a CPU with both, 512-bit planes serve calls whose rows they cover in as
    few columns as 256-bit ones, with unit row stride and dilation and kernel rows
    of PLANE_WIDE_MIN_TAPS taps or more (or rows of one 512-bit vector); the AVX2
    planes serve the rest; a forced set is kept."""
    if not {"avx512", "avx2"} <= set(_dispatch.available_kernel_sets()):
        pytest.skip("needs the AVX-512 and AVX2 sets")
    monkeypatch.delenv(_dispatch.KERNEL_SET_VARIABLE, raising=False)

    def family(side, kernel, dtype=np.float32, **params):
        channels = 2 * _dispatch.work_items_target()
        params.setdefault("pads", (kernel // 2,) * 4)
        return explain(Conv(group=channels, **params), (1, channels, side, side),
                       (channels, 1, kernel, kernel), dtype).plane.family

    assert family(28, 5) == family(56, 7) == family(14, 7) == "avx512"  # 32 / 64 / 16 columns
    assert family(28, 5, np.float64) == "avx512"  # 32 doubles either way
    assert family(14, 3) == "avx512"              # rows of one vector: blocks of 8 rows
    assert family(7, 3, np.float64) == "avx512"   # 8 doubles: one 512-bit vector
    assert family(28, 3) == family(56, 3) == "avx2"   # 3 taps over rows of 2 vectors
    assert family(7, 5) == family(112, 5) == "avx2"   # 16 > 8, 128 > 112 columns
    assert family(28, 5, strides=(2, 2)) == "avx2"    # row stride 2
    assert family(28, 5, dilations=(2, 2), pads=(4,) * 4) == "avx2"  # row dilation 2
    problem = explain(Conv(group=64, pads=(1, 1, 1, 1)), (1, 64, 7, 7), (64, 1, 3, 3)).problem
    assert _dispatch.plane_family(problem, "avx512", forced="avx512") == "avx512"
    monkeypatch.setenv(_dispatch.KERNEL_SET_VARIABLE, "avx512")
    assert _dispatch.plane_family(problem, "avx512") == "avx512"


# Channels side by side (plane.h's plane_channels entries, convt._planes): the
# same sums as the planes, from a [row][column][channel] buffer.  Every case of one
# input and one output channel per group, forced onto that layout, against the
# planes bit for bit; more channels than one block, the last one partial.
CHANNEL_CASES = dict(
    {name: case for name, case in CASES.items() if case[1][0] == case[0][1]},
    many_channels_stride_2=((2, 150, 14, 14), (150, 1, 3, 3),
                            dict(group=150, strides=(2, 2), pads=(1, 1, 1, 1))),
    many_channels_k5_stride_2=((1, 97, 15, 13), (97, 1, 5, 5),
                               dict(group=97, strides=(2, 2), pads=(2, 1, 2, 2))),
)


def _channels_route(monkeypatch, on):
    """Every call of one channel per group takes channels side by side (``on``), or
    none does."""
    monkeypatch.setattr(_dispatch, "PLANE_CHANNELS_MAX_WIDTH", 1 << 30 if on else 0)
    monkeypatch.setattr(_dispatch, "PLANE_CHANNELS_MIN_STRIDE", 1)
    monkeypatch.setattr(_dispatch, "PLANE_CHANNELS_MIN_CHANNELS", 1)


def _channel_data(name, dtype, seed=0):
    x_shape, w_shape, params = CHANNEL_CASES[name]
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(x_shape).astype(dtype),
            rng.standard_normal(w_shape).astype(dtype),
            rng.standard_normal(w_shape[0]).astype(dtype), params)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CHANNEL_CASES))
def test_channels_side_by_side_are_the_planes_bit_for_bit(name, dtype, family, monkeypatch):
    x, w, b, params = _channel_data(name, dtype)
    layer = Conv(**params)
    _channels_route(monkeypatch, False)
    assert explain(layer, x.shape, w.shape, dtype).plane.channel_block == 0
    planes = [layer._apply(x, w, bias, backend=family) for bias in (b, None)]
    _channels_route(monkeypatch, True)
    plane = explain(layer, x.shape, w.shape, dtype).plane
    assert plane.channel_block % 32 == 0 and plane.channel_block >= 32
    for bias, expected in zip((b, None), planes):
        y = layer._apply(x, w, bias, backend=family)
        np.testing.assert_array_equal(y, expected)
        assert_conv_matches_reference(y, x, w, bias, **params)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_channels_side_by_side_multiply_the_padding(dtype, monkeypatch):
    _channels_route(monkeypatch, True)
    x, w, b, params = _channel_data("many_channels_stride_2", dtype)
    w[0, 0, 0, 0] = np.inf
    w[70, 0, 1, 1] = -np.inf
    w[149, 0, 2, 2] = np.nan
    x[1, 100, 3, 4] = np.nan
    y, expected = _same_non_finite_outputs(x, w, b, params)
    finite = np.isfinite(expected)
    assert finite.sum() > y.size // 2
    np.testing.assert_allclose(y[finite], expected[finite],
                               rtol=1e-5 if dtype == np.float32 else 1e-12,
                               atol=1e-5 if dtype == np.float32 else 1e-12)


def test_channels_side_by_side_across_thread_counts(monkeypatch):
    _channels_route(monkeypatch, True)
    x, w, b, params = _channel_data("many_channels_k5_stride_2", np.float32)
    results = [Conv(num_threads=threads, **params).apply(x, w, b) for threads in (1, 2, 3)]
    for y in results[1:]:
        np.testing.assert_array_equal(y, results[0])


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_channels_side_by_side_read_and_write_strided_planes(dtype, family, monkeypatch):
    """The driver on planes whose rows lie apart in larger arrays (x and y): input
    rows transposed one at a time, sums stored a row at a time, nothing around
    them written; and a workspace that is too small refused."""
    from convt._compiled import load

    _channels_route(monkeypatch, True)
    for name in ("many_channels_stride_2", "dilated_strided", "pads_beyond_the_kernel"):
        x, w, b, params = _channel_data(name, dtype)
        layer = Conv(**params)
        expected = layer._apply(x, w, b, backend=family)
        block = explain(layer, x.shape, w.shape, dtype).plane.channel_block
        wide = np.zeros(x.shape[:2] + (x.shape[2] + 3, x.shape[3] + 5), dtype)
        wide[:, :, 1:-2, 2:-3] = x
        big = np.full(expected.shape[:3] + (expected.shape[3] + 7,), -7.0, dtype)
        pads = params.get("pads", (0, 0, 0, 0))
        strides, dilations = params.get("strides", (1, 1)), params.get("dilations", (1, 1))
        size = load().plane_channels_bytes(x.shape[2:], expected.shape[2:], w.shape[2:],
                                           strides, dilations, block, x.itemsize)
        workspace = np.empty(2 * size + 64, np.uint8)
        load().plane_conv_channels(family, wide[:, :, 1:-2, 2:-3], w, b, big[..., 3:-4], block,
                                   pads[:2], strides, dilations, workspace, 2)
        np.testing.assert_array_equal(big[..., 3:-4], expected)
        np.testing.assert_array_equal(big[..., :3], -7.0)
        np.testing.assert_array_equal(big[..., -4:], -7.0)
        with pytest.raises(ValueError, match="workspace too small"):
            load().plane_conv_channels(family, x, w, b, np.empty_like(expected), block,
                                       pads[:2], strides, dilations, workspace[:size], 2)


@pytest.mark.keep_thresholds
def test_which_plane_calls_put_channels_side_by_side(monkeypatch):
    """Strided rows of at most PLANE_CHANNELS_MAX_WIDTH outputs, one input and one
    output channel per group, at least PLANE_CHANNELS_MIN_CHANNELS of them; on the
    best set this CPU has, whatever set the GEMM engine would take."""
    monkeypatch.delenv(_dispatch.KERNEL_SET_VARIABLE, raising=False)
    preferred = _dispatch.preferred_kernel_set()
    chosen = explain(Conv(group=576, strides=(2, 2), pads=(1, 1, 1, 1)), (1, 576, 14, 14),
                     (576, 1, 3, 3), np.float32).plane.family
    assert chosen == ("portable" if preferred == "blas" else preferred)
    def block(x_shape, w_shape, dtype=np.float32, **params):
        plane = explain(Conv(**params), x_shape, w_shape, dtype).plane
        return None if plane is None else plane.channel_block

    s2 = dict(strides=(2, 2), pads=(1, 1, 1, 1))
    assert block((1, 576, 14, 14), (576, 1, 3, 3), group=576, **s2) == 64
    assert block((1, 576, 14, 14), (576, 1, 3, 3), np.float64, group=576, **s2) == 64
    assert block((1, 672, 14, 14), (672, 1, 5, 5), group=672, strides=(2, 2),
                 pads=(2, 2, 2, 2)) == 64
    assert block((1, 100, 14, 14), (100, 1, 3, 3), group=100, **s2) == 64  # 50 + 50
    assert block((1, 576, 14, 14), (576, 1, 3, 3), group=576, pads=(1, 1, 1, 1)) == 0
    assert block((1, 576, 28, 28), (576, 1, 3, 3), group=576, **s2) == 0   # rows of 14
    assert block((1, 32, 14, 14), (32, 1, 3, 3), group=32, **s2) == 0      # few channels
    assert block((1, 96, 14, 14), (192, 1, 3, 3), group=96, **s2) == 0    # 2 outputs each
    tall = ((1, 64, 600, 16), (64, 1, 3, 3))  # 64 planes of 600 x 16: 2.6 MB a block
    assert block(*tall, group=64, **s2) == 0
    assert block((1, 64, 100, 16), (64, 1, 3, 3), group=64, **s2) == 64
