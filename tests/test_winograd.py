"""Winograd F(2x2, 3x3) for float32 3x3 stride-1 Conv and ConvTranspose
(convt/_winograd.py): results against the float64 reference, its float32 error
against a one-run sum's, non-finite values, threads, strides, weight changes."""

import numpy as np
import pytest

from _helpers import (assert_same_results_or_non_finite, float32_operands, relative_error,
                      use_kernel_set)
import convt
from convt import Conv, ConvTranspose, _dispatch, _engine, explain
from convt._reference import reference_conv


@pytest.fixture(autouse=True)
def small_calls_run_winograd(monkeypatch, request):
    """The engine on small, fast geometries: the work thresholds off (a test of the
    thresholds themselves is marked keep_thresholds)."""
    if "keep_thresholds" not in request.keywords:
        monkeypatch.setattr(_dispatch, "WINOGRAD_MIN_WORK", 0)
        monkeypatch.setattr(_dispatch, "WINOGRAD_3D_MIN_WORK", 0)


def _winograd_runs(layer, x_shape, w_shape):
    return explain(layer, x_shape, w_shape, np.float32).winograd is not None






CONV_CASES = [
    ((1, 64, 56, 56), (64, 64, 3, 3), dict(pads=(1, 1, 1, 1))),
    ((2, 32, 17, 23), (40, 32, 3, 3), dict(pads=(1, 0, 2, 1))),           # odd sizes, batch
    ((1, 32, 16, 22), (36, 32, 3, 3), dict(pads=(1, 1, 1, 1))),           # partial blocks
    ((1, 32, 18, 300), (32, 32, 3, 3), dict(pads=(1, 1, 1, 1))),          # column blocks
    ((1, 96, 20, 20), (198, 32, 3, 3), dict(pads=(2, 2, 0, 0), group=3)),  # groups, chunks
    ((1, 130, 20, 21), (70, 130, 3, 3), dict(auto_pad="SAME_LOWER")),    # channel chunks
    ((1, 32, 19, 19), (32, 32, 3, 3), {}),                                # no padding
    ((1, 32, 12, 12, 12), (32, 32, 3, 3, 3), dict(pads=(1,) * 6)),        # 3-D
    ((2, 32, 9, 13, 11), (40, 32, 3, 3, 3), dict(pads=(1, 0, 2, 2, 1, 0))),
    ((1, 64, 8, 20, 19), (66, 32, 3, 3, 3), dict(pads=(1,) * 6, group=2)),
    ((1, 32, 14, 15), (140, 32, 3, 3), dict(pads=(1, 1, 1, 1))),          # output chunks
    ((1, 32, 8, 10, 9), (70, 32, 3, 3, 3), dict(pads=(1,) * 6)),          # 3-D output chunks
]


@pytest.mark.parametrize("x_shape, w_shape, params", CONV_CASES)
@pytest.mark.parametrize("family", ["avx2", "portable"])
def test_conv_matches_the_reference(x_shape, w_shape, params, family, monkeypatch):
    use_kernel_set(monkeypatch, family)
    layer = Conv(**params)
    assert _winograd_runs(layer, x_shape, w_shape)
    x, w, b = float32_operands(x_shape, w_shape, w_shape[0])
    y = layer.apply(x, w, b)
    exact = reference_conv(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64),
                           **layer.get_params())
    assert y.shape == exact.shape
    assert relative_error(y, exact) < 2e-6


