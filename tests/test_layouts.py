"""Channels-last data and XOI/OIX filters on the core estimator: exact on every engine,
read and written in place (no transposed copy), out= in the user's layout."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from _conv_helpers import assert_conv_matches_reference
from _helpers import DTYPES, ENGINES, assert_matches_reference, examples, run_engine
from convt import Conv, ConvTranspose, _engine, conv_transpose, explain


def to_layout(x, w, data_format, filter_format):
    """x (N, C, D...) and w (C, M/g, k...) rearranged (copied) into the given layouts."""
    if data_format == "NXC":
        x = np.ascontiguousarray(np.moveaxis(x, 1, -1))
    if filter_format == "XOI":
        w = np.ascontiguousarray(np.moveaxis(w, (0, 1), (-1, -2)))
    elif filter_format == "OIX":
        w = np.ascontiguousarray(np.swapaxes(w, 0, 1))
    return x, w


CASES = {
    "k4s2_exact_stacks": ((2, 6, 7, 16), (6, 7, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    "k3s2_residue_pairs": ((1, 8, 5, 37), (8, 3, 3, 3),
                           dict(strides=(2, 2), pads=(1, 1, 1, 1), output_padding=(1, 1), group=2)),
    "depthwise_direct": ((1, 6, 9, 9), (6, 1, 2, 2), dict(strides=(2, 2), group=6)),
    "single_channel": ((1, 1, 9, 11), (1, 1, 3, 3), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    "one_out_channel": ((1, 5, 6, 6), (5, 1, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    "1d": ((2, 3, 32), (3, 8, 4), dict(strides=(2,), pads=(1, 1))),
    "3d_negative_pads": ((1, 4, 3, 3, 5), (4, 6, 2, 3, 2),
                         dict(strides=(2, 1, 3), output_shape=(8, 6, 17))),
}


@pytest.mark.parametrize("formats", [("NXC", "XOI"), ("NXC", "IOX"), ("NCX", "XOI"),
                                     ("NXC", "OIX")], ids="-".join)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_engine_in_every_layout(name, engine, formats):
    x_shape, w_shape, params = CASES[name]
    rng = np.random.default_rng(len(name))
    for dtype in DTYPES:
        x = rng.standard_normal(x_shape).astype(dtype)
        w = rng.standard_normal(w_shape).astype(dtype)
        b = rng.standard_normal(w_shape[1] * params.get("group", 1)).astype(dtype)
        x, w = to_layout(x, w, *formats)
        params = dict(params, data_format=formats[0], filter_format=formats[1])
        for threads in (1, 2):
            y = run_engine(engine, x, w, b, num_threads=threads, **params)
            assert y.flags.c_contiguous
            assert_matches_reference(y, x, w, b, **params)


@pytest.mark.parametrize("name", sorted(CASES))
def test_channels_last_equals_channels_first_bitwise_per_engine(name):
    # Same engine, same sums: the layout changes addresses only.
    x_shape, w_shape, params = CASES[name]
    rng = np.random.default_rng(1)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    for engine in ENGINES:
        expected = run_engine(engine, x, w, **params)
        xl, wl = to_layout(x, w, "NXC", "XOI")
        y = run_engine(engine, xl, wl, data_format="NXC", filter_format="XOI", **params)
        np.testing.assert_array_equal(np.moveaxis(y, -1, 1), expected, err_msg=engine)


def test_the_engine_reads_and_writes_the_users_memory(monkeypatch):
    # No transposed copy of x or y: the engine gets views of the user's x and w and
    # writes the returned array through a view.
    seen = {}
    original = _engine.execute

    def spy(call, x, w, b, y, *args, **kwargs):
        seen.update(x=x, w=w, y=y)
        return original(call, x, w, b, y, *args, **kwargs)

    monkeypatch.setattr(_engine, "execute", spy)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 9, 10, 6)).astype(np.float32)
    w = rng.standard_normal((4, 4, 5, 6)).astype(np.float32)
    y = ConvTranspose(strides=2, pads=(1, 1, 1, 1), data_format="NXC",
                      filter_format="XOI").apply(x, w)
    assert seen["x"].shape == (2, 6, 9, 10) and np.shares_memory(seen["x"], x)
    assert seen["w"].shape == (6, 5, 4, 4) and np.shares_memory(seen["w"], w)
    assert seen["y"].shape == (2, 5, 18, 20) and np.shares_memory(seen["y"], y)
    assert y.shape == (2, 18, 20, 5) and y.flags.c_contiguous


def test_memory_is_bounded_as_for_channels_first():
    # Peak allocations of an NXC call stay within those of the NCX call plus a margin
    # far below the size of x or y (a transposed copy would add a whole array), once
    # the product buffer the NXC plan needs and the NCX plan does not is counted: its
    # exact stacks fill a product buffer (y's rows are strided), the NCX call's store
    # straight into y and reserve none.
    import tracemalloc

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 32, 64, 64)).astype(np.float32)     # 512 KiB
    w = rng.standard_normal((32, 16, 4, 4)).astype(np.float32)
    params = dict(strides=(2, 2), pads=(1, 1, 1, 1), num_threads=1)
    xl, wl = to_layout(x, w, "NXC", "XOI")
    peaks, products = [], []
    for args, extra in (((x, w), {}), ((xl, wl), dict(data_format="NXC", filter_format="XOI"))):
        layer = ConvTranspose(**params, **extra)
        layer.apply(*args)                                           # plans and caches
        tracemalloc.start()
        y = layer.apply(*args)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        plan = explain(layer, args[0].shape, args[1].shape, args[0].dtype).plan
        products.append(plan.product_capacity * args[0].itemsize)
    assert peaks[1] <= peaks[0] + (products[1] - products[0]) + x.nbytes // 8, (peaks, products)


def test_out_is_in_the_data_format():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 5, 5, 3))
    w = rng.standard_normal((3, 4, 2, 2))
    layer = ConvTranspose(strides=2, data_format="NXC")
    shape = layer.output_shape_for(x.shape, w.shape)
    assert shape == (1, 10, 10, 4)
    out = np.full(shape, np.nan)
    assert layer.apply(x, w, out=out) is out
    assert_matches_reference(out, x, w, None, strides=2, data_format="NXC")
    with pytest.raises(ValueError, match=r"shape \(1, 10, 10, 4\)"):
        layer.apply(x, w, out=np.empty((1, 4, 10, 10)))
    with pytest.raises(ValueError, match="C-contiguous"):
        layer.apply(x, w, out=np.empty((1, 4, 10, 10)).transpose(0, 2, 3, 1))


def test_shapes_and_pads_are_in_the_users_layout():
    layer = ConvTranspose(strides=(2, 3), auto_pad="SAME_LOWER", data_format="NXC",
                          filter_format="XOI")
    # x (N, H, W, C) = (2, 5, 7, 8), w (kH, kW, O, I) = (3, 4, 6, 8)
    assert layer.output_shape_for((2, 5, 7, 8), (3, 4, 6, 8)) == (2, 10, 21, 6)
    assert layer.pads_for((2, 5, 7, 8), (3, 4, 6, 8)) == ((1, 0), (1, 0))


@st.composite
def layout_cases(draw):
    ndim = draw(st.integers(1, 3))
    group = draw(st.integers(1, 3))
    cg, mg = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    if draw(st.integers(0, 3)) == 0:
        # depthwise with enough channels for the channels-last vector rows
        group, cg, mg = draw(st.sampled_from([8, 9, 17, 33])), 1, 1
    axes = lambda low, high: st.lists(st.integers(low, high), min_size=ndim, max_size=ndim)  # noqa: E731
    inputs, kernel = draw(axes(1, 6)), draw(axes(1, 4))
    strides = draw(axes(1, 3))
    params = dict(strides=strides, dilations=draw(axes(1, 2)), group=group,
                  pads=draw(axes(0, 1)) * 2,
                  data_format=draw(st.sampled_from(["NXC", "NCX"])),
                  filter_format=draw(st.sampled_from(["XOI", "IOX", "OIX"])))
    dtype = draw(st.sampled_from(DTYPES))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((draw(st.integers(1, 2)), cg * group, *inputs)).astype(dtype)
    w = rng.standard_normal((cg * group, mg, *kernel)).astype(dtype)
    b = rng.standard_normal(mg * group).astype(dtype)
    x, w = to_layout(x, w, params["data_format"], params["filter_format"])
    try:
        ConvTranspose(**params).output_shape_for(x.shape, w.shape)
    except ValueError:
        assume(False)  # pads that leave an empty output
    return x, w, b, params


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=examples(25))
@given(case=layout_cases())
def test_layouts_match_reference(engine, case):
    x, w, b, params = case
    assert_matches_reference(run_engine(engine, x, w, b, **params), x, w, b, **params)


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=examples(10))
@given(case=layout_cases())
def test_layouts_across_tiles(engine, case, small_tiles):
    # Tiles of a few positions and K chunks of a few rows, in every layout.
    x, w, b, params = case
    assert_matches_reference(run_engine(engine, x, w, b, **params), x, w, b, **params)


def test_format_names_of_other_libraries_get_a_hint():
    with pytest.raises(ValueError, match=r"'data_format'.*NHWC is 'NXC' here.*got 'NHWC'"):
        ConvTranspose(data_format="NHWC")
    with pytest.raises(ValueError, match=r"'filter_format'.*in capitals: 'XOI'.*got 'xoi'"):
        ConvTranspose(filter_format="xoi")


def test_channels_last_views_of_any_layout():
    # An NXC view of channels-first memory (and reversed axes) is read in place too.
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 6, 5)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    view = np.moveaxis(x, 1, -1)[:, ::-1]
    y = conv_transpose(view, w, strides=2, data_format="NXC")
    assert_matches_reference(y, view, w, None, strides=2, data_format="NXC")


# Channels-last depthwise layers run rows of every channel with the channels as
# vector lanes: channel counts around the vector widths (masked tails, one and
# two vector blocks), every axis count, strides, dilations, output padding and
# output_shape, and for Conv decimating strides.
CHANNEL_ROW_CASES = {
    "1d_k3s3_dilated": ((2, 9, 23), (9, 1, 3),
                        dict(strides=(3,), dilations=(2,), pads=(2, 1), group=9)),
    "2d_k4s2_17ch": ((1, 17, 9, 10), (17, 1, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1),
                                                          group=17, output_padding=(1, 0))),
    "2d_k3s1_40ch": ((2, 40, 6, 7), (40, 1, 3, 3), dict(pads=(1, 1, 1, 1), group=40)),
    "3d_k2x3x2_8ch": ((1, 8, 3, 4, 5), (8, 1, 2, 3, 2),
                      dict(strides=(1, 2, 3), output_shape=(4, 8, 17), group=8)),
}


@pytest.mark.parametrize("name", sorted(CHANNEL_ROW_CASES))
def test_channels_last_depthwise_rows_match_the_reference(name):
    x_shape, w_shape, params = CHANNEL_ROW_CASES[name]
    rng = np.random.default_rng(len(name))
    params = dict(params, data_format="NXC", filter_format="XOI")
    for dtype in DTYPES:
        x = rng.standard_normal(x_shape).astype(dtype)
        w = rng.standard_normal(w_shape).astype(dtype)
        b = rng.standard_normal(w_shape[0]).astype(dtype)
        x, w = to_layout(x, w, "NXC", "XOI")
        layer = ConvTranspose(**params)
        assert explain(layer, x.shape, w.shape, dtype).decision.channel_vectors
        for data in (x, np.pad(x, [(0, 0)] * (x.ndim - 2) + [(0, 3), (0, 0)])[..., ::2, :]):
            # contiguous rows, and rows whose positions are not adjacent (a view)
            for threads in (1, 2):
                y = ConvTranspose(num_threads=threads, **params).apply(data, w, b)
                assert_matches_reference(y, data, w, b, **params)


@pytest.mark.parametrize("strides", [(1, 1), (2, 3)])
def test_channels_last_depthwise_conv_rows_match_the_reference(strides):
    rng = np.random.default_rng(sum(strides))
    params = dict(strides=strides, pads=(1, 2, 0, 1), dilations=(1, 2), group=19,
                  data_format="NXC", filter_format="XIO")
    for dtype in DTYPES:
        x = rng.standard_normal((2, 11, 13, 19)).astype(dtype)
        w = rng.standard_normal((3, 3, 1, 19)).astype(dtype)      # XIO: (k..., C/g, M)
        b = rng.standard_normal(19).astype(dtype)
        layer = Conv(**params)
        assert explain(layer, x.shape, w.shape, dtype).decision.channel_vectors
        y = layer.apply(x, w, b)
        assert_conv_matches_reference(np.moveaxis(y, -1, 1), np.moveaxis(x, -1, 1),
                                      np.moveaxis(w, (-1, -2), (0, 1)), b,
                                      **dict(params, data_format="NCX", filter_format="OIX"))


def test_channels_last_depthwise_rows_equal_the_channel_by_channel_rows():
    # the same sums in the same order: bit-identical to the direct engine's
    # channel-by-channel rows on the same data
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 7, 9, 24)).astype(np.float32)
    w = rng.standard_normal((3, 4, 1, 24)).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    params = dict(strides=(2, 3), pads=(1, 0, 1, 2), group=24, data_format="NXC",
                  filter_format="XOI")
    vectors = run_engine("direct", x, w, b, **params)
    channel_by_channel = run_engine("direct", x, w, b, overrides=dict(channel_vectors=False),
                                    **params)
    np.testing.assert_array_equal(vectors, channel_by_channel)
