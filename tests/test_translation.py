"""The equivalences the documentation states (docs/translation.md, docs/upsampling.md)."""

import numpy as np
import pytest

import convt


def test_pytorch_conv_transpose_translation():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 6, 9, 7))
    for stride, padding, output_padding, groups, dilation in [(2, 1, 1, 2, 1), (3, 2, 0, 3, 2),
                                                              (1, 0, 0, 1, 1)]:
        layer = torch.nn.ConvTranspose2d(6, 12, kernel_size=(4, 3), stride=stride,
                                         padding=padding, output_padding=output_padding,
                                         groups=groups, dilation=dilation).double()
        with torch.no_grad():
            expected = layer(torch.from_numpy(x)).numpy()
        y = convt.conv_transpose(x, layer.weight.detach().numpy(), layer.bias.detach().numpy(),
                                 strides=(stride,) * 2, pads=(padding,) * 4,
                                 output_padding=(output_padding,) * 2, group=groups,
                                 dilations=(dilation,) * 2)
        np.testing.assert_allclose(y, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("factor", [2, 3])
def test_pytorch_interpolate_translation(factor):
    torch = pytest.importorskip("torch")
    functional = torch.nn.functional
    x = np.random.default_rng(1).random((1, 2, 7, 6, 5))
    tensor = torch.from_numpy(x)
    trilinear = functional.interpolate(tensor, scale_factor=factor, mode="trilinear",
                                       align_corners=False).numpy()
    np.testing.assert_allclose(convt.upsample(x, factor, axes=(2, 3, 4)), trilinear, atol=1e-13)
    nearest = functional.interpolate(tensor, scale_factor=factor, mode="nearest").numpy()
    np.testing.assert_array_equal(convt.upsample(x, factor, kernel="nearest", axes=(2, 3, 4)),
                                  nearest)


def _onnx_resize(x, factor, **attributes):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    node = helper.make_node("Resize", ["X", "", "S"], ["Y"], **attributes)
    graph = helper.make_graph(
        [node], "resize", [helper.make_tensor_value_info("X", TensorProto.DOUBLE, x.shape)],
        [helper.make_tensor_value_info("Y", TensorProto.DOUBLE, None)],
        [numpy_helper.from_array(np.array([1.0, 1.0, factor, factor], np.float32), "S")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    assert onnx.__version__
    return ReferenceEvaluator(model).run(None, {"X": x})[0]


@pytest.mark.parametrize("factor", [2, 3])
def test_onnx_resize_translation(factor):
    x = np.random.default_rng(2).random((1, 1, 9, 8))
    linear = _onnx_resize(x, factor, mode="linear", coordinate_transformation_mode="half_pixel")
    np.testing.assert_allclose(convt.upsample(x, factor, axes=(2, 3)), linear, atol=1e-12)
    # scales travel as float32: 1/3 is rounded, so factor 3 agrees to ~1e-7
    cubic = _onnx_resize(x, factor, mode="cubic", cubic_coeff_a=-0.5,
                         coordinate_transformation_mode="half_pixel")
    np.testing.assert_allclose(convt.upsample(x, factor, kernel="cubic", axes=(2, 3)), cubic,
                               atol=1e-6)
    nearest = _onnx_resize(x, factor, mode="nearest", coordinate_transformation_mode="asymmetric",
                           nearest_mode="floor")
    np.testing.assert_array_equal(convt.upsample(x, factor, kernel="nearest", axes=(2, 3)),
                                  nearest)


def test_onednn_layouts_translation():
    # NXC data and XOI filters, moved to convt's NCX and IOX: the same as computing in NCX
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 6, 5, 4))
    w = rng.standard_normal((6, 2, 3, 3))                          # (C, M/group, kH, kW)
    x_nxc = np.moveaxis(x, 1, -1)
    w_xoi = np.transpose(w, (2, 3, 1, 0))                          # (kH, kW, M/group, C)
    n = x_nxc.ndim - 2
    y = convt.conv_transpose(np.moveaxis(x_nxc, -1, 1), np.transpose(w_xoi, (n + 1, n, 0, 1)),
                             strides=(2, 2))
    np.testing.assert_array_equal(y, convt.conv_transpose(x, w, strides=(2, 2)))