@pytest.mark.parametrize("x_shape, w_shape, params", [
    ((1, 64, 30, 30), (64, 64, 3, 3), dict(pads=(1, 1, 1, 1))),
    ((2, 64, 20, 30), (64, 48, 3, 3), dict(pads=(0, 1, 2, 3))),   # pads beyond k - 1 crop
    ((1, 64, 20, 30), (64, 32, 3, 3), dict(group=2, auto_pad="SAME_UPPER")),
    ((1, 32, 20, 30), (32, 32, 3, 3), dict(output_shape=(21, 31))),
])
def test_conv_transpose_matches_float64(x_shape, w_shape, params):
    layer = ConvTranspose(**params)
    assert _winograd_runs(layer, x_shape, w_shape)
    x, w, b = float32_operands(x_shape, w_shape, w_shape[1] * layer._attributes().group)
    exact = layer.apply(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64))
    y = layer.apply(x, w, b)
    assert relative_error(y, exact) < 2e-6


@pytest.mark.parametrize("space", [(24, 24), (10, 10, 10)])
def test_error_stays_below_a_one_run_sum(space):
    """Engines that sum a Conv's C x 9 (3-D: C x 27) products in one run (PyTorch,
    onnxruntime) have the error the loop below has; Winograd's transforms add a few
    roundings per value but sum only C products per tile element."""
    dims = len(space)
    x, w, _ = float32_operands((1, 64) + space, (64, 64) + (3,) * dims, 64, seed=5)
    layer = Conv(pads=(1,) * 2 * dims)
    assert _winograd_runs(layer, x.shape, w.shape)
    exact = layer.apply(x.astype(np.float64), w.astype(np.float64))
    padded = np.pad(x[0], ((0, 0),) + ((1, 1),) * dims)
    one_run = np.zeros((64,) + space, np.float32)
    for c in range(64):
        for tap in np.ndindex(*(3,) * dims):
            window = tuple(slice(k, k + size) for k, size in zip(tap, space))
            one_run += w[(slice(None), c) + tap][(...,) + (None,) * dims] * padded[c][window]
    winograd = layer.apply(x, w)

    def rms(y):
        return float(np.sqrt(np.mean((y - exact) ** 2)))

    assert rms(winograd) < rms(one_run[None])
    assert np.abs(winograd - exact).max() < np.abs(one_run[None] - exact).max()


@pytest.mark.parametrize("where", ["x", "w"])
@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("dims", [2, 3])
def test_non_finite_values_give_the_definitions_results(where, value, dims):
    """Inf - Inf inside the transforms would make NaN where the products give Inf: such
    calls run the GEMM engine, whose every product is the definition's."""
    space = (16, 16) if dims == 2 else (8, 10, 12)
    x, w, b = float32_operands((1, 32) + space, (32, 32) + (3,) * dims, 32, seed=2)
    (x if where == "x" else w)[(0, 3) + ((5, 7, 4)[:dims] if where == "x" else (1,) * dims)] = value
    layer = Conv(pads=(1,) * 2 * dims)
    assert _winograd_runs(layer, x.shape, w.shape)
    y = layer.apply(x, w, b)
    expected = Conv(pads=(1,) * 2 * dims)._apply(x, w, b, engine="gemm")
    assert_same_results_or_non_finite(y, expected)


def test_3d_results_do_not_depend_on_threads():
    x, w, b = float32_operands((1, 32, 10, 14, 18), (40, 32, 3, 3, 3), 40, seed=3)
    layer = Conv(pads=(1,) * 6)
    assert _winograd_runs(layer, x.shape, w.shape)
    one = Conv(pads=(1,) * 6, num_threads=1).apply(x, w, b)
    np.testing.assert_array_equal(one, Conv(pads=(1,) * 6, num_threads=2).apply(x, w, b))


def test_results_do_not_depend_on_threads_or_strides():
    x, w, b = float32_operands((2, 64, 30, 34), (48, 64, 3, 3), 48, seed=3)
    one = Conv(pads=(1, 1, 1, 1), num_threads=1).apply(x, w, b)
    two = Conv(pads=(1, 1, 1, 1), num_threads=2).apply(x, w, b)
    np.testing.assert_array_equal(one, two)
    # x with reversed rows and every other column, read in place
    flipped = np.ascontiguousarray(np.repeat(x[:, :, ::-1], 2, axis=3))[:, :, ::-1, ::2]
    np.testing.assert_array_equal(Conv(pads=(1, 1, 1, 1)).apply(flipped, w, b), one)


