"""convt: exact ONNX ConvTranspose (N-D, grouped) for NumPy arrays.

>>> import numpy as np
>>> from convt import ConvTranspose
>>> x = np.ones((1, 3, 8, 8), dtype=np.float32)
>>> w = np.ones((3, 2, 4, 4), dtype=np.float32)
>>> ConvTranspose(strides=(2, 2), auto_pad="SAME_UPPER").apply(x, w).shape
(1, 2, 16, 16)
"""

from . import kernels
from ._estimator import ConvTranspose, conv_transpose
from ._upsample import upsample

__version__ = "0.1.0"

__all__ = ["ConvTranspose", "conv_transpose", "upsample", "kernels", "__version__"]


def __getattr__(name):
    # convt.dask is imported on first use: `import convt` never imports dask
    if name == "dask":
        import importlib

        return importlib.import_module(".dask", __name__)
    raise AttributeError(f"module 'convt' has no attribute {name!r}")
