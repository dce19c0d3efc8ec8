"""convt: exact ONNX ConvTranspose and Conv (N-D, grouped) for NumPy arrays.

>>> import numpy as np
>>> from convt import ConvTranspose
>>> x = np.ones((1, 3, 8, 8), dtype=np.float32)
>>> w = np.ones((3, 2, 4, 4), dtype=np.float32)
>>> ConvTranspose(strides=(2, 2), auto_pad="SAME_UPPER").apply(x, w).shape
(1, 2, 16, 16)
"""

from . import kernels
from ._bound import BoundLayer
from ._conv import Conv, conv
from ._estimator import ConvTranspose, conv_transpose
from ._upsample import upsample

__version__ = "0.1.0"

__all__ = ["BoundLayer", "Conv", "ConvTranspose", "conv", "conv_transpose", "explain", "upsample", "kernels",
           "__version__"]


def explain(layer, x_shape, w_shape=None, dtype=None):
    """How ``layer.apply`` (or a bound layer's call) would run on arrays of these
    shapes: see :func:`convt._engine.explain`.

    Examples
    --------
    >>> import numpy as np
    >>> from convt import ConvTranspose, explain
    >>> explain(ConvTranspose(), (1, 1, 256), (1, 1, 2)).decision.engine
    'direct'
    >>> from convt import Conv
    >>> explain(Conv(strides=(2, 2)), (1, 64, 56, 56), (128, 64, 3, 3)).decision.engine
    'gemm'
    >>> explain(Conv(strides=(2, 2)).bind(np.ones((128, 64, 3, 3))), (1, 64, 56, 56)).bound
    True
    """
    from ._engine import explain as explain_call  # loads the compiled kernels

    return explain_call(layer, x_shape, w_shape, dtype)


def __getattr__(name):
    # convt.dask is imported on first use: `import convt` never imports dask
    if name == "dask":
        import importlib

        return importlib.import_module(".dask", __name__)
    raise AttributeError(f"module 'convt' has no attribute {name!r}")
