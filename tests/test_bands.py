"""Conv by bands of output rows (convt/_bands.py, band_conv in _bands.pxi): results
against the float64 reference on the sets with transposed kernels, float32 and
float64, bias, groups, 1-D and 2-D, strides, dilations and pads, results that do
not depend on the thread count, the bands or the operands' layouts, non-finite
weights and inputs as the Conv definition gives them, weights edited in place,
and the route."""

import numpy as np
import pytest

from _conv_helpers import conv_operands, exact_conv
from _helpers import FAMILIES, assert_same_results_or_non_finite, relative_error, use_kernel_set
from convt import Conv, _dispatch, explain

# The sets whose gemm_t kernels the band driver runs (BAND_SETS lists those it is
# measured faster on; the others run it here for the driver's sake).
BAND_FAMILIES = [name for name in ("avx512", "avx2") if name in FAMILIES]


@pytest.fixture(autouse=True)
def small_layers_run_bands(monkeypatch):
    """The route on small, fast layers, on every set with transposed kernels."""
    monkeypatch.setattr(_dispatch, "BAND_SETS", ("avx512", "avx2"))
    monkeypatch.setattr(_dispatch, "BAND_MIN_DEPTH", 16)
    monkeypatch.setattr(_dispatch, "TRANSPOSED_MAX_POSITIONS", 8)


@pytest.fixture
def band_set(monkeypatch):
    """Route the test's calls to a set with transposed kernels (the CPU's default set
    may have none: avx512_wide, NEON); skipped where none runs."""
    if not BAND_FAMILIES:
        pytest.skip("no kernel set with transposed kernels runs here")
    use_kernel_set(monkeypatch, BAND_FAMILIES[0])


def _serves(layer, x_shape, w_shape, dtype=np.float32):
    return explain(layer, x_shape, w_shape, dtype).bands is not None


