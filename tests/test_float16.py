"""float16: converted tile by tile in the kernels, accumulated in float32, rounded once."""

import numpy as np
import pytest

from _helpers import ENGINES, assert_matches_reference, run_engine

# Every engine runs its family's conversions: F16C in the x86 families, the
# scalar code in the portable family.
ALL_HALVES = np.arange(2**16, dtype=np.uint16).view(np.float16)


@pytest.mark.parametrize("engine", ENGINES)
def test_every_half_survives_the_round_trip(engine):
    # A 1x1 kernel of weight 1 computes 0 + float32(x) * 1 and rounds back: the identity
    # for all 65536 bit patterns (NaNs stay NaN with their sign; -0 + 0 is +0 by IEEE).
    x = ALL_HALVES.reshape(1, 1, -1)
    y = run_engine(engine, x, np.ones((1, 1, 1), np.float16))
    finite_or_inf = ~np.isnan(x)
    nonzero = finite_or_inf & (x != 0)
    np.testing.assert_array_equal(y.view(np.uint16)[nonzero], x.view(np.uint16)[nonzero])
    assert np.all(y[x == 0] == 0)
    assert np.all(np.isnan(y[~finite_or_inf]))
    np.testing.assert_array_equal(np.signbit(y[~finite_or_inf]), np.signbit(x[~finite_or_inf]))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("weight", [0.1, 3.0, 1e-3, -7.5e-5, 1000.0, 0.999])
def test_rounding_of_products_matches_numpy(engine, weight):
    # y = round_to_half(float32(x) * float32(w) + float32(b)): numpy rounds to nearest even,
    # including subnormals, overflow to inf and NaN.
    x = ALL_HALVES.reshape(1, 1, -1)
    w = np.full((1, 1, 1), weight, np.float16)
    b = np.array([np.float16(0.25)], np.float16)
    with np.errstate(over="ignore", invalid="ignore"):
        product = x.astype(np.float32) * w.astype(np.float32).reshape(()) + np.float32(b[0])
        expected = product.astype(np.float16)
    y = run_engine(engine, x, w, b)
    same = np.isnan(expected) == np.isnan(y)
    assert same.all()
    finite = ~np.isnan(expected)
    np.testing.assert_array_equal(y.view(np.uint16)[finite], expected.view(np.uint16)[finite])


@pytest.mark.parametrize("engine", ENGINES)
def test_sums_accumulate_in_float32_not_float16(engine):
    # 4096 terms of 1 + 2**-11 ... in float16 the running sum would stall at 2048.
    x = np.ones((1, 4096, 1), np.float16)
    w = np.ones((4096, 1, 1), np.float16)
    y = run_engine(engine, x, w)
    assert y[0, 0, 0] == np.float16(4096)
    assert_matches_reference(y, x, w)