def test_weights_changed_in_place_are_transformed_again():
    x, w, _ = float32_operands((1, 32, 20, 20), (32, 32, 3, 3), 32, seed=4)
    layer = Conv(pads=(1, 1, 1, 1))
    first = layer.apply(x, w)
    w *= 2
    second = layer.apply(x, w)
    np.testing.assert_allclose(second, 2 * first, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("x_shape, w_shape, params", [
    ((1, 16, 64, 64), (16, 16, 3, 3), dict(pads=(1, 1, 1, 1))),   # few channels
    ((1, 64, 10, 10), (64, 64, 3, 3), dict(pads=(1, 1, 1, 1))),   # few tiles
    ((1, 64, 30, 30), (64, 64, 3, 3), dict(strides=(2, 2))),      # strided
    ((1, 64, 56, 56), (64, 64, 3, 3), dict(pads=(2,) * 4, dilations=(2, 2))),  # dilated
    ((1, 64, 30, 30), (64, 64, 5, 5), {}),                        # 5x5
    ((1, 32, 12, 12, 12), (32, 32, 3, 3, 3), dict(dilations=(2, 2, 2))),  # 3-D dilated
    ((1, 32, 12, 12, 12), (32, 32, 3, 3, 3), dict(strides=(2, 2, 2))),
])
def test_other_layers_keep_the_gemm_engine(x_shape, w_shape, params):
    assert not _winograd_runs(Conv(**params), x_shape, w_shape)


def test_3d_conv_transpose_keeps_the_gemm_engine():
    """Its col2im competitors sum each tap's channels first: more accurately than the
    3-D transforms allow (see convt._dispatch.winograd_route)."""
    assert not _winograd_runs(ConvTranspose(pads=(1,) * 6), (1, 32, 12, 12, 12),
                              (32, 32, 3, 3, 3))
    assert _winograd_runs(Conv(pads=(1,) * 6), (1, 32, 12, 12, 12), (32, 32, 3, 3, 3))


def test_other_dtypes_and_strided_conv_transpose_keep_the_gemm_engine():
    x_shape = (1, 64, 30, 30)
    assert _winograd_runs(Conv(pads=(1, 1, 1, 1)), x_shape, (64, 64, 3, 3))
    for dtype in (np.float64, np.float16):
        assert not explain(Conv(pads=(1, 1, 1, 1)), x_shape, (64, 64, 3, 3), dtype).winograd
    assert not _winograd_runs(ConvTranspose(strides=(2, 2)), x_shape, (64, 64, 3, 3))


def test_explain_reports_winograd():
    report = str(explain(Conv(pads=(1, 1, 1, 1)), (1, 64, 56, 56), (64, 64, 3, 3)))
    assert "winograd F(2x2, 3x3)" in report
    call = _engine.prepare(np.empty((1, 64, 56, 56), np.float32),
                           np.empty((64, 64, 3, 3), np.float32),
                           np.empty((1, 64, 56, 56), np.float32),
                           Conv(pads=(1, 1, 1, 1))._geometry_for((1, 64, 56, 56), (64, 64, 3, 3)),
                           1, transpose=False)
    assert call.winograd is not None


def test_channels_last_data_runs_in_place():
    x, w, b = float32_operands((1, 20, 22, 64), (64, 64, 3, 3), 64, seed=6)
    layer = Conv(pads=(1, 1, 1, 1), data_format="NXC")
    assert _winograd_runs(layer, x.shape, w.shape)
    y = layer.apply(x, w, b)
    exact = reference_conv(np.moveaxis(x, -1, 1).astype(np.float64), w.astype(np.float64),
                           b.astype(np.float64), pads=(1, 1, 1, 1))
    assert relative_error(np.moveaxis(y, -1, 1), exact) < 2e-6


def test_conv_transpose_error_stays_below_pytorchs():
    """PyTorch's ConvTranspose (col2im) sums each tap's channels, then the 9 taps:
    Winograd's products of a ConvTranspose are summed in short blocks
    (WINOGRAD_TRANSPOSE_SUM_BLOCK) to keep convt's float32 error below it."""
    torch = pytest.importorskip("torch")
    x, w, _ = float32_operands((1, 64, 56, 56), (64, 64, 3, 3), 64, seed=0)
    layer = ConvTranspose(pads=(1, 1, 1, 1))
    assert _winograd_runs(layer, x.shape, w.shape)
    exact = layer.apply(x.astype(np.float64), w.astype(np.float64))
    theirs = torch.nn.functional.conv_transpose2d(torch.from_numpy(x), torch.from_numpy(w),
                                                  padding=1).numpy()
    y = layer.apply(x, w)

    def rms(z):
        return float(np.sqrt(np.mean((z - exact) ** 2)))

    assert rms(y) < 0.95 * rms(theirs)  # 3.55e-6 against 3.85e-6
    # the largest of 200,704 errors is a noisy statistic: 2.61e-5 against 2.57e-5 here
    # (the GEMM engine's: 2.60e-5), 1.97e-5 and 1.74e-5 against 2.58e-5 and 2.32e-5
    # with other seeds
    assert np.abs(y - exact).max() < 1.1 * np.abs(theirs - exact).max()


@pytest.mark.parametrize("scale", [0.01, 0.1, 1.0, 100.0])
def test_finite_outputs_of_every_magnitude_stay_on_winograd(scale):
    """The output check looks for an exponent field of all ones: outputs whose exponents
    differ (1.5 and 3: 0x3f8 and 0x400) must not add up to one."""
    from convt import _winograd
    x, w, b = float32_operands((1, 32, 20, 20), (32, 32, 3, 3), 32, seed=9)
    layer = Conv(pads=(1, 1, 1, 1))
    call = _engine.prepare(x, w, np.empty((1, 32, 20, 20), np.float32),
                           layer._geometry_for(x.shape, w.shape), 1, transpose=False)
    y = np.empty((1, 32, 20, 20), np.float32)
    assert _winograd.run(call.winograd, x * scale, w, b, y, call.geometry, 1, 1)
    exact = reference_conv((x * scale).astype(np.float64), w.astype(np.float64),
                           b.astype(np.float64), pads=(1, 1, 1, 1))
    assert relative_error(y, exact) < 2e-6


@pytest.mark.keep_thresholds
@pytest.mark.parametrize("x_shape, w_shape, expected", [
    ((1, 64, 16, 16), (64, 64, 3, 3), False),         # 9 million multiply-adds
    ((1, 64, 24, 24), (64, 64, 3, 3), True),          # 21 million
    ((4, 64, 12, 12), (64, 64, 3, 3), True),          # a batch counts
    ((1, 32, 12, 12, 12), (32, 32, 3, 3, 3), False),  # 48 million, 3-D
    ((1, 64, 16, 16, 16), (64, 64, 3, 3, 3), True),   # 453 million
])
def test_small_calls_keep_the_gemm_engine(x_shape, w_shape, expected):
    pads = (1,) * 2 * (len(x_shape) - 2)
    assert _winograd_runs(Conv(pads=pads), x_shape, w_shape) is expected


B_T = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=np.float64)
A_T = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=np.float64)
TRANSFORM_FAMILIES = [family["name"] for family in convt._compiled.load().families()
                      if family["available"]] + ["reference"]