# (x shape, w shape, params): strided Conv layers with whole vectors of outputs
GEOMETRIES = {
    "k3s2": ((1, 24, 17, 19), (32, 24, 3, 3), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    "k3s2 batch 2, 64 outputs": ((2, 16, 12, 30), (64, 16, 3, 3),
                                 dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    "long rows": ((1, 8, 6, 70), (32, 8, 3, 3), dict(strides=(1, 2), pads=(0, 1, 2, 0))),
    "stride 3, asymmetric pads": ((1, 12, 14, 16), (32, 12, 3, 4),
                                  dict(strides=(3, 3), pads=(2, 0, 0, 3))),
    "stride 2 x 1 rows": ((1, 10, 9, 9), (48, 10, 5, 3), dict(strides=(1, 2), pads=(2, 1, 2, 1))),
    "dilation": ((1, 9, 15, 21), (32, 9, 3, 3), dict(strides=(2, 2), dilations=(2, 3))),
    "SAME_UPPER": ((1, 16, 11, 13), (32, 16, 3, 3), dict(strides=(2, 2), auto_pad="SAME_UPPER")),
    "groups": ((1, 32, 10, 12), (64, 16, 3, 3), dict(strides=(2, 2), pads=(1, 1, 1, 1), group=2)),
    "1-D": ((2, 24, 40), (32, 24, 5), dict(strides=(2,), pads=(2, 1))),
    "pads larger than the kernel": ((1, 8, 5, 6), (32, 8, 3, 3),
                                    dict(strides=(2, 2), pads=(4, 5, 3, 4))),
    "3-D": ((1, 6, 7, 9, 11), (32, 6, 3, 3, 3), dict(strides=(2, 2, 2), pads=(1, 0, 1, 1, 2, 1))),
    "3-D dilated, anisotropic": ((2, 4, 9, 6, 13), (32, 4, 2, 3, 3),
                                 dict(strides=(3, 1, 2), dilations=(2, 1, 1), pads=(2, 1, 0, 0, 1, 2))),
}


@pytest.mark.parametrize("family", BAND_FAMILIES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_results_match_the_reference(monkeypatch, family, dtype, name):
    use_kernel_set(monkeypatch, family)
    x_shape, w_shape, params = GEOMETRIES[name]
    x, w, b = conv_operands(x_shape, w_shape, dtype)
    layer = Conv(**params)
    assert _serves(layer, x.shape, w.shape, dtype)
    for bias in (b, None):
        got = layer.apply(x, w, bias)
        exact = exact_conv(layer, x, w, bias)
        assert got.shape == exact.shape
        assert relative_error(got, exact) < (2e-6 if dtype == np.float32 else 1e-14)
        # a bound layer packs its own copy of w once: the same bits
        assert np.array_equal(layer.bind(w, bias)(x), got)


@pytest.mark.parametrize("name", ["k3s2", "groups", "1-D", "long rows", "3-D"])
def test_results_do_not_depend_on_threads_or_bands(monkeypatch, band_set, name):
    """Every output is one kernel call's sum over the whole depth, from a buffer
    whose values do not depend on the band: threads, bands and runs of vectors
    change nothing."""
    x_shape, w_shape, params = GEOMETRIES[name]
    x, w, b = conv_operands(x_shape, w_shape, np.float32, seed=1)
    first = Conv(num_threads=1, **params).apply(x, w, b)
    for threads in (2, 3, 5):
        assert np.array_equal(Conv(num_threads=threads, **params).apply(x, w, b), first)
    for buffer_bytes, items in ((8192, 1), (1 << 20, 3), (16384, 24)):
        monkeypatch.setattr(_dispatch, "BAND_BUFFER_BYTES", buffer_bytes)
        monkeypatch.setattr(_dispatch, "MAX_WORK_ITEMS", items)
        monkeypatch.setattr(_dispatch, "BAND_WORK_ITEMS_PER_CORE", items)
        layer = Conv(num_threads=2, **params)
        assert _serves(layer, x.shape, w.shape)
        assert np.array_equal(layer.apply(x, w, b), first)


def test_operands_of_any_layout_give_the_same_bits(band_set):
    x_shape, w_shape, params = GEOMETRIES["k3s2 batch 2, 64 outputs"]
    x, w, b = conv_operands(x_shape, w_shape, np.float32, seed=2)
    layer = Conv(**params)
    assert _serves(layer, x.shape, w.shape)
    first = layer.apply(x, w, b)
    # x with strided columns, or reversed channels; w transposed in memory; out given
    wide = np.zeros(x.shape[:3] + (2 * x.shape[3],), x.dtype)
    wide[..., ::2] = x
    reversed_channels = np.ascontiguousarray(x[:, ::-1])[:, ::-1]
    for xs, ws in ((wide[..., ::2], w), (reversed_channels, np.asfortranarray(w))):
        out = np.full(first.shape, np.nan, np.float32)
        assert layer.apply(xs, ws, b, out=out) is out
        assert np.array_equal(out, first)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_non_finite_weights_multiply_the_padding(band_set, dtype):
    """Conv multiplies its zero padding by every weight: an Inf on a tap that reads
    only padding for the border outputs makes them NaN, as the definition says."""
    x_shape, w_shape, params = GEOMETRIES["k3s2"]
    x, w, b = conv_operands(x_shape, w_shape, dtype, seed=3)
    layer = Conv(**params)
    assert _serves(layer, x.shape, w.shape, dtype)
    w[3, 5, 0, 0] = np.inf
    w[7, 2, 1, 2] = np.nan
    x[0, 4, 6, 6] = -np.inf
    expected = exact_conv(layer, x, w, b)
    assert_same_results_or_non_finite(layer.apply(x, w, b), expected)


def test_weights_edited_in_place_are_packed_again(band_set):
    x_shape, w_shape, params = GEOMETRIES["stride 3, asymmetric pads"]
    x, w, b = conv_operands(x_shape, w_shape, np.float32, seed=4)
    layer = Conv(**params)
    assert _serves(layer, x.shape, w.shape)
    layer.apply(x, w, b)
    w[1:5] *= -3
    assert relative_error(layer.apply(x, w, b), exact_conv(layer, x, w, b)) < 2e-6


def test_route():
    """Strided rows of enough depth, whole vectors of outputs and maps beyond the
    GEMM engine's small-map region, in 1 to 3 dimensions; not 1x1, stride-1, 4-D or
    float16 layers."""
    x_shape, w_shape, params = (1, 32, 20, 20), (32, 32, 3, 3), dict(strides=(2, 2))
    # (the fixture lists the sets with transposed kernels; a CPU's default set may be another)
    expected = explain(Conv(**params), x_shape, w_shape).decision.kernel_set in ("avx512", "avx2")
    assert _serves(Conv(**params), x_shape, w_shape) == expected
    assert not _serves(Conv(strides=(2, 2)), x_shape, (32, 32, 1, 1))
    assert not _serves(Conv(strides=(2, 1)), x_shape, w_shape)
    assert not _serves(Conv(**params), x_shape, (40, 32, 3, 3))  # 40: not whole vectors
    assert not _serves(Conv(**params), x_shape, w_shape, np.float16)
    assert _serves(Conv(strides=(2, 2, 2)), (1, 8, 9, 9, 9), (32, 8, 3, 3, 3)) == expected
    assert not _serves(Conv(strides=(2,) * 4), (1, 4, 5, 5, 5, 5), (32, 4, 3, 3, 3, 3))
    assert not _serves(Conv(**params, group=32), x_shape, (32, 1, 3, 3))
