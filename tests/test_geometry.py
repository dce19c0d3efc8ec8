"""Output shapes and pads, by the ConvTranspose-11/22 text (pure Python, no kernels).

Each case is worked out by hand from the text's equations; the comments show the
arithmetic.  Where runtimes deviate (../shared/specs/README.md), the text wins.
"""

import subprocess
import sys

import pytest

from convt import ConvTranspose
from convt._geometry import split_total_padding


def _resolve(x_shape, w_shape, **params):
    layer = ConvTranspose(**params)
    return layer.output_shape_for(x_shape, w_shape)[2:], layer.pads_for(x_shape, w_shape)


@pytest.mark.parametrize(
    "total, upper, lower",
    [(4, (2, 2), (2, 2)), (3, (1, 2), (2, 1)), (0, (0, 0), (0, 0)),
     (-1, (-1, 0), (0, -1)), (-3, (-2, -1), (-1, -2))],
)
def test_odd_unit_goes_at_the_end_for_upper_and_the_beginning_for_lower(total, upper, lower):
    # ConvTranspose-11+: SAME_UPPER begin = total // 2, else begin = total - total // 2 (floor).
    assert split_total_padding(total, "SAME_UPPER") == upper
    assert split_total_padding(total, "SAME_LOWER") == lower
    assert split_total_padding(total, "NOTSET") == lower


def test_same_output_is_input_times_stride_with_output_padding_in_the_total():
    # i=3, k=3, s=2, a=1: full = 2*2 + 1 + 3 = 8; target 3*2 = 6; total 2 -> (1, 1).
    # onnxruntime would clamp and add output_padding instead (7 long).
    shape, pads = _resolve((1, 1, 3), (1, 1, 3), strides=(2,), output_padding=(1,),
                           auto_pad="SAME_UPPER")
    assert shape == (6,) and pads == ((1, 1),)


def test_same_total_may_be_negative_for_a_kernel_shorter_than_the_stride():
    # i=5, k=1, s=3: full = 3*4 + 1 = 13; target 15; total -2 -> (-1, -1): zero margins.
    shape, pads = _resolve((1, 1, 5), (1, 1, 1), strides=(3,), auto_pad="SAME_UPPER")
    assert shape == (15,) and pads == ((-1, -1),)


def test_same_lower_with_negative_odd_total():
    # i=4, k=2, s=3, d=1: full = 9 + 2 = 11; target 12; total -1 -> LOWER (0, -1).
    shape, pads = _resolve((1, 1, 4), (1, 1, 2), strides=(3,), auto_pad="SAME_LOWER")
    assert shape == (12,) and pads == ((0, -1),)


def test_output_shape_generates_negative_pads_by_floor_division():
    # ONNX test_convtranspose_output_shape: s=(3, 2), i=3, k=3: full = (9, 7), target (10, 8),
    # total -1: begin = -1 - (-1 // 2) = 0, end = -1: the extra row/column is at the end.
    shape, pads = _resolve((1, 1, 3, 3), (1, 2, 3, 3), strides=(3, 2), output_shape=(10, 8))
    assert shape == (10, 8) and pads == ((0, -1), (0, -1))


def test_output_shape_ignores_explicit_pads():
    shape, pads = _resolve((1, 1, 3, 3), (1, 2, 3, 3), strides=(3, 2), output_shape=(10, 8),
                           pads=(5, 5, 5, 5))
    assert shape == (10, 8) and pads == ((0, -1), (0, -1))


def test_output_shape_with_same_upper_uses_the_upper_split():
    # full = 3*2 + 3 = 9, target 12: total -3 -> UPPER (-2, -1), LOWER (-1, -2).
    assert _resolve((1, 1, 3), (1, 1, 3), strides=(3,), output_shape=(12,),
                    auto_pad="SAME_UPPER")[1] == ((-2, -1),)
    assert _resolve((1, 1, 3), (1, 1, 3), strides=(3,), output_shape=(12,),
                    auto_pad="SAME_LOWER")[1] == ((-1, -2),)


def test_valid_means_zero_pads_and_output_padding_still_counts():
    # full = 2*(4-1) + 1 + (3-1)*2 + 1 = 12.
    shape, pads = _resolve((1, 1, 4), (1, 1, 3), strides=(2,), dilations=(2,),
                           output_padding=(1,), auto_pad="VALID")
    assert shape == (12,) and pads == ((0, 0),)


