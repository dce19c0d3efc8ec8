"""Winograd F(2x2, 2x2) on the stride phases of 2-D float32 ConvTranspose whose
kernel is twice its stride (convt/_winograd.py, winograd_phases_conv in
_winograd.pxi): the phase decomposition against the definition, the transforms,
results against the float64 reference, the float32 error against PyTorch's,
non-finite values, threads, strides, the route."""

from types import SimpleNamespace

import numpy as np
import pytest

from _helpers import (assert_same_results_or_non_finite, float32_operands, relative_error,
                      use_kernel_set)
import convt
from convt import ConvTranspose, _dispatch, _winograd, explain
from convt._reference import reference_conv_transpose


@pytest.fixture(autouse=True)
def small_calls_run_winograd(monkeypatch, request):
    """The engine on small, fast geometries: its work and channel thresholds off (tests
    of the thresholds are marked keep_thresholds)."""
    if "keep_thresholds" not in request.keywords:
        monkeypatch.setattr(_dispatch, "WINOGRAD_PHASE_MIN_WORK", 0)
        monkeypatch.setattr(_dispatch, "WINOGRAD_PHASE_MIN_CHANNELS", 8)


def _runs(layer, x_shape, w_shape, dtype=np.float32):
    return explain(layer, x_shape, w_shape, dtype).winograd is not None




def _exact(layer, x, w, b=None):
    return reference_conv_transpose(x.astype(np.float64), w.astype(np.float64),
                                    None if b is None else b.astype(np.float64),
                                    **layer.get_params())