def _patches(x, dims, rows, tiles, front, top, left):
    """The 4x4 ([4x]4x4) zero-padded input patch of every tile of a block, float64."""
    pad = 8
    padded = np.pad(x.astype(np.float64), ((0, 0),) + ((pad, pad + 8),) * dims)
    starts = ([front] if dims == 3 else []) + [top, left]
    out = []
    for r in range(rows):
        for t in range(tiles):
            corner = starts[:-2] + [top + 2 * r, left + 2 * t]
            index = (slice(None),) + tuple(slice(pad + c, pad + c + 4) for c in corner)
            out.append(padded[index])
    return np.stack(out, axis=1)  # (C, tiles, 4, 4[, 4])


def _has_transforms(family):
    from types import SimpleNamespace
    try:
        convt._compiled.load()._run_winograd(SimpleNamespace(
            family=family, stage="input", x=np.zeros((1, 4, 4), np.float32),
            out=np.zeros((16, 1, 8), np.float32), rows=1, tiles=1, capacity=8, front=0,
            top=0, left=0, out_front=0, out_top=0, out_left=0))
    except LookupError:
        return False
    return True


@pytest.mark.parametrize("family", TRANSFORM_FAMILIES)
@pytest.mark.parametrize("dims", [2, 3])
def test_transforms_match_their_definition(family, dims):
    """Each set's transforms (convt/src/winograd_body.h compiled for it) against the
    definitions B^T d B and A^T M A in float64, and bitwise against the baseline build
    ("reference"), on a block that reaches past every edge of the plane."""
    from types import SimpleNamespace
    rng = np.random.default_rng(11)
    channels, rows, tiles, capacity = 3, 2, 5, 16
    space = (5, 6, 7)[3 - dims:]
    x = rng.standard_normal((channels,) + space).astype(np.float32)
    block = dict(rows=rows, tiles=tiles, capacity=capacity, front=-1, top=-1, left=-2,
                 out_front=0, out_top=0, out_left=0)
    points = 4 ** dims
    runs = {}
    if family != "reference" and not _has_transforms(family):
        pytest.skip(f"{family} runs the baseline build (the 'reference' case)")
    for name in dict.fromkeys([family, "reference"]):
        v = np.full((points, channels, capacity), np.nan, np.float32)
        convt._compiled.load()._run_winograd(SimpleNamespace(
            family=name, stage="input", x=x, out=v, **block))
        runs[name] = v
    np.testing.assert_array_equal(runs[family], runs["reference"])
    d = _patches(x, dims, rows, tiles, -1, -1, -2)
    if dims == 2:
        expected = np.einsum("ik,ctkl,jl->ijct", B_T, d, B_T)
    else:
        expected = np.einsum("ia,jb,kc,xtabc->ijkxt", B_T, B_T, B_T, d)
    expected = expected.reshape(points, channels, rows * tiles)
    np.testing.assert_allclose(runs[family][:, :, :rows * tiles], expected, rtol=1e-6,
                               atol=1e-6)
    assert not runs[family][:, :, rows * tiles:].any()  # zeroed padding columns

    m = rng.standard_normal((points, channels, capacity)).astype(np.float32)
    bias = rng.standard_normal(channels).astype(np.float32)
    out_space = (3, 9) if dims == 2 else (1, 3, 9)  # the plane cuts the block's last
    # row and column (3-D: and its second plane)
    outs = {}
    for name in dict.fromkeys([family, "reference"]):
        y = np.full((channels,) + out_space, 7.0, np.float32)
        flag = convt._compiled.load()._run_winograd(SimpleNamespace(
            family=name, stage="output", m=m, bias=bias, out=y, **block))
        assert flag == 0
        outs[name] = y
    np.testing.assert_array_equal(outs[family], outs["reference"])
    tiles_m = m[:, :, :rows * tiles].astype(np.float64).reshape((4,) * dims + (channels, rows,
                                                                               tiles))
    if dims == 2:
        full = np.einsum("ai,bj,ijcrt->crtab", A_T, A_T, tiles_m)
        grid = full.transpose(0, 1, 3, 2, 4).reshape(channels, 2 * rows, 2 * tiles)
    else:
        full = np.einsum("ai,bj,ck,ijkzrt->zrtabc", A_T, A_T, A_T, tiles_m)
        grid = full.transpose(0, 3, 1, 4, 2, 5).reshape(channels, 2, 2 * rows, 2 * tiles)
    grid = grid + bias.reshape((channels,) + (1,) * dims)
    window = grid[(slice(None),) + tuple(slice(0, size) for size in out_space)]
    np.testing.assert_allclose(outs[family], window.astype(np.float32), rtol=1e-6, atol=1e-6)


