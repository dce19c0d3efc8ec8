"""Batched 1-D calls run with their images as a leading axis (convt._engine.folds_batch):
the same sums as image by image, on every engine, for both operators and layouts (BLAS
sums in an order of its own that depends on the matrix sizes: within the rounding bound)."""

import numpy as np
import pytest

from _helpers import ENGINES, assert_matches_reference, run_engine
from _conv_helpers import assert_conv_matches_reference, run_conv_engine
from convt import Conv, ConvTranspose, explain

CASES = {
    "k16s8": ((3, 12, 9), (12, 5, 16), dict(strides=(8,), pads=(4, 4))),
    "k3s2_grouped": ((4, 6, 11), (6, 2, 3), dict(strides=(2,), pads=(1, 0), group=3,
                                                 output_padding=(1,))),
    "depthwise_dilated": ((2, 4, 13), (4, 1, 3), dict(dilations=(2,), pads=(2, 2), group=4)),
}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_batched_1d_equals_image_by_image(name, engine):
    x_shape, w_shape, params = CASES[name]
    rng = np.random.default_rng(len(name))
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    b = rng.standard_normal(w_shape[1] * params.get("group", 1)).astype(np.float32)
    blas = engine.endswith("blas")
    y = run_engine(engine, x, w, b, **params)
    singles = np.concatenate([run_engine(engine, x[i:i + 1], w, b, **params)
                              for i in range(x.shape[0])])
    if blas:
        assert_matches_reference(y, x, w, b, **params)
    else:
        np.testing.assert_array_equal(y, singles)
    # Conv with the same attributes (its weights are (M, C/group, k))
    conv_w = np.ascontiguousarray(np.swapaxes(
        w.reshape(params.get("group", 1), -1, *w.shape[1:]), 1, 2).reshape(
            w.shape[1] * params.get("group", 1), -1, w.shape[-1]))
    conv_params = {k: v for k, v in params.items() if k != "output_padding"}
    y = run_conv_engine(engine, x, conv_w, b[:conv_w.shape[0]], **conv_params)
    singles = np.concatenate([run_conv_engine(engine, x[i:i + 1], conv_w, b[:conv_w.shape[0]],
                                              **conv_params) for i in range(x.shape[0])])
    if blas:
        assert_conv_matches_reference(y, x, conv_w, b[:conv_w.shape[0]], **conv_params)
    else:
        np.testing.assert_array_equal(y, singles)


def test_channels_last_batched_1d_and_explain():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 40, 16)).astype(np.float32)        # (N, L, C)
    w = rng.standard_normal((4, 8, 16)).astype(np.float32)         # (k, M, C)
    layer = ConvTranspose(strides=2, pads=(1, 1), data_format="NXC", filter_format="XOI")
    y = layer.apply(x, w)
    for i in range(x.shape[0]):
        np.testing.assert_array_equal(y[i:i + 1], layer.apply(x[i:i + 1], w))
    report = explain(layer, x.shape, w.shape)
    assert report.problem.batch == 1 and report.problem.geometry.input_shape == (5, 40)
    assert explain(Conv(), (1, 3, 8), (2, 3, 3)).problem.geometry.ndim == 1