@pytest.mark.parametrize("kernel, stride, pad, output_padding, size", [
    (4, 2, 1, 0, 7), (4, 2, 0, 1, 6), (4, 2, 3, 1, 5), (2, 1, 0, 0, 5), (8, 4, 3, 2, 4),
    (6, 3, 5, 0, 6), (8, 4, 3, 0, 1),
])
def test_each_phase_is_the_conv_it_names(kernel, stride, pad, output_padding, size):
    """phases_of and phase_weights against the definition, in float64: the Conv of x
    that each Phase names (x read from t - pad, zero outside) is the ConvTranspose's
    outputs first, first + s, ... of its residue, and the phases cover every output."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 3, size, size + 1))
    w = rng.standard_normal((3, 2, kernel, kernel))
    layer = ConvTranspose(strides=(stride, stride), pads=(pad,) * 4,
                          output_padding=(output_padding,) * 2)
    y = _exact(layer, x, w)
    geometry = layer._geometry_for(x.shape, w.shape)
    covered = np.zeros(y.shape[2:], bool)
    phases = _winograd.phases_of(geometry)
    assert len(phases) == min(stride, y.shape[2]) * min(stride, y.shape[3])
    for phase in phases:
        g = _winograd.phase_weights(w, 1, phase)  # (M, C, 2, 2)
        rows = range(phase.first[0], y.shape[2], stride)
        cols = range(phase.first[1], y.shape[3], stride)
        expected = np.zeros((2, len(rows), len(cols)))
        for t in range(len(rows)):
            for u in range(len(cols)):
                for j in range(2):
                    for k in range(2):
                        i, q = t - phase.pads[0] + j, u - phase.pads[1] + k
                        if 0 <= i < x.shape[2] and 0 <= q < x.shape[3]:
                            expected[:, t, u] += g[:, :, j, k] @ x[0, :, i, q]
        np.testing.assert_allclose(y[0][:, phase.first[0]::stride, phase.first[1]::stride],
                                   expected, rtol=1e-12, atol=1e-12)
        covered[phase.first[0]::stride, phase.first[1]::stride] = True
    assert covered.all()


B_T2 = np.array([[1, -1, 0], [0, 1, 0], [0, -1, 1]], dtype=np.float64)
A_T2 = np.array([[1, 1, 0], [0, 1, 1]], dtype=np.float64)
TRANSFORM_FAMILIES = [family["name"] for family in convt._compiled.load().families()
                      if family["available"]] + ["reference"]


def _transform(name, **spec):
    return convt._compiled.load()._run_winograd(SimpleNamespace(family=name, taps=2, **spec))


@pytest.mark.parametrize("family", TRANSFORM_FAMILIES)
@pytest.mark.parametrize("left, strided", [(-1, False), (-2, False), (0, False), (-1, True)])
def test_transforms_match_their_definition(family, left, strided):
    """Each set's F(2x2, 2x2) transforms against B^T d B and A^T M A in float64, and
    bitwise against the baseline build ("reference"), on a block that reaches past
    every edge of the plane (its patches read x in place inside, zero-padded copies
    at the edges, or copies of every row when x's columns are strided)."""
    rng = np.random.default_rng(12)
    channels, rows, tiles, capacity = 3, 3, 6, 24
    x = rng.standard_normal((channels, 6, 9)).astype(np.float32)
    if strided:
        x = np.repeat(x, 2, axis=2)[:, :, ::2]
    block = dict(rows=rows, tiles=tiles, capacity=capacity, front=0, top=-1, left=left,
                 out_front=0, out_top=0, out_left=0)
    runs = {}
    if family != "reference":
        try:
            _transform(family, stage="input", x=x, out=np.zeros((9, channels, capacity),
                                                                 np.float32), **block)
        except LookupError:
            pytest.skip(f"{family} runs the baseline build (the 'reference' case)")
    for name in dict.fromkeys([family, "reference"]):
        v = np.full((9, channels, capacity), np.nan, np.float32)
        _transform(name, stage="input", x=x, out=v, **block)
        runs[name] = v
    np.testing.assert_array_equal(runs[family], runs["reference"])
    padded = np.pad(x.astype(np.float64), ((0, 0), (8, 8), (8, 8)))
    patches = np.stack([padded[:, 7 + 2 * r:10 + 2 * r, 8 + left + 2 * t:11 + left + 2 * t]
                        for r in range(rows) for t in range(tiles)], axis=1)  # top -1
    expected = np.einsum("ik,ctkl,jl->ijct", B_T2, patches, B_T2).reshape(9, channels, -1)
    np.testing.assert_allclose(runs[family][:, :, :rows * tiles], expected, rtol=1e-6,
                               atol=1e-6)
    assert not runs[family][:, :, rows * tiles:].any()  # zeroed padding columns

    m = rng.standard_normal((9, channels, capacity)).astype(np.float32)
    bias = rng.standard_normal(channels).astype(np.float32)
    out_space = (5, 11)  # cuts the block's last row and column
    outs = {}
    for name in dict.fromkeys([family, "reference"]):
        y = np.full((channels,) + out_space, 7.0, np.float32)
        assert _transform(name, stage="output", m=m, bias=bias, out=y, **block) == 0
        outs[name] = y
    np.testing.assert_array_equal(outs[family], outs["reference"])
    tiles_m = m[:, :, :rows * tiles].astype(np.float64).reshape(3, 3, channels, rows, tiles)
    full = np.einsum("ai,bj,ijcrt->crtab", A_T2, A_T2, tiles_m)
    grid = full.transpose(0, 1, 3, 2, 4).reshape(channels, 2 * rows, 2 * tiles)
    grid = grid + bias[:, None, None]
    np.testing.assert_allclose(outs[family], grid[:, :5, :11].astype(np.float32), rtol=1e-6,
                               atol=1e-6)


CASES = [
    ((1, 64, 32, 32), (64, 32, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),  # DCGAN
    ((2, 16, 17, 23), (16, 24, 4, 4), dict(strides=(2, 2), pads=(0, 2, 1, 3))),  # odd sizes
    ((1, 16, 15, 14), (16, 16, 4, 4), dict(strides=(2, 2), pads=(1, 0, 2, 1),
                                           output_padding=(1, 1))),
    ((1, 32, 12, 12), (32, 20, 4, 4), dict(strides=(2, 2), pads=(1,) * 4, group=2)),
    ((1, 16, 20, 20), (16, 16, 4, 4), dict(strides=(2, 2), auto_pad="SAME_LOWER")),
    ((1, 16, 20, 21), (16, 16, 4, 4), dict(strides=(2, 2), output_shape=(41, 43))),
    ((1, 16, 19, 20), (16, 16, 4, 4), dict(strides=(2, 2), pads=(4, 5, 5, 4))),  # crops
    ((1, 16, 12, 13), (16, 16, 2, 2), {}),                                      # k2 s1
    ((1, 16, 12, 11), (16, 16, 8, 8), dict(strides=(4, 4), pads=(3, 2, 1, 2),
                                          output_padding=(2, 3))),            # k8 s4
    ((1, 16, 14, 11), (16, 16, 4, 2), dict(strides=(2, 1), pads=(1, 0, 1, 1))),
    ((1, 16, 6, 150), (16, 16, 4, 4), dict(strides=(2, 2), pads=(1,) * 4)),   # column blocks
    ((1, 130, 18, 18), (130, 70, 4, 4), dict(strides=(2, 2), pads=(1,) * 4)),  # chunks
    ((1, 16, 14, 13), (16, 140, 4, 4), dict(strides=(2, 2), pads=(1,) * 4)),  # output chunks
]


@pytest.mark.parametrize("x_shape, w_shape, params", CASES)
@pytest.mark.parametrize("family", ["avx2", "portable"])
def test_results_match_the_reference(x_shape, w_shape, params, family, monkeypatch):
    use_kernel_set(monkeypatch, family)
    layer = ConvTranspose(**params)
    assert _runs(layer, x_shape, w_shape)
    assert "F(2x2, 2x2)" in str(explain(layer, x_shape, w_shape, np.float32))
    x, w, b = float32_operands(x_shape, w_shape, w_shape[1] * layer._attributes().group)
    y = layer.apply(x, w, b)
    exact = _exact(layer, x, w, b)
    assert y.shape == exact.shape
    assert relative_error(y, exact) < 2e-6


def test_results_do_not_depend_on_threads_or_strides():
    x, w, b = float32_operands((2, 32, 19, 21), (32, 24, 4, 4), 24, seed=3)
    params = dict(strides=(2, 2), pads=(1, 1, 1, 1))
    one = ConvTranspose(num_threads=1, **params).apply(x, w, b)
    for threads in (2, 3):
        np.testing.assert_array_equal(ConvTranspose(num_threads=threads, **params)
                                      .apply(x, w, b), one)
    # x with reversed rows and every other column, read in place
    flipped = np.ascontiguousarray(np.repeat(x[:, :, ::-1], 2, axis=3))[:, :, ::-1, ::2]
    np.testing.assert_array_equal(ConvTranspose(**params).apply(flipped, w, b), one)
    # channels-last data: x and y are views whose columns lie C elements apart
    layer = ConvTranspose(data_format="NXC", **params)
    assert _runs(layer, np.moveaxis(x, 1, -1).shape, w.shape)
    y = layer.apply(np.ascontiguousarray(np.moveaxis(x, 1, -1)), w, b)
    np.testing.assert_array_equal(np.moveaxis(y, -1, 1), one)


def test_error_stays_below_pytorchs():
    """PyTorch's ConvTranspose (col2im) sums each tap's channels, then the taps; the
    phases' products are summed in blocks of WINOGRAD_PHASE_SUM_BLOCK channels to
    stay below it (DCGAN's 256 -> 128 k4 s2, on a smaller map)."""
    torch = pytest.importorskip("torch")
    x, w, _ = float32_operands((1, 256, 24, 24), (256, 128, 4, 4), 128, seed=0)
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1))
    assert _runs(layer, x.shape, w.shape)
    exact = _exact(layer, x, w)
    theirs = torch.nn.functional.conv_transpose2d(torch.from_numpy(x), torch.from_numpy(w),
                                                  stride=2, padding=1).numpy()
    y = layer.apply(x, w)

    def rms(z):
        return float(np.sqrt(np.mean((z - exact) ** 2)))

    assert rms(y) < 0.9 * rms(theirs)
    assert np.abs(y - exact).max() < np.abs(theirs - exact).max()


