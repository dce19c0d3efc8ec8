"""An independent float64 reference for upsampling, for the tests only.

It pads the whole image with numpy.pad (the test's own idea of each boundary
mode) and evaluates the interpolation formula at every output coordinate
``(j + 0.5) / factor - 0.5`` through a dense matrix per axis.  The reference uses
nothing from convt.  Also: the bitwise comparison the block-wise tests share.
"""

import os

import numpy as np

from convt import _dispatch

# convt's own GEMM kernels sum each output in an order that does not depend on where the
# computed block starts: blocks, slabs and chunks give the in-memory bits.  BLAS (the
# default off x86-64, or CONVT_GEMM_BACKEND=blas) may sum differently for other matrix
# sizes: equal to rounding only.
BITWISE = (os.environ.get(_dispatch.KERNEL_SET_VARIABLE)
           or _dispatch.preferred_kernel_set()) != "blas"


def assert_same_bits(result, expected):
    """result == expected bit for bit (to rounding under the BLAS backend)."""
    result, expected = np.asarray(result), np.asarray(expected)
    assert result.shape == expected.shape and result.dtype == expected.dtype
    if BITWISE:
        assert result.tobytes() == expected.tobytes()
    else:
        np.testing.assert_allclose(result, expected,
                                   rtol=1e-3 if result.dtype == np.float16 else 1e-5)


# convt's mode names -> numpy.pad's
NUMPY_PAD_MODE = {"edge": "edge", "reflect": "symmetric", "mirror": "reflect",
                  "wrap": "wrap", "constant": "constant"}
# convt's mode names -> scipy.ndimage's (grid variants, as for zoom(grid_mode=True))
SCIPY_MODE = {"edge": "nearest", "reflect": "reflect", "mirror": "mirror",
              "wrap": "grid-wrap", "constant": "grid-constant"}
# convt's mode names -> scikit-image's (numpy.pad's)
SKIMAGE_MODE = NUMPY_PAD_MODE


def keys_cubic(t, a=-0.5):
    """Keys (1981), cubic convolution kernel, written out from the paper's equation (15)."""
    t = np.abs(t)
    inner = (a + 2) * t**3 - (a + 3) * t**2 + 1
    outer = a * t**3 - 5 * a * t**2 + 8 * a * t - 4 * a
    return np.where(t <= 1, inner, np.where(t < 2, outer, 0.0))


def triangle(t):
    return np.clip(1 - np.abs(t), 0, None)


def box(t):
    # nearest neighbour; no output coordinate lies exactly half-way for integer factors
    return (np.abs(t) < 0.5).astype(float)


PROFILES = {"linear": triangle, "cubic": keys_cubic, "nearest": box}


def interpolation_matrix(size, factor, kernel, margin):
    """Matrix (size * factor, size + 2 margin): row j weights the padded samples.

    Output j sits at input coordinate (j + 0.5) / factor - 0.5.
    """
    coordinate = (np.arange(size * factor) + 0.5) / factor - 0.5
    sample = np.arange(-margin, size + margin)
    return PROFILES[kernel](coordinate[:, None] - sample[None, :])


def reference_upsample(image, factors, kernel="linear", mode="edge", cval=0.0):
    """Upsample ``image`` (float64) by ``factors`` (one per axis) the slow, obvious way."""
    margin = 3
    image = np.asarray(image, dtype=np.float64)
    pad_mode = NUMPY_PAD_MODE[mode]
    extra = {"constant_values": cval} if mode == "constant" else {}
    result = np.pad(image, margin, mode=pad_mode, **extra)
    for axis, factor in enumerate(factors):  # each axis consumes its padded samples
        matrix = interpolation_matrix(image.shape[axis], factor, kernel, margin)
        result = np.moveaxis(np.tensordot(matrix, result, axes=([1], [axis])), 0, axis)
    return result
