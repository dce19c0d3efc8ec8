"""The scikit-learn estimator protocol: params, clone, repr, pickle."""

import copy
import pickle

import numpy as np
import pytest

from convt import ConvTranspose, conv_transpose

ALL = dict(auto_pad="NOTSET", dilations=[1, 2], group=2, kernel_shape=(3, 3),
           output_padding=np.array([1, 1]), output_shape=None, pads=(1, 0, 1, 0),
           strides=(2, 2), opset=13, data_format="NXC", filter_format="XOI", num_threads=1)


def test_get_params_returns_values_as_given():
    layer = ConvTranspose(**ALL)
    params = layer.get_params()
    assert list(params) == list(ALL)
    for name, value in ALL.items():
        assert params[name] is value


def test_set_params_returns_self_and_updates():
    layer = ConvTranspose()
    assert layer.set_params(strides=(3,), output_padding=(2,)) is layer
    assert layer.get_params()["strides"] == (3,)


def _clone(estimator):
    # What sklearn.base.clone does for an estimator without sub-estimators.
    params = {k: copy.deepcopy(v) for k, v in estimator.get_params(deep=False).items()}
    return type(estimator)(**params)


def test_clone_round_trips_parameters():
    layer = ConvTranspose(**ALL)
    twin = _clone(layer)
    assert twin is not layer
    assert repr(twin) == repr(layer)


def test_sklearn_clone():
    base = pytest.importorskip("sklearn.base")
    layer = ConvTranspose(**ALL)
    twin = base.clone(layer)
    assert repr(twin) == repr(layer)


@pytest.mark.parametrize(
    "layer, text",
    [
        (ConvTranspose(), "ConvTranspose()"),
        (ConvTranspose(strides=(2, 2), auto_pad="SAME_UPPER"),
         "ConvTranspose(auto_pad='SAME_UPPER', strides=(2, 2))"),
        (ConvTranspose(group=4, num_threads=2), "ConvTranspose(group=4, num_threads=2)"),
        (ConvTranspose(pads=[1, 1]), "ConvTranspose(pads=[1, 1])"),
    ],
)
def test_repr_shows_non_default_parameters(layer, text):
    assert repr(layer) == text


def test_pickle_round_trip_computes_the_same():
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1), group=2)
    twin = pickle.loads(pickle.dumps(layer))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 4, 5, 5)).astype(np.float32)
    w = rng.standard_normal((4, 3, 4, 4)).astype(np.float32)
    np.testing.assert_array_equal(twin.apply(x, w), layer.apply(x, w))
    assert repr(twin) == repr(layer)


def test_functional_twin_matches_estimator():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4)).astype(np.float64)
    w = rng.standard_normal((3, 2, 3)).astype(np.float64)
    b = rng.standard_normal(2)
    np.testing.assert_array_equal(
        conv_transpose(x, w, b, strides=(2,), dilations=(2,)),
        ConvTranspose(strides=(2,), dilations=(2,)).apply(x, w, b),
    )


def test_attributes_changed_directly_are_validated_at_apply():
    layer = ConvTranspose()
    layer.strides = (0,)
    with pytest.raises(ValueError, match="'strides'"):
        layer.apply(np.ones((1, 1, 2)), np.ones((1, 1, 2)))


def test_output_shape_and_pads_without_computing():
    layer = ConvTranspose(strides=(2, 2), auto_pad="SAME_LOWER", output_padding=(1, 0))
    assert layer.output_shape_for((3, 8, 5, 7), (8, 2, 3, 3)) == (3, 2, 10, 14)
    # total = 2*4 + 1 + 3 - 10 = 2 and 2*6 + 0 + 3 - 14 = 1 (odd unit at the beginning)
    assert layer.pads_for((3, 8, 5, 7), (8, 2, 3, 3)) == ((1, 1), (1, 0))