@pytest.mark.parametrize("where", ["x", "w"])
@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
def test_non_finite_values_give_the_definitions_results(where, value):
    """Inf - Inf inside the transforms would make NaN where the products give Inf: such
    calls run the GEMM engine, whose every product is the definition's."""
    x, w, b = float32_operands((1, 16, 12, 12), (16, 16, 4, 4), 16, seed=2)
    (x if where == "x" else w)[(0, 3, 5, 7) if where == "x" else (3, 2, 1, 2)] = value
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1))
    assert _runs(layer, x.shape, w.shape)
    y = layer.apply(x, w, b)
    expected = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1))._apply(x, w, b, engine="gemm")
    assert_same_results_or_non_finite(y, expected)


def test_weights_changed_in_place_are_transformed_again():
    x, w, _ = float32_operands((1, 16, 12, 12), (16, 16, 4, 4), 16, seed=4)
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1))
    first = layer.apply(x, w)
    w *= 2
    np.testing.assert_allclose(layer.apply(x, w), 2 * first, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("x_shape, w_shape, params", CASES[:3] + CASES[8:9] + CASES[10:11])
def test_narrow_types_are_rounded_once(x_shape, w_shape, params, dtype):
    """float16 and bfloat16 inputs are widened exactly on the way in; the outputs,
    computed in float32, are rounded once: within half a unit in the last place of
    the float64 result (and float32's error)."""
    half_ulp = 2.0 ** -11 if dtype == "float16" else 2.0 ** -8  # relative, at most
    if dtype == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    layer = ConvTranspose(**params)
    assert _runs(layer, x_shape, w_shape, dtype)
    x, w, b = float32_operands(x_shape, w_shape, w_shape[1] * layer._attributes().group)
    x, w, b = x.astype(dtype), (w / 8).astype(dtype), b.astype(dtype)
    y = layer.apply(x, w, b)
    assert y.dtype == x.dtype
    exact = _exact(layer, x, w, b)
    bound = half_ulp * np.abs(exact) + 1e-6 * np.abs(exact).max()
    assert (np.abs(y.astype(np.float64) - exact) <= bound).all()
    # the same results from the float32 computation rounded by NumPy
    wide = layer.apply(x.astype(np.float32), w.astype(np.float32), b.astype(np.float32))
    assert np.mean(y != wide.astype(dtype)) < 1e-3


@pytest.mark.parametrize("x_shape, w_shape, params, dtype", [
    ((1, 16, 20, 20), (16, 16, 4, 4), dict(strides=(2, 2)), np.float64),
    ((1, 20, 20, 16), (16, 16, 4, 4), dict(strides=(2, 2), data_format="NXC"), np.float16),
    ((1, 16, 20, 20), (16, 16, 4, 4), dict(strides=(2, 2), dilations=(2, 2)), np.float32),
    ((1, 16, 20, 20), (16, 16, 3, 3), dict(strides=(2, 2)), np.float32),   # k3 s2
    ((1, 16, 20, 20), (16, 16, 4, 4), dict(strides=(3, 3)), np.float32),   # k4 s3
    ((1, 16, 8, 10, 10), (16, 16, 4, 4, 4), dict(strides=(2, 2, 2)), np.float32),  # 3-D
    ((1, 16, 4, 4), (16, 16, 4, 4), dict(strides=(2, 2)), np.float32),     # 16 tiles
])
def test_other_layers_keep_their_engines(x_shape, w_shape, params, dtype):
    assert not _runs(ConvTranspose(**params), x_shape, w_shape, dtype)


@pytest.mark.keep_thresholds
@pytest.mark.parametrize("x_shape, w_shape, expected", [
    ((1, 256, 64, 64), (256, 128, 4, 4), True),    # DCGAN: 2^31 multiply-adds
    ((4, 128, 32, 32), (128, 64, 4, 4), True),     # 2^29: a batch counts
    ((1, 128, 32, 32), (128, 128, 4, 4), False),   # 2^28
    ((1, 32, 128, 128), (32, 32, 4, 4), False),    # 32 channels
    ((1, 128, 128, 128), (128, 32, 4, 4), False),  # 32 output channels
])
def test_small_or_narrow_calls_keep_the_gemm_engine(x_shape, w_shape, expected):
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1))
    assert _runs(layer, x_shape, w_shape) is expected
