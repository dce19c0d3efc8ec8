"""Outputs of at least STREAM_OUTPUT_MIN_BYTES have their interleaved rows (stride-2
last axes) stored with non-temporal stores where the kernel set has them
(convt._dispatch.STREAM_OUTPUT_MIN_BYTES): the values are the ordinary stores',
bitwise, on every engine path that interleaves, at any thread count."""

import numpy as np
import pytest

import convt
from convt import ConvTranspose, _dispatch, _engine

from _helpers import assert_matches_reference

STREAMING_SETS = [family.name for family in _dispatch.families()
                  if family.available and family.f32.has(_dispatch.SET_STREAM_STORES)]
pytestmark = pytest.mark.skipif(not STREAMING_SETS,
                                reason="no kernel set with streaming stores runs here")

# (x shape, w shape, attributes, engine): the GEMM engine's sibling scatter (k2s2,
# 3-D), residue pairs (k3s2), a one-channel k4s2, an odd last axis, and the direct
# engine's rows (depthwise k3s2 on long rows)
CASES = {
    "k2s2": ((2, 6, 9, 20), (6, 16, 2, 2), dict(strides=(2, 2)), "gemm"),
    "k2s2_3d": ((1, 4, 5, 6, 12), (4, 8, 2, 2, 2), dict(strides=(2, 2, 2)), "gemm"),
    "k3s2_pairs": ((1, 8, 12, 21), (8, 16, 3, 3), dict(strides=(2, 2), pads=(1, 1, 1, 1),
                                                       output_padding=(1, 1)), "gemm"),
    "k4s2_one_channel": ((1, 1, 33, 70), (1, 1, 4, 4), dict(strides=(2, 2),
                                                             pads=(1, 1, 1, 1)), "gemm"),
    "k3s2_odd": ((2, 3, 7, 35), (3, 5, 3, 3), dict(strides=(2, 2)), "gemm"),
    "direct_rows": ((1, 2, 9, 101), (2, 1, 3, 3), dict(strides=(2, 2), pads=(1, 1, 1, 1),
                                                       group=2), "direct"),
}


def _operands(name, dtype):
    x_shape, w_shape, params, _ = CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    b = rng.standard_normal(w_shape[1] * params.get("group", 1)).astype(dtype)
    return x, w, b, params


@pytest.mark.parametrize("kernel_set", STREAMING_SETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_streamed_rows_equal_ordinary_stores(name, dtype, kernel_set, monkeypatch):
    monkeypatch.setenv(_dispatch.KERNEL_SET_VARIABLE, kernel_set)
    x, w, b, params = _operands(name, dtype)
    layer = ConvTranspose(**params)
    monkeypatch.setattr(_dispatch, "STREAM_OUTPUT_MIN_BYTES", 0)
    explained = convt.explain(layer, x.shape, w.shape, x.dtype)
    assert explained.decision.stream_output
    assert explained.decision.engine == CASES[name][3]
    layout = (explained.plan.layout if explained.decision.engine == "direct"
              else _engine.gemm_layout(explained.plan, explained.decision))
    assert layout["stream_output"][0] == 1
    streamed = layer.apply(x, w, b)
    assert_matches_reference(streamed, x, w, b, **params)
    assert np.array_equal(ConvTranspose(num_threads=2, **params).apply(x, w, b), streamed)
    out = np.full_like(streamed, np.nan)
    assert layer.apply(x, w, b, out=out) is out and np.array_equal(out, streamed)
    # an out= starting at other places in a cache line: whole lines from the first a
    # row reaches are streamed, the rest stored through the caches (an odd element
    # offset: every row); the bytes around out untouched
    for offset in (dtype().itemsize, 16, 48):
        raw = np.full(streamed.nbytes + 192, 0x7F, np.uint8)
        start = -raw.ctypes.data % 64 + 64 + offset
        out = raw[start:start + streamed.nbytes].view(dtype).reshape(streamed.shape)
        assert layer.apply(x, w, b, out=out) is out and np.array_equal(out, streamed), offset
        assert (raw[:start] == 0x7F).all() and (raw[start + streamed.nbytes:] == 0x7F).all()
    monkeypatch.setattr(_dispatch, "STREAM_OUTPUT_MIN_BYTES", 1 << 62)
    assert not convt.explain(layer, x.shape, w.shape, x.dtype).decision.stream_output
    assert np.array_equal(layer.apply(x, w, b), streamed)


@pytest.mark.parametrize("kernel_set", STREAMING_SETS)
def test_only_outputs_past_the_threshold_stream(kernel_set, monkeypatch):
    """The rule: output bytes >= STREAM_OUTPUT_MIN_BYTES, on sets flagged for it;
    the portable set has no streaming stores."""
    monkeypatch.setenv(_dispatch.KERNEL_SET_VARIABLE, kernel_set)
    layer = ConvTranspose(strides=(2, 2))
    w_shape = (8, 4, 2, 2)
    x_shape = (1, 8, 16, 32)    # output: 4 x 32 x 64 float32 = 32 KiB
    monkeypatch.setattr(_dispatch, "STREAM_OUTPUT_MIN_BYTES", 32 << 10)
    assert convt.explain(layer, x_shape, w_shape, np.float32).decision.stream_output
    assert not convt.explain(layer, (1, 8, 16, 31), w_shape, np.float32).decision.stream_output
    assert convt.explain(layer, (1, 8, 8, 32), w_shape, np.float64).decision.stream_output
    monkeypatch.setenv(_dispatch.KERNEL_SET_VARIABLE, "portable")
    assert not convt.explain(layer, x_shape, w_shape, np.float32).decision.stream_output