def _exact_transform(kernel):
    """G g G^T of one kernel (G along every axis; 2 or 3 taps each) in exact rationals."""
    from fractions import Fraction

    rows = {3: [[1, 0, 0], [Fraction(1, 2)] * 3, [Fraction(1, 2), Fraction(-1, 2), Fraction(1, 2)],
                [0, 0, 1]],
            2: [[1, 0], [1, 1], [0, 1]]}
    values = np.array([Fraction(float(v)) for v in kernel.ravel()], dtype=object).reshape(kernel.shape)
    for axis in range(kernel.ndim):
        g = rows[kernel.shape[axis]]
        moved = np.moveaxis(values, axis, 0)
        values = np.moveaxis(np.array([sum(c * moved[k] for k, c in enumerate(row))
                                       for row in g], dtype=object), 0, axis)
    return values.ravel()


@pytest.mark.parametrize("kernel", [(3, 3), (3, 3, 3), (2, 2)])
def test_the_weight_transform_is_rounded_once_from_the_exact_values(kernel):
    # kernels whose values span 2^-60 .. 2^60: float64 sums may round, float32 hardly notices
    rng = np.random.default_rng(len(kernel) * 10 + kernel[0])
    count = 40
    taps = (rng.standard_normal((count,) + kernel)
            * np.exp2(rng.integers(-60, 60, (count,) + kernel))).astype(np.float32)
    size = int(np.prod(kernel))
    points = int(np.prod([k + 1 for k in kernel]))
    out = np.empty((points, count), dtype=np.float32)
    convt._kernels.winograd_weight_transform(
        np.ascontiguousarray(taps.reshape(count, size).T, dtype=np.float64), out, kernel)
    for index in range(count):
        exact = np.array([float(v) for v in _exact_transform(taps[index])])
        ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
        # one rounding of the float64 result: half an ulp, and float64's own few ulps
        assert np.all(np.abs(out[:, index] - exact) <= 0.5 * ulp * (1 + 2.0**-20)
                      + 2.0**-50 * np.abs(taps[index]).max() * 4), index


