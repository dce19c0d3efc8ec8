"""Repeated calls reuse their validation and plan, and still see every change."""

import numpy as np
import pytest

from convt import Conv, ConvTranspose, _frontend
from convt._reference import reference_conv, reference_conv_transpose


def _arrays(seed=0, x_shape=(2, 4, 6, 5), w_shape=(4, 3, 3, 2)):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(x_shape), rng.standard_normal(w_shape)


def test_second_call_is_remembered_and_equal():
    x, w = _arrays()
    layer = ConvTranspose(strides=(2, 1), pads=(1, 0, 0, 1))
    first = layer.apply(x, w)
    assert _frontend.call_key(layer, x, w, None, None) in _frontend._CALLS
    np.testing.assert_array_equal(layer.apply(x, w), first)
    np.testing.assert_allclose(first, reference_conv_transpose(x, w, strides=(2, 1),
                                                               pads=(1, 0, 0, 1)), atol=1e-12)


def test_weights_changed_in_place_are_used():
    x, w = _arrays()
    layer = ConvTranspose(strides=(2, 2))
    layer.apply(x, w)
    w *= -3.0
    w[0, 0, 0, 0] = np.nan
    np.testing.assert_allclose(layer.apply(x, w), reference_conv_transpose(x, w, strides=(2, 2)),
                               atol=1e-12)


def test_list_parameters_are_remembered_and_edits_in_place_seen():
    # ONNX attributes arrive as lists; such calls must not re-validate and re-plan every time
    x, w = _arrays()
    pads = [1, 0, 0, 1]
    layer = ConvTranspose(strides=[2, 1], pads=pads)
    layer.apply(x, w)
    assert _frontend.call_key(layer, x, w, None, None) in _frontend._CALLS
    pads[:] = [0, 1, 1, 0]
    np.testing.assert_allclose(layer.apply(x, w), reference_conv_transpose(
        x, w, strides=(2, 1), pads=(0, 1, 1, 0)), atol=1e-12)
    pads.append(1)
    with pytest.raises(ValueError, match="pads"):
        layer.apply(x, w)


@pytest.mark.parametrize("change", ["set_params", "attribute"])
def test_parameter_changes_are_seen(change):
    x, w = _arrays()
    layer = ConvTranspose(strides=(2, 2))
    layer.apply(x, w)
    if change == "set_params":
        layer.set_params(strides=(1, 2), pads=(1, 1, 0, 0))
    else:
        layer.strides, layer.pads = (1, 2), (1, 1, 0, 0)
    np.testing.assert_allclose(layer.apply(x, w), reference_conv_transpose(
        x, w, strides=(1, 2), pads=(1, 1, 0, 0)), atol=1e-12)


def test_remembered_parameter_keys_stay_out_of_copies_and_follow_deletions():
    import copy
    import pickle

    x, w = _arrays()
    layer = ConvTranspose(strides=(2, 2))
    layer.apply(x, w)  # the layer now remembers its parameters' key
    for twin in (pickle.loads(pickle.dumps(layer)), copy.deepcopy(layer), copy.copy(layer)):
        assert vars(twin) == vars(ConvTranspose(strides=(2, 2)))
    del layer.strides
    layer.strides = (1, 2)
    np.testing.assert_allclose(layer.apply(x, w), reference_conv_transpose(x, w, strides=(1, 2)),
                               atol=1e-12)


def test_values_of_another_type_are_validated_again():
    x, w = _arrays()
    ConvTranspose(strides=(2, 2)).apply(x, w)
    with pytest.raises(TypeError):
        ConvTranspose(strides=(2.0, 2.0)).apply(x, w)
    with pytest.raises((TypeError, ValueError)):
        ConvTranspose(strides=(True, True)).apply(x, w)


def test_other_strides_and_layouts_get_their_own_plan():
    x, w = _arrays()
    layer = ConvTranspose(strides=(2, 2))
    expected = reference_conv_transpose(x, w, strides=(2, 2))
    layer.apply(x, w)
    for view in (np.asfortranarray(x), x[:, :, ::-1][:, :, ::-1], x.astype(np.float32)):
        result = layer.apply(view, w.astype(view.dtype))
        np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)
    channels_last = ConvTranspose(strides=(2, 2), data_format="NXC")
    for _ in range(2):
        result = channels_last.apply(np.moveaxis(x, 1, -1).copy(), w)
        np.testing.assert_allclose(np.moveaxis(result, -1, 1), expected, atol=1e-12)


def test_out_is_checked_on_every_call():
    x, w = _arrays()
    layer = ConvTranspose()
    y = layer.apply(x, w)
    layer.apply(x, w, out=y)
    read_only = np.empty_like(y)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="out must be writeable"):
        layer.apply(x, w, out=read_only)
    with pytest.raises(ValueError, match="out must have shape"):
        layer.apply(x, w, out=np.empty((1, 1)))
    buffer = np.zeros(x.size + y.size)
    x_inside, y_inside = buffer[:x.size].reshape(x.shape), buffer[x.size:].reshape(y.shape)
    x_inside[...] = x
    layer.apply(x_inside, w, out=y_inside)  # adjacent, not overlapping
    with pytest.raises(ValueError, match="out must not share memory with x"):
        layer.apply(x_inside, w, out=buffer[x.size - 1:-1].reshape(y.shape))


def test_conv_repeated_calls_follow_changes():
    x, w = _arrays(1, (1, 4, 9, 8), (6, 2, 3, 3))
    layer = Conv(strides=(2, 2), group=2, pads=(1, 1, 1, 1))
    layer.apply(x, w)
    w[1, 0, 0, 0] = np.inf  # reads padding only at the first output: NaN there by the text
    np.testing.assert_allclose(layer.apply(x, w), reference_conv(
        x, w, strides=(2, 2), group=2, pads=(1, 1, 1, 1)), atol=1e-12)


def test_environment_reads_follow_every_change_made_through_os_environ(monkeypatch):
    """convt._environ.value reads os.environ's own mapping: settings, deletions and
    values that need decoding are seen as os.environ.get sees them, and a replaced
    os.environ (a plain dict) is read as it is."""
    import os

    from convt import _environ
    name = "CONVT_TEST_VARIABLE"
    monkeypatch.delenv(name, raising=False)
    assert _environ.value(name) is None and _environ.value(name, "7") == "7"
    for setting in ("3", "", " 2,4 ", "caf\u00e9"):
        monkeypatch.setenv(name, setting)
        assert _environ.value(name) == os.environ.get(name) == setting
    monkeypatch.delenv(name)
    assert _environ.value(name) is None
    monkeypatch.setattr(os, "environ", {name: "5"})
    assert _environ.value(name) == "5"


def test_a_kernel_set_named_between_calls_serves_the_next_call(monkeypatch):
    from convt import _dispatch, explain
    x, w = np.ones((1, 8, 6, 6), np.float32), np.ones((8, 4, 4, 4), np.float32)
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1))
    expected = reference_conv_transpose(x, w, strides=(2, 2), pads=(1, 1, 1, 1))
    for kernel_set in _dispatch.available_kernel_sets():
        monkeypatch.setenv(_dispatch.KERNEL_SET_VARIABLE, kernel_set)
        assert explain(layer, x.shape, w.shape).decision.kernel_set == kernel_set
        np.testing.assert_allclose(layer.apply(x, w), expected, rtol=1e-5)
        assert _frontend._CALLS[_frontend.call_key(layer, x, w, None, None)].call.run.decision \
            .kernel_set == kernel_set
