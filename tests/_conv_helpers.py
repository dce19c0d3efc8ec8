"""Helpers for the Conv tests: forced engines, rounding bounds and the adjoint's bound."""

import math

import numpy as np

from _helpers import ACCUMULATION_EPS, FINAL_ROUNDING
from convt import Conv
from convt._reference import reference_conv

UNIT_ROUNDOFF = 2.0**-53  # float64


def conv_operands(x_shape, w_shape, dtype, seed=0):
    """Random x, w (scaled by its fan-in) and bias of a Conv, in ``dtype``."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = (rng.standard_normal(w_shape) / np.sqrt(np.prod(w_shape[1:]))).astype(dtype)
    b = rng.standard_normal(w_shape[0]).astype(dtype)
    return x, w, b


def exact_conv(layer, x, w, b=None):
    """``layer``'s Conv of x, w, b by the float64 reference."""
    return reference_conv(x.astype(np.float64), w.astype(np.float64),
                          None if b is None else b.astype(np.float64), **layer.get_params())


def run_conv_engine(engine, x, w, b=None, num_threads=None, overrides=None, **params):
    """Conv(**params) on x, w, b with every ConvTranspose call of compute_conv forced to one
    engine ('direct-<family>', 'gemm-<kernel set>'); ``overrides`` replace decision fields."""
    layer = Conv(num_threads=num_threads, **params)
    name, _, kernel_set = engine.partition("-")
    return layer._apply(x, w, b, engine=name, backend=kernel_set or None, **(overrides or {}))


def _terms(w_shape, params):
    """Products summed into one output: C/group times the kernel size."""
    fmt = params.get("filter_format", "OIX")
    if fmt == "OIX":
        per_group, kernel = w_shape[1], w_shape[2:]
    elif fmt == "IOX":
        per_group, kernel = w_shape[0], w_shape[2:]
    else:  # XIO
        per_group, kernel = w_shape[-2], w_shape[:-2]
    return per_group * math.prod(kernel)


def conv_error_bound(x, w, b, params):
    """Per-element bound on |computed - exact|: (n + 2) u sum|terms| for n products and the
    bias summed in the accumulation type (any summation order: each term takes part in
    at most n + 1 roundings), plus one final rounding for float16 and bfloat16 outputs."""
    dtype = np.asarray(x).dtype
    eps = ACCUMULATION_EPS[dtype]
    magnitude = reference_conv(np.abs(np.asarray(x, np.float64)),
                               np.abs(np.asarray(w, np.float64)),
                               None if b is None else np.abs(np.asarray(b, np.float64)), **params)
    bound = (_terms(np.shape(w), params) + 2) * eps * magnitude
    if dtype in FINAL_ROUNDING:
        unit, subnormal = FINAL_ROUNDING[dtype]
        exact = np.abs(reference_conv(x, w, b, **params))
        bound = bound + unit * (exact + bound) + subnormal
    return bound


def assert_conv_matches_reference(y, x, w, b=None, **params):
    """y equals the float64 Conv reference within the rounding bound of its dtype."""
    expected = reference_conv(x, w, b, **params)
    assert y.shape == expected.shape, (y.shape, expected.shape)
    assert y.dtype == np.asarray(x).dtype
    error = np.abs(y.astype(np.float64) - expected)
    bound = conv_error_bound(x, w, b, params)
    worst = np.unravel_index(np.argmax(error - bound), error.shape) if error.size else None
    assert np.all(error <= bound), (
        f"error {error[worst]} > bound {bound[worst]} at {worst} "
        f"(got {y[worst]}, expected {expected[worst]})"
    )


def gamma(n):
    """Higham's gamma_n = n u / (1 - n u) for float64."""
    return n * UNIT_ROUNDOFF / (1 - n * UNIT_ROUNDOFF)


def inner(a, b):
    """<a, b> in float64: the products rounded once each, their sum correctly rounded
    (math.fsum), so |inner - exact| <= (2u + u^2) sum|a b|."""
    return math.fsum((np.asarray(a, np.float64) * np.asarray(b, np.float64)).ravel().tolist())


def adjoint_bound(x, w, y, conv_params, conv_terms, transpose_terms):
    """A proven bound on |<Conv x, y> - <x, ConvTranspose y>| when both sides are computed
    in float64 (the ConvTranspose being the Conv's adjoint, the same w) and the inner
    products by :func:`inner`.

    With A the Conv's matrix, S = sum |y_o| |A_oi| |x_i| (every product of the pair):

    * each Conv output sums at most ``conv_terms`` products, so |fl(Ax) - Ax| <=
      gamma_n1 |A||x| elementwise (any summation order), hence
      |<fl(Ax), y> - <Ax, y>| <= gamma_n1 S; likewise gamma_n2 S for the ConvTranspose
      with ``transpose_terms`` products per output;
    * each inner product adds (2u + u^2) sum|a b| <= (2u + u^2)(1 + gamma) S;
    * S itself is computed from non-negative terms (reference_conv of |x| and |w|,
      then :func:`inner` with |y|), so the computed S~ >= (1 - gamma_{n1 + 2}) S.

    Since <Ax, y> = <x, A^T y> exactly, the difference of the two computed sides is at
    most (gamma_n1 + gamma_n2 + 2 (2u + u^2)(1 + gamma_max)) S~ / (1 - gamma_{n1 + 2}).
    """
    magnitude = reference_conv(np.abs(x), np.abs(w), **conv_params)
    total = inner(np.abs(y), magnitude)
    u = UNIT_ROUNDOFF
    widest = max(conv_terms, transpose_terms)
    factor = gamma(conv_terms) + gamma(transpose_terms) + 2 * (2 * u + u * u) * (1 + gamma(widest))
    return factor * total / (1 - gamma(conv_terms + 2))