@pytest.mark.parametrize("w_shape, group, mr", [
    ((70, 32, 3, 3), 1, 12), ((198, 32, 3, 3), 3, 12), ((66, 16, 3, 3, 3), 2, 6),
    ((40, 16, 2, 2), 1, 12), ((24, 3, 2, 2), 2, 8)])
def test_transformed_weights_are_packed_in_row_blocks(w_shape, group, mr):
    # [group][point][row block][channel][row of the block], the last block shorter
    from convt import _winograd

    rng = np.random.default_rng(4)
    w = rng.standard_normal(w_shape).astype(np.float32)
    packed = _winograd.transformed_weights(w, group, mr)
    m_total, cg = w_shape[:2]
    mg = m_total // group
    points = int(np.prod([k + 1 for k in w_shape[2:]]))
    assert packed.shape == (group, points, mg * cg) and packed.dtype == np.float32
    for g in range(group):
        for m in range(mg):
            start = m // mr * mr
            rows = min(mr, mg - start)
            for c in (0, cg - 1):
                exact = _exact_transform(w[g * mg + m, c])
                at = packed[g, :, start * cg + c * rows + m - start]
                np.testing.assert_array_max_ulp(at, np.array([float(v) for v in exact],
                                                             dtype=np.float32), maxulp=1)