def test_explicit_pads_crop_each_side():
    # ONNX test_convtranspose_pads: s=(3, 2), pads (1, 2, 1, 2): (9-2, 7-4) = (7, 3).
    shape, pads = _resolve((1, 1, 3, 3), (1, 2, 3, 3), strides=(3, 2), pads=(1, 2, 1, 2))
    assert shape == (7, 3) and pads == ((1, 1), (2, 2))


def test_geometry_imports_without_the_compiled_kernels():
    code = (
        "import sys; sys.modules['convt._kernels'] = None\n"
        "from convt import ConvTranspose\n"
        "print(ConvTranspose(strides=(2,), auto_pad='SAME_LOWER').pads_for((1, 1, 4), (1, 1, 3)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "((1, 0),)"


# ------------------------------------------------------------------ other texts' resolvers

from convt._geometry import build, resolve_onednn, resolve_openvino  # noqa: E402


@pytest.mark.parametrize(
    "x_shape, w_shape, params, output_shape, pads, expected",
    [
        # OpenVINO ConvolutionBackpropData-1, example 1: 2*223 + 3 - 1 - 1 = 447
        ((1, 20, 224, 224), (20, 10, 3, 3),
         dict(strides=(2, 2), dilations=(1, 1), auto_pad="explicit", pads_begin=(1, 1),
              pads_end=(1, 1), output_padding=(0, 0)), None, ((1, 1), (1, 1)), (447, 447)),
        # example 2: 3*1 + 3 + 2 = 8
        ((1, 20, 2, 2), (20, 10, 3, 3),
         dict(strides=(3, 3), dilations=(1, 1), auto_pad="explicit", pads_begin=(0, 0),
              pads_end=(0, 0), output_padding=(2, 2)), None, ((0, 0), (0, 0)), (8, 8)),
        # example 3: output_shape 450 with valid: total 226 - 450 = -224, split -112/-112
        ((1, 20, 224, 224), (20, 10, 3, 3),
         dict(strides=(1, 1), dilations=(1, 1), auto_pad="valid", pads_begin=(1, 1),
              pads_end=(1, 1), output_padding=(0, 0)), (450, 450),
         ((-112, -112), (-112, -112)), (450, 450)),
    ],
)
def test_openvino_examples(x_shape, w_shape, params, output_shape, pads, expected):
    geometry = resolve_openvino(x_shape, w_shape, output_shape=output_shape, **params)
    assert geometry.output_shape == expected
    assert tuple(zip(geometry.pads_begin, geometry.pads_end)) == pads


def test_onednn_formulas():
    # SAME: total = (k - 1) * d + 1 - s = 3 * 1 + 1 - 2 = 2 -> output i * s + output_padding
    geometry = resolve_onednn((1, 8, 16, 16), (8, 4, 4, 4), strides=(2, 2), dilations=(1, 1),
                              auto_pad="SAME_UPPER", pads_begin=(0, 0), pads_end=(0, 0),
                              output_padding=(1, 0))
    assert geometry.output_shape == (33, 32)
    assert geometry.pads_begin == (1, 1) and geometry.pads_end == (1, 1)
    # explicit: s(i - 1) + a + (k - 1)d + 1 - pads_begin - pads_end = 30 + 0 + 7 - 1 - 2 = 34
    geometry = resolve_onednn((1, 8, 16), (8, 4, 4), strides=(2,), dilations=(2,),
                              auto_pad="None", pads_begin=(1,), pads_end=(2,), output_padding=None)
    assert geometry.output_shape == (34,)


def test_build_refuses_an_empty_output():
    with pytest.raises(ValueError, match="empty output on spatial axis 0"):
        build((2,), (1,), (1,), (1,), (0,), (1,), (1,))


def test_front_ends_resolve_without_the_compiled_kernels():
    code = (
        "import sys; sys.modules['convt._kernels'] = None\n"
        "from convt.openvino import ConvolutionBackpropData\n"
        "from convt.onednn import ConvTranspose\n"
        "print(ConvolutionBackpropData(strides=2, pads_begin=(1,), pads_end=(1,), dilations=1)"
        ".output_shape_for((1, 1, 4), (1, 1, 3)),\n"
        "      ConvTranspose(strides=2, pads_begin=(0,), pads_end=(0,), dilations=1,"
        " auto_pad='SAME_UPPER').pads_for((1, 4, 1), (3, 1, 1)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "(1, 1, 7) ((0, 1),)"
