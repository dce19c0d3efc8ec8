"""convt.openvino: ConvolutionBackpropData-1 and its grouped twin, as the OpenVINO text says.

The pads rules are transcribed below from openvino-ConvolutionBackpropData-1.txt,
independently of convt's geometry code; the results are held against the
float64 reference with those pads, and against the OpenVINO runtime (skipped
when absent) where the runtime follows its text.
"""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from _helpers import assert_matches_reference, examples
from convt import _geometry
from convt.openvino import ConvolutionBackpropData, GroupConvolutionBackpropData


def text_pads(inputs, kernel, strides, dilations, auto_pad, pads_begin, pads_end,
              output_padding, output_shape):
    """(pads_begin, pads_end) exactly as the text's pseudo-code writes them."""
    if output_shape is None:
        if auto_pad != "explicit":           # "if auto_pads != None: pads = 0"
            return [0] * len(inputs), [0] * len(inputs)
        return list(pads_begin), list(pads_end)
    begin, end = [], []
    for x, k, s, d, a, o in zip(inputs, kernel, strides, dilations, output_padding,
                                output_shape):
        total = s * (x - 1) + ((k - 1) * d + 1) - o + a
        if auto_pad != "same_upper":
            begin.append(total // 2)
            end.append(total - begin[-1])
        else:
            end.append(total // 2)
            begin.append(total - end[-1])
    return begin, end


def text_reference(data, filter, params, output_shape=None, grouped=False):
    """The float64 reference with the text's pads (negative pads are zero margins)."""
    count = data.ndim - 2
    group = filter.shape[0] if grouped else 1
    weights = filter.reshape((-1,) + filter.shape[2:]) if grouped else filter
    output_padding = params.get("output_padding") or [0] * count
    begin, end = text_pads(data.shape[2:], weights.shape[2:], params["strides"],
                           params["dilations"], params.get("auto_pad", "explicit"),
                           params["pads_begin"], params["pads_end"], output_padding,
                           output_shape)
    return dict(strides=params["strides"], dilations=params["dilations"], group=group,
                output_padding=output_padding, pads=list(begin) + list(end)), weights


# ---------------------------------------------------------------- the text's examples

def test_example_1_explicit_pads():
    # 1x20x224x224, weights 20x10x3x3, strides 2, pads 1: 2*223 + 3 - 2 = 447.
    layer = ConvolutionBackpropData(strides=(2, 2), pads_begin=(1, 1), pads_end=(1, 1),
                                    dilations=(1, 1), output_padding=(0, 0), auto_pad="explicit")
    assert layer.output_shape_for((1, 20, 224, 224), (20, 10, 3, 3)) == (1, 10, 447, 447)
    y = layer.apply(np.ones((1, 20, 224, 224), np.float32), np.ones((20, 10, 3, 3), np.float32))
    assert y.shape == (1, 10, 447, 447)
    # interior even positions see 20 channels x 1 tap (stride 2, k 3, pads 1): o = 2i + k - 1
    # o = 2i + k - 1: output 1 gets taps k = 0 and 2 on each axis (20 channels x 4), output 2
    # only k = 1 (20 x 1)
    assert y[0, 0, 1, 1] == 80 and y[0, 0, 2, 2] == 20


def test_example_2_output_padding():
    # 1x20x2x2, strides 3, output_padding 2: 3*1 + 3 + 2 = 8.
    layer = ConvolutionBackpropData(strides=(3, 3), pads_begin=(0, 0), pads_end=(0, 0),
                                    dilations=(1, 1), output_padding=(2, 2), auto_pad="explicit")
    data = np.ones((1, 20, 2, 2), np.float32)
    y = layer.apply(data, np.ones((20, 10, 3, 3), np.float32))
    assert y.shape == (1, 10, 8, 8)
    assert not y[..., 6:, :].any() and not y[..., :, 6:].any()  # output_padding: past the data


def test_example_3_output_shape_input():
    # 1x20x224x224, strides 1, auto_pad valid, output_shape [450, 450]: total
    # 223 + 3 - 450 = -224, split -112 / -112 (pads_begin/pads_end 1 are ignored).
    layer = ConvolutionBackpropData(strides=(1, 1), pads_begin=(1, 1), pads_end=(1, 1),
                                    dilations=(1, 1), output_padding=(0, 0), auto_pad="valid")
    shapes = ((1, 20, 224, 224), (20, 10, 3, 3))
    assert layer.output_shape_for(*shapes, output_shape=[450, 450]) == (1, 10, 450, 450)
    assert layer.pads_for(*shapes, output_shape=np.array([450, 450])) == ((-112, -112),) * 2
    y = layer.apply(np.ones(shapes[0], np.float32), np.ones(shapes[1], np.float32),
                    output_shape=np.array([450, 450], np.int32))
    assert y.shape == (1, 10, 450, 450)
    assert not y[..., :112, :].any() and not y[..., 338:, :].any()
    assert y[0, 0, 112, 112] == 20


@pytest.mark.parametrize(
    "auto_pad, output_shape, expected",
    [
        # full 7 (x 3, k 3, s 2); without output_shape only 'explicit' uses the pads (1, 2)
        ("explicit", None, ((1, 2),)),
        ("same_upper", None, ((0, 0),)),
        ("same_lower", None, ((0, 0),)),
        ("valid", None, ((0, 0),)),
        # output_shape 4: total 3; same_upper: end = 3 // 2 = 1, begin 2 (the odd unit first)
        ("same_upper", [4], ((2, 1),)),
        ("same_lower", [4], ((1, 2),)),
        ("explicit", [4], ((1, 2),)),
        ("valid", [4], ((1, 2),)),
        # output_shape 10: total -3, floor: same_upper end -2, begin -1; others begin -2
        ("same_upper", [10], ((-1, -2),)),
        ("explicit", [10], ((-2, -1),)),
    ],
)
def test_pads_rules(auto_pad, output_shape, expected):
    layer = ConvolutionBackpropData(strides=(2,), pads_begin=(1,), pads_end=(2,), dilations=(1,),
                                    auto_pad=auto_pad)
    assert layer.pads_for((1, 1, 3), (1, 1, 3), output_shape=output_shape) == expected
    full = _geometry.full_sizes((3,), (3,), (2,), (1,), (0,))
    assert _geometry.openvino_pads(full, auto_pad, (1,), (2,), output_shape) == (
        tuple(p[0] for p in expected), tuple(p[1] for p in expected))


def test_output_padding_has_no_upper_bound():
    # "Range of values: non-negative integer values": 5 with stride 2 adds zeros.
    x = np.array([[[1.0, 2.0, 3.0]]])
    layer = ConvolutionBackpropData(strides=2, pads_begin=(0,), pads_end=(0,), dilations=1,
                                    output_padding=(5,))
    np.testing.assert_array_equal(layer.apply(x, np.ones((1, 1, 3))).ravel(),
                                  [1, 1, 3, 2, 5, 3, 3, 0, 0, 0, 0, 0])


def test_grouped_filter_layout():
    rng = np.random.default_rng(3)
    data = rng.standard_normal((2, 6, 4, 5))
    filter = rng.standard_normal((3, 2, 4, 3, 2))          # G, C_IN/G, C_OUT/G, k...
    params = dict(strides=(2, 1), pads_begin=(1, 0), pads_end=(0, 1), dilations=(1, 2))
    y = GroupConvolutionBackpropData(**params).apply(data, filter)
    assert y.shape == (2, 12, 8, 6)
    for g in range(3):   # each group is a ConvolutionBackpropData of its channels
        alone = ConvolutionBackpropData(**params).apply(data[:, 2 * g:2 * g + 2], filter[g])
        np.testing.assert_allclose(y[:, 4 * g:4 * g + 4], alone, rtol=1e-13, atol=1e-13)


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize(
    "params, error, pattern",
    [
        (dict(auto_pad="SAME_UPPER"), ValueError,
         r"'auto_pad' parameter of ConvolutionBackpropData.*lower case: 'same_upper'"),
        (dict(auto_pad="NOTSET"), ValueError, r"NOTSET is 'explicit' here"),
        (dict(pads_begin=(-1, 0)), ValueError, r"'pads_begin' parameter of ConvolutionBackpropData"
                                               r" must be.*>= 0.*got \(-1, 0\)"),
        (dict(strides=None), TypeError, r"'strides'.*an int >= 1.*got None"),
        (dict(strides=(1, 1, 1)), ValueError, r"same number of spatial axes.*strides has 3"),
        (dict(dilations=(0, 1)), ValueError, r"'dilations'.*>= 1"),
        (dict(output_padding=(-1, 0)), ValueError, r"'output_padding'.*>= 0"),
        (dict(strides=(1,) * 4, pads_begin=(0,) * 4, pads_end=(0,) * 4, dilations=(1,) * 4),
         ValueError, r"1-D, 2-D or 3-D"),
    ],
)
def test_bad_parameters(params, error, pattern):
    base = dict(strides=(2, 2), pads_begin=(0, 0), pads_end=(0, 0), dilations=(1, 1))
    with pytest.raises(error, match=pattern):
        ConvolutionBackpropData(**{**base, **params})


def test_unknown_keyword_suggests_the_name():
    with pytest.raises(TypeError, match=r"'pad_begin'.*Did you mean 'pads_begin'\?"):
        ConvolutionBackpropData(strides=1, pad_begin=(0,), pads_end=(0,), dilations=1)


def test_required_attributes():
    with pytest.raises(TypeError, match="pads_end"):
        ConvolutionBackpropData(strides=1, pads_begin=(0,), dilations=1)


@pytest.mark.parametrize(
    "cls, data_shape, filter_shape, output_shape, pattern",
    [
        (ConvolutionBackpropData, (1, 2, 3, 3, 3, 3), (2, 2, 1, 1, 1, 1), None,
         r"data must have rank 3, 4 or 5"),
        (ConvolutionBackpropData, (1, 2, 4, 4), (2, 1, 3), None, r"filter must have rank 4"),
        (ConvolutionBackpropData, (1, 2, 4, 4), (3, 1, 3, 3), None,
         r"filter.shape\[0\] must equal the number of input channels data.shape\[1\]=2"),
        (ConvolutionBackpropData, (1, 2, 4, 4), (2, 1, 3, 3), [8], r"output_shape.*one value per "
                                                                   r"spatial axis \(2 here"),
        (ConvolutionBackpropData, (1, 2, 4, 4), (2, 1, 3, 3), [0, 8], r"'output_shape'.*>= 1"),
        (GroupConvolutionBackpropData, (1, 6, 4, 4), (4, 2, 1, 3, 3), None,
         r"data.shape\[1\] \(C_IN\) must equal G \* C_IN/G"),
        (GroupConvolutionBackpropData, (1, 6, 4, 4), (3, 2, 3, 3), None,
         r"filter must have rank 5 \(\[G, C_IN/G, C_OUT/G"),
    ],
)
def test_bad_shapes(cls, data_shape, filter_shape, output_shape, pattern):
    layer = cls(strides=(2, 2), pads_begin=(0, 0), pads_end=(0, 0), dilations=(1, 1))
    with pytest.raises(ValueError, match=pattern):
        layer.apply(np.zeros(data_shape, np.float32), np.zeros(filter_shape, np.float32),
                    output_shape=output_shape)


def test_output_shape_must_be_integers():
    layer = ConvolutionBackpropData(strides=1, pads_begin=None, pads_end=None, dilations=1)
    with pytest.raises(TypeError, match="integer type"):
        layer.apply(np.ones((1, 1, 3)), np.ones((1, 1, 2)), output_shape=np.array([4.0]))


# ---------------------------------------------------------------- properties and the runtime

@st.composite
def openvino_cases(draw, grouped=False):
    ndim = draw(st.integers(1, 3))
    group = draw(st.integers(1, 3)) if grouped else 1
    cg, mg = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    inputs = draw(st.lists(st.integers(1, 5), min_size=ndim, max_size=ndim))
    kernel = draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim))
    axes = lambda low, high: st.lists(st.integers(low, high), min_size=ndim, max_size=ndim)  # noqa: E731
    params = dict(strides=draw(axes(1, 3)), dilations=draw(axes(1, 2)),
                  pads_begin=draw(axes(0, 3)), pads_end=draw(axes(0, 3)),
                  output_padding=draw(axes(0, 4)),
                  auto_pad=draw(st.sampled_from(["explicit", "same_upper", "same_lower",
                                                 "valid"])))
    output_shape = draw(st.none() | axes(1, 20))
    dtype = draw(st.sampled_from([np.float16, np.float32, np.float64]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    data = rng.standard_normal((draw(st.integers(1, 2)), cg * group, *inputs)).astype(dtype)
    shape = (group, cg, mg, *kernel) if grouped else (cg, mg, *kernel)
    filter = rng.standard_normal(shape).astype(dtype)
    cls = GroupConvolutionBackpropData if grouped else ConvolutionBackpropData
    try:
        cls(**params).output_shape_for(data.shape, filter.shape, output_shape)
    except ValueError:
        assume(False)
    return cls, data, filter, params, output_shape


@settings(max_examples=examples(60))
@given(case=st.booleans().flatmap(lambda grouped: openvino_cases(grouped)))
def test_matches_the_text_on_the_reference(case):
    cls, data, filter, params, output_shape = case
    y = cls(**params).apply(data, filter, output_shape=output_shape)
    reference_params, weights = text_reference(data, filter, params, output_shape,
                                               grouped=cls is GroupConvolutionBackpropData)
    assert_matches_reference(y, data, weights, None, **reference_params)


def runtime_begin(inputs, kernel, params, output_shape, grouped):
    """pads_begin of the OpenVINO 2026.4 runtime when it is given output_shape: it keeps
    pads_begin for 'explicit' (0 for 'valid', and for 'explicit' in the grouped
    operator) and crops or extends the end; for same_* it splits the total clamped at 0
    (observed; specs README item 5)."""
    begin = []
    for axis, (x, k, s, d, a, o) in enumerate(zip(inputs, kernel, params["strides"],
                                                  params["dilations"], params["output_padding"],
                                                  output_shape)):
        total = max(0, s * (x - 1) + (k - 1) * d + 1 + a - o)
        begin.append({"explicit": 0 if grouped else params["pads_begin"][axis], "valid": 0,
                      "same_upper": total - total // 2,
                      "same_lower": total // 2}[params["auto_pad"]])
    return begin


def openvino_run(data, filter, params, output_shape, grouped):
    ov = pytest.importorskip("openvino")
    import openvino.opset1 as ops

    node_data = ops.parameter(list(data.shape), ov.Type.f32)
    build = ops.group_convolution_backprop_data if grouped else ops.convolution_backprop_data
    extra = {} if output_shape is None else {
        "output_shape": ops.constant(np.array(output_shape, np.int64))}
    node = build(node_data, ops.constant(filter), strides=list(params["strides"]),
                 pads_begin=list(params["pads_begin"]), pads_end=list(params["pads_end"]),
                 dilations=list(params["dilations"]), auto_pad=params["auto_pad"],
                 output_padding=list(params["output_padding"]), **extra)
    compiled = ov.Core().compile_model(ov.Model([node], [node_data]), "CPU",
                                       {"INFERENCE_PRECISION_HINT": "f32"})
    return compiled([data])[0]


def _runtime_cases(count=40):
    rng = np.random.default_rng(20261122)
    cases = []
    while len(cases) < count:
        ndim = int(rng.integers(1, 4))
        grouped = bool(rng.integers(0, 2))
        # the runtime cannot build GroupConvolutionBackpropData with G = 1
        group = int(rng.integers(2, 4)) if grouped else 1
        cg, mg = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        inputs = rng.integers(1, 6, ndim)
        kernel = rng.integers(1, 5, ndim)
        params = dict(strides=rng.integers(1, 4, ndim).tolist(),
                      dilations=rng.integers(1, 3, ndim).tolist(),
                      pads_begin=rng.integers(0, 3, ndim).tolist(),
                      pads_end=rng.integers(0, 3, ndim).tolist(),
                      output_padding=rng.integers(0, 4, ndim).tolist(),
                      auto_pad=str(rng.choice(["explicit", "same_upper", "same_lower", "valid"])))
        output_shape = rng.integers(1, 20, ndim).tolist() if rng.integers(0, 2) else None
        data = rng.standard_normal((int(rng.integers(1, 3)), cg * group, *inputs)).astype(
            np.float32)
        shape = (group, cg, mg, *kernel) if grouped else (cg, mg, *kernel)
        filter = rng.standard_normal(shape).astype(np.float32)
        cls = GroupConvolutionBackpropData if grouped else ConvolutionBackpropData
        try:
            cls(**params).output_shape_for(data.shape, filter.shape, output_shape)
        except ValueError:
            continue
        cases.append((cls, data, filter, params, output_shape))
    return cases


@pytest.mark.parametrize("index", range(40))
def test_against_the_openvino_runtime(index):
    pytest.importorskip("openvino")
    cls, data, filter, params, output_shape = _runtime_cases()[index]
    grouped = cls is GroupConvolutionBackpropData
    layer = cls(**params)
    y = layer.apply(data, filter, output_shape=output_shape)
    runtime = openvino_run(data, filter, params, output_shape, grouped)
    assert runtime.shape == y.shape
    kernel = filter.shape[-data.ndim + 2:]
    text_begin = [b for b, _ in layer.pads_for(data.shape, filter.shape, output_shape)]
    if output_shape is None or runtime_begin(data.shape[2:], kernel, params, output_shape,
                                             grouped) == text_begin:
        # the runtime follows its text here
        np.testing.assert_allclose(y, runtime, rtol=1e-4, atol=1e-4)
        return
    # The runtime departs from its text (specs README item 5): convt follows the text
    # (test_matches_the_text_on_the_reference), and the runtime is the same operator
    # with its own pads_begin, which the model above predicts.
    reference_params, weights = text_reference(data, filter, params, output_shape, grouped)
    assert_matches_reference(y, data, weights, None, **reference_params)
    begin = runtime_begin(data.shape[2:], kernel, params, output_shape, grouped)
    full = [s * (x - 1) + (k - 1) * d + 1 + a for x, k, s, d, a in zip(
        data.shape[2:], kernel, params["strides"], params["dilations"], params["output_padding"])]
    reference_params["pads"] = begin + [f - b - o for f, b, o in zip(full, begin, output_shape)]
    from convt._reference import reference_conv_transpose

    np.testing.assert_allclose(runtime, reference_conv_transpose(data, weights, **reference_params),
                               rtol=1e-4, atol=1e-4)


def test_the_runtime_keeps_pads_begin_with_output_shape():
    # The documented departure, pinned: if a future OpenVINO follows its text here,
    # this test says so and the docs can drop the note.
    pytest.importorskip("openvino")
    data = np.array([[[1.0, 2.0, 3.0]]], np.float32)
    filter = np.ones((1, 1, 3), np.float32)                       # full: 1 1 3 2 5 3 3
    params = dict(strides=[2], pads_begin=[1], pads_end=[0], dilations=[1], output_padding=[0],
                  auto_pad="explicit")
    runtime = openvino_run(data, filter, params, [6], grouped=False)
    y = ConvolutionBackpropData(**params).apply(data, filter, output_shape=[6])
    np.testing.assert_array_equal(y.ravel(), [1, 1, 3, 2, 5, 3])   # text: total 1, begin 0
    np.testing.assert_array_equal(runtime.ravel(), [1, 3, 2, 5, 3, 3])
