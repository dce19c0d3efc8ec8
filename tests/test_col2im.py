"""col2im for weight-bound ConvTranspose on small maps (convt/_col2im.py,
col2im_conv_transpose in _col2im.pxi): results against the float64 reference on
every kernel set, float32 and float64, bias, groups, 1-D to 3-D, dilation,
cropping pads and output padding, threads, non-finite values, results that do not
depend on the operands' layouts, and the route."""

import numpy as np
import pytest

from _helpers import FAMILIES, assert_same_results_or_non_finite, relative_error, use_kernel_set
from convt import ConvTranspose, _col2im, _dispatch, explain
from convt._reference import reference_conv_transpose


@pytest.fixture(autouse=True)
def small_weights_run_col2im(monkeypatch):
    """The route on small, fast layers: its weight thresholds lowered."""
    monkeypatch.setattr(_dispatch, "COL2IM_MIN_WEIGHT_BYTES", 4096)
    monkeypatch.setattr(_dispatch, "COL2IM_MIN_WEIGHT_BYTES_PER_POSITION", 64)


def _serves(layer, x_shape, w_shape, dtype=np.float32):
    return explain(layer, x_shape, w_shape, dtype).col2im is not None


def _operands(x_shape, w_shape, dtype, seed=0, group=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = (rng.standard_normal(w_shape) / np.sqrt(w_shape[0])).astype(dtype)
    b = rng.standard_normal(w_shape[1] * group).astype(dtype)
    return x, w, b


def _exact(layer, x, w, b=None):
    return reference_conv_transpose(x.astype(np.float64), w.astype(np.float64),
                                    None if b is None else b.astype(np.float64),
                                    **layer.get_params())


# (x shape, w shape, params): the small maps col2im serves
GEOMETRIES = {
    "k4s2 4x4": ((1, 96, 4, 4), (96, 40, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    "k4s2 8x8 batch 2": ((2, 64, 8, 8), (64, 24, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    "k3s2 output padding": ((1, 48, 5, 7), (48, 50, 3, 3),
                            dict(strides=(2, 2), pads=(1, 1, 1, 1), output_padding=(1, 1))),
    "k4s1 on 1x1": ((3, 40, 1, 1), (40, 70, 4, 4), dict()),
    "1-D k16s8": ((1, 64, 8), (64, 36, 16), dict(strides=(8,), pads=(4, 4))),
    "1-D k16s8 batch 5": ((5, 64, 7), (64, 36, 16), dict(strides=(8,), pads=(4, 4))),
    "3-D k2s1": ((1, 32, 2, 3, 3), (32, 20, 2, 2, 2), dict()),
    "groups": ((1, 64, 6, 6), (64, 12, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1), group=4)),
    "dilation": ((1, 40, 7, 5), (40, 30, 3, 3), dict(dilations=(2, 2))),
    "cropping pads": ((1, 32, 4, 4), (32, 28, 5, 5), dict(strides=(3, 2), pads=(3, 0, 2, 4))),
    "negative pads": ((1, 32, 3, 5), (32, 28, 3, 3),
                      dict(strides=(2, 2), output_shape=(9, 13), auto_pad="SAME_UPPER")),
}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_results_match_the_reference(monkeypatch, family, dtype, name):
    use_kernel_set(monkeypatch, family)
    x_shape, w_shape, params = GEOMETRIES[name]
    x, w, b = _operands(x_shape, w_shape, dtype, group=params.get("group", 1))
    layer = ConvTranspose(**params)
    assert _serves(layer, x.shape, w.shape, dtype)
    for bias in (b, None):
        got = layer.apply(x, w, bias)
        assert relative_error(got, _exact(layer, x, w, bias)) < (2e-6 if dtype == np.float32
                                                                else 1e-14)
        # bound: x's positions as the vectors (half panels where they fit), same bits
        assert np.array_equal(layer.bind(w, bias)(x), got)


@pytest.mark.parametrize("name", ["k4s2 4x4", "1-D k16s8 batch 5", "groups"])
def test_results_are_bitwise_identical_for_every_thread_count(name):
    x_shape, w_shape, params = GEOMETRIES[name]
    x, w, b = _operands(x_shape, w_shape, np.float32, seed=1, group=params.get("group", 1))
    first = ConvTranspose(num_threads=1, **params).apply(x, w, b)
    for threads in (2, 3, 5):
        layer = ConvTranspose(num_threads=threads, **params)
        assert _serves(layer, x.shape, w.shape)
        np.testing.assert_array_equal(layer.apply(x, w, b), first)


def test_float32_error_is_that_of_a_blocked_sum():
    # 1024 input channels: each product a sum of 1024 terms, in blocks of 64
    x, w, b = _operands((1, 1024, 4, 4), (1024, 32, 4, 4), np.float32, seed=2)
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1))
    assert _serves(layer, x.shape, w.shape)
    exact = _exact(layer, x, w, b)
    error = np.abs(layer.apply(x, w, b) - exact)
    # each output: at most 4 products of 1024 terms; RMS well inside sqrt(block) ulps
    assert np.sqrt(np.mean(error ** 2)) < 4 * np.finfo(np.float32).eps * np.sqrt(np.mean(exact ** 2))


def test_non_finite_values_propagate_as_the_definition_says():
    x, w, b = _operands((1, 32, 4, 4), (32, 16, 4, 4), np.float64, seed=3)
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1))
    assert _serves(layer, x.shape, w.shape, np.float64)
    x[0, 3, 0, 0] = np.inf         # a corner: some of its products are cropped
    x[0, 5, 2, 1] = np.nan
    w[7, 2, 1, 3] = -np.inf
    w[9, 4, 0, 0] = np.inf
    x[0, 9, 1, 1] = 0.0            # inf x 0 = nan where that weight meets it
    assert_same_results_or_non_finite(layer.apply(x, w, b), _exact(layer, x, w, b))


