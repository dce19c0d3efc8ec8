"""convt.dask: every chunking gives the in-memory result, bit for bit."""

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import convt
from _upsampling import assert_same_bits

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
import convt.dask  # noqa: E402

EXAMPLES = max(10, int(os.environ.get("CONVT_HYPOTHESIS_EXAMPLES", "250")) // 5)
DTYPES = (np.float16, np.float32, np.float64)


def assert_same(lazy, expected):
    assert_same_bits(lazy.compute(scheduler="synchronous"), expected)


def chunking(draw, shape, fixed=()):
    return tuple(size if axis in fixed else draw(st.integers(1, max(1, size)))
                 for axis, size in enumerate(shape))


@st.composite
def conv_cases(draw):
    ndim = draw(st.integers(1, 3))
    group, cg, mg = draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 2))
    sizes = draw(st.lists(st.integers(1, 12 if ndim < 3 else 6), min_size=ndim, max_size=ndim))
    kernel = draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim))
    strides = draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim))
    dilations = draw(st.lists(st.integers(1, 2), min_size=ndim, max_size=ndim))
    params = dict(strides=strides, dilations=dilations, group=group)
    how = draw(st.sampled_from(["pads", "auto_pad", "output_shape", "output_padding"]))
    if how == "pads":
        params["pads"] = draw(st.lists(st.integers(0, 3), min_size=2 * ndim, max_size=2 * ndim))
    elif how == "auto_pad":
        params["auto_pad"] = draw(st.sampled_from(["SAME_UPPER", "SAME_LOWER", "VALID"]))
    elif how == "output_shape":  # larger outputs make negative pads: zero margins
        params["output_shape"] = draw(st.lists(st.integers(1, 40), min_size=ndim, max_size=ndim))
    else:
        params["output_padding"] = [draw(st.integers(0, max(s, d) - 1))
                                    for s, d in zip(strides, dilations)]
    x_shape = (2, cg * group, *sizes)
    chunks = chunking(draw, x_shape, fixed=(1,))
    dtype = draw(st.sampled_from(DTYPES))
    bias = draw(st.booleans())
    seed = draw(st.integers(0, 2**16))
    return x_shape, (cg * group, mg, *kernel), params, chunks, np.dtype(dtype), bias, seed


@settings(max_examples=EXAMPLES)
@given(conv_cases())
def test_conv_transpose_blocks_equal_the_in_memory_result(case):
    x_shape, w_shape, params, chunks, dtype, bias, seed = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    b = rng.standard_normal(w_shape[1] * params["group"]).astype(dtype) if bias else None
    try:
        expected = convt.conv_transpose(x, w, b, **params)
    except ValueError:  # e.g. pads larger than the output: refused in both
        with pytest.raises(ValueError):
            convt.dask.conv_transpose(da.from_array(x, chunks=chunks), w, b, **params)
        return
    lazy = convt.dask.conv_transpose(da.from_array(x, chunks=chunks), w, b, **params)
    assert lazy.chunks[0] == da.from_array(x, chunks=chunks).chunks[0]
    assert_same(lazy, expected)


@st.composite
def upsample_cases(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 9), min_size=ndim, max_size=ndim)))
    factors = tuple(draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim)))
    kernel = draw(st.sampled_from(["nearest", "linear", "cubic"]))
    mode = draw(st.sampled_from(["edge", "reflect", "mirror", "constant", "wrap"]))
    dtype = draw(st.sampled_from(DTYPES + (np.uint8,)))
    cval = draw(st.sampled_from([0.0, -1.0]))
    return shape, factors, kernel, mode, np.dtype(dtype), cval, chunking(draw, shape), draw(
        st.integers(0, 2**16))


@settings(max_examples=EXAMPLES)
@given(upsample_cases())
def test_upsample_blocks_equal_the_in_memory_result(case):
    shape, factors, kernel, mode, dtype, cval, chunks, seed = case
    x = (np.random.default_rng(seed).random(shape) * 100).astype(dtype)
    expected = convt.upsample(x, factors, kernel=kernel, mode=mode, cval=cval)
    lazy = convt.dask.upsample(da.from_array(x, chunks=chunks), factors, kernel=kernel,
                               mode=mode, cval=cval)
    assert lazy.chunks == tuple(tuple(c * f for c in axis_chunks)
                                for axis_chunks, f in zip(da.from_array(x, chunks=chunks).chunks,
                                                          factors))
    assert_same(lazy, expected)


def test_wrap_reads_the_far_side_and_tasks_stay_small():
    x = np.random.default_rng(0).random((40, 30))
    lazy = convt.dask.upsample(da.from_array(x, chunks=10), 2, kernel="cubic", mode="wrap")
    assert_same(lazy, convt.upsample(x, 2, kernel="cubic", mode="wrap"))
    # each output block reads its block and the halo pieces of at most its 8 neighbours
    # (the far side's for 'wrap'), never whole neighbouring blocks copied
    graph = dict(lazy.__dask_graph__())
    pieces = [key for key in graph if isinstance(key, tuple) and key[0].endswith("-piece")]
    assert len(pieces) == 12 * 9


def test_threaded_scheduler_and_threads_per_block():
    x = np.random.default_rng(1).random((3, 64, 64)).astype(np.float32)
    expected = convt.upsample(x, 2, channel_axis=0)
    for threads in (1, 2):
        lazy = convt.dask.upsample(da.from_array(x, chunks=(1, 20, 64)), 2, channel_axis=0,
                                   num_threads=threads)
        assert_same_bits(lazy.compute(scheduler="threads"), expected)


def test_numpy_input_is_accepted_and_errors_name_the_parameter():
    x = np.ones((1, 2, 5, 5), np.float32)
    w = np.ones((2, 1, 3, 3), np.float32)
    lazy = convt.dask.conv_transpose(x, w, group=2)
    assert lazy.shape == (1, 2, 7, 7)
    with pytest.raises(TypeError, match="x and w must have the same dtype"):
        convt.dask.conv_transpose(da.ones((1, 2, 5, 5)), w)
    with pytest.raises(ValueError, match="'mode'.*got 'bogus'"):
        convt.dask.upsample(da.ones((4, 4)), 2, mode="bogus")
    with pytest.raises(ValueError, match="'num_threads'.*convt.dask.upsample"):
        convt.dask.upsample(da.ones((4, 4)), 2, num_threads=0)


def test_zarr_store_to_zarr_store(tmp_path):
    zarr = pytest.importorskip("zarr")
    volume = np.random.default_rng(2).random((24, 20, 18)).astype(np.float32)
    source = zarr.open_array(str(tmp_path / "in.zarr"), mode="w", shape=volume.shape,
                             chunks=(8, 10, 9), dtype="f4")
    source[...] = volume
    lazy = convt.dask.upsample(da.from_zarr(str(tmp_path / "in.zarr")), 2, kernel="cubic")
    lazy.to_zarr(str(tmp_path / "out.zarr"))
    written = zarr.open_array(str(tmp_path / "out.zarr"), mode="r")
    assert written.shape == (48, 40, 36) and written.chunks == (16, 20, 18)
    expected = convt.upsample(volume, 2, kernel="cubic")
    assert_same_bits(written[...], expected)


def test_docstring_examples():
    import doctest

    failures, tried = doctest.testmod(convt.dask, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert tried > 0 and failures == 0