@pytest.mark.parametrize("layout", ["fortran w", "flipped w", "XOI filter", "NXC data"])
def test_results_do_not_depend_on_the_layouts(layout):
    """w in another memory layout is copied to C order and channels-last outputs are
    written through a C-order array: the bits of the channels-first, C-order call; a
    bound layer (which keeps w in its memory order) gives apply's."""
    x, w, b = _operands((1, 48, 4, 4), (48, 20, 4, 4), np.float32, seed=4)
    params = dict(strides=(2, 2), pads=(1, 1, 1, 1))
    layer = ConvTranspose(**params)
    assert _serves(layer, x.shape, w.shape)
    expected = layer.apply(x, w, b)
    assert relative_error(expected, _exact(layer, x, w, b)) < 2e-6
    if layout in ("fortran w", "flipped w"):
        view = np.asfortranarray(w) if layout == "fortran w" else np.flip(np.flip(w, -1).copy(), -1)
        got, bound = layer.apply(x, view, b), layer.bind(view, b)(x)
        np.testing.assert_array_equal(bound, got)
    elif layout == "XOI filter":
        layer.set_params(filter_format="XOI")
        got = layer.apply(x, np.moveaxis(w, (0, 1), (-1, -2)), b)
    else:
        layer.set_params(data_format="NXC")
        got = np.moveaxis(layer.apply(np.ascontiguousarray(np.moveaxis(x, 1, -1)), w, b), -1, 1)
    np.testing.assert_array_equal(got, expected)


def test_each_output_is_written_once_and_nothing_past_it():
    x, w, b = _operands((2, 64, 4, 4), (64, 24, 4, 4), np.float32, seed=5)
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1), num_threads=2)
    shape = layer.output_shape_for(x.shape, w.shape)
    size = int(np.prod(shape))
    guarded = np.full(size + 64, 7.0, np.float32)
    out = guarded[32:32 + size].reshape(shape)
    out[...] = np.nan  # whatever y held before is overwritten
    assert layer.apply(x, w, b, out=out) is out
    assert np.all(guarded[:32] == 7.0) and np.all(guarded[32 + size:] == 7.0)
    assert relative_error(out, _exact(layer, x, w, b)) < 2e-6


def _stacked_by_numpy(x, group):
    """x (N, C, spatial...) as (G, Cg, N P), written from the layout's definition."""
    batch, channels = x.shape[:2]
    xt = x.reshape(batch, group, channels // group, -1).transpose(1, 2, 0, 3)
    return xt.reshape(group, channels // group, -1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("x_shape, group, width", [
    ((1, 6, 4, 4), 1, 8), ((3, 8, 5), 2, 8), ((2, 12, 3, 3), 4, 12), ((5, 4, 7), 1, 16),
    ((1, 3, 1, 1), 1, 8), ((4, 6, 2, 2, 2), 3, 6)])
@pytest.mark.parametrize("layout", ["C order", "channels last", "strided positions",
                                    "reversed channels"])
def test_packed_positions_match_their_definition(dtype, x_shape, group, width, layout):
    """The compiled packing of x (row blocks for apply, zero-padded panels for bound
    layers) against the layouts built with NumPy, bit for bit (NaN payloads too),
    from views of any layout."""
    rng = np.random.default_rng(7)
    bits = np.uint32 if dtype == np.float32 else np.uint64
    if layout == "strided positions":
        big = rng.integers(0, np.iinfo(bits).max, x_shape[:2] + tuple(2 * d for d in x_shape[2:]),
                           dtype=bits, endpoint=True).view(dtype)
        x = big[(slice(None), slice(None)) + (slice(None, None, 2),) * (len(x_shape) - 2)]
    else:
        x = rng.integers(0, np.iinfo(bits).max, x_shape, dtype=bits, endpoint=True).view(dtype)
        if layout == "channels last":
            x = np.moveaxis(np.ascontiguousarray(np.moveaxis(x, 1, -1)), -1, 1)
        elif layout == "reversed channels":
            x = x[:, ::-1]
    stacked = _stacked_by_numpy(x, group)
    cg, positions = stacked.shape[1:]
    starts = range(0, positions, width)
    blocks = np.concatenate([stacked[..., s:s + width].reshape(group, -1) for s in starts], axis=1)
    got = _col2im.packed_input(x, group, width)
    assert got.shape == blocks.shape and got.dtype == dtype
    np.testing.assert_array_equal(got.view(bits), blocks.view(bits))
    padded = np.zeros((group, cg, len(starts) * width), dtype)
    padded[..., :positions] = stacked
    panels = padded.reshape(group, cg, len(starts), width).transpose(0, 2, 1, 3)
    got = _col2im.input_panels(x, group, width)
    assert got.shape == panels.shape and got.flags.c_contiguous
    np.testing.assert_array_equal(got.view(bits), panels.view(bits))


def test_targets_map_each_tap_to_its_output():
    layer = ConvTranspose(strides=(3, 2), pads=(1, 0, 2, 1), dilations=(1, 2))
    x_shape, w_shape = (1, 1, 2, 3), (1, 1, 2, 3)
    geometry = explain(layer, x_shape, w_shape, np.float64).problem.geometry
    table = _col2im._targets(geometry)
    out_h, out_w = geometry.output_shape
    assert table.shape == (6, 6)
    for position in range(6):
        i, j = divmod(position, 3)
        for tap in range(6):
            ky, kx = divmod(tap, 3)
            oy, ox = 3 * i - 1 + ky, 2 * j + 2 * kx
            inside = 0 <= oy < out_h and 0 <= ox < out_w
            assert table[position, tap] == (oy * out_w + ox if inside else -1)


def test_route(monkeypatch):
    monkeypatch.setattr(_dispatch, "COL2IM_MIN_WEIGHT_BYTES", 512 << 10)
    monkeypatch.setattr(_dispatch, "COL2IM_MIN_WEIGHT_BYTES_PER_POSITION", 8 << 10)
    k4s2 = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1))
    assert _serves(k4s2, (1, 512, 4, 4), (512, 256, 4, 4))           # 8 MiB of weights
    assert _serves(k4s2, (1, 128, 8, 8), (128, 64, 4, 4))            # 512 KiB
    assert _serves(k4s2, (1, 512, 8, 8), (512, 256, 4, 4), np.float64)
    assert _serves(k4s2, (1, 512, 12, 12), (512, 256, 4, 4))         # 144 positions
    assert not _serves(k4s2, (1, 128, 12, 12), (128, 64, 4, 4))      # 3.6 KiB per position
    assert not _serves(k4s2, (1, 256, 13, 13), (256, 128, 4, 4))     # 169 positions
    assert not _serves(k4s2, (1, 64, 8, 8), (64, 32, 4, 4))          # 128 KiB of weights
    assert not _serves(k4s2, (1, 512, 4, 4), (512, 256, 4, 4), np.float16)
    # taps that do not overlap (kernel = stride): phases of one tap over x in place
    assert not _serves(ConvTranspose(strides=(2, 2)), (1, 512, 8, 8), (512, 256, 2, 2))
    # a kernel far longer than the input, cropped to a few outputs: the products the
    # pads crop would be most of col2im's work
    cropped = ConvTranspose(output_shape=(12,))
    assert not _serves(cropped, (1, 256, 4), (256, 64, 256))
    # a batch stacks its images' positions (w read once): at most 144 of them
    assert _serves(k4s2, (9, 256, 4, 4), (256, 128, 4, 4))           # 144 positions
    assert not _serves(k4s2, (10, 256, 4, 4), (256, 128, 4, 4))      # 13 KiB per position
    # ...and up to 256 where each position has 32 KiB of weights
    assert _serves(k4s2, (16, 1024, 4, 4), (1024, 512, 4, 4))        # 256 x 128 KiB
    assert _serves(k4s2, (4, 512, 8, 8), (512, 256, 4, 4))           # 256 x 32 KiB
    assert not _serves(k4s2, (17, 1024, 4, 4), (1024, 512, 4, 4))    # 272 positions
    assert not _serves(k4s2, (1, 256, 16, 16), (256, 128, 4, 4))     # 256 x 8 KiB
    assert _serves(ConvTranspose(strides=(8,), pads=(4, 4)), (4, 512, 32), (512, 256, 16))
    # an x whose copy would pass COL2IM_MAX_INPUT_BYTES keeps the GEMM engine
    assert _serves(k4s2, (1, 32768, 4, 4), (32768, 8, 4, 4))         # 2 MiB of x
    monkeypatch.setattr(_dispatch, "COL2IM_MAX_INPUT_BYTES", 1 << 20)
    assert not _serves(k4s2, (1, 32768, 4, 4), (32768, 8, 4, 4))
    assert "col2im" in str(explain(k4s2, (1, 512, 4, 4), (512, 256, 4, 4)))
