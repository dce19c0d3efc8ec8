"""Command line: ``python -m convt demo`` and ``python -m convt info``."""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from . import ConvTranspose, __version__, _kernels
from ._arrays import SUPPORTED_DTYPES
from ._blas import describe as describe_blas
from ._engine import default_backend, flop_count


def synthetic_image(size=512):
    """A smooth test image: rings and a tilted ramp, values in [0, 1]."""
    axis = np.linspace(-1.0, 1.0, size)
    rows, cols = np.meshgrid(axis, axis, indexing="ij")
    radius = np.hypot(rows, cols)
    image = 0.5 + 0.35 * np.cos(12.0 * radius) * np.exp(-radius) + 0.15 * (rows - cols) / 2
    return image.astype(np.float32)


def bilinear_kernel(factor=2):
    """The (2f, 2f) kernel of bilinear x f upsampling by a stride-f ConvTranspose."""
    taps = 2 * factor
    center = (taps - 1) / 2
    weights = 1 - np.abs(np.arange(taps) - center) / factor
    return np.outer(weights, weights).astype(np.float32)


def demo():
    """Upsample a synthetic image x2 and compare with the float64 reference."""
    from ._reference import reference_conv_transpose

    image = synthetic_image()
    x = image[np.newaxis, np.newaxis]
    w = bilinear_kernel()[np.newaxis, np.newaxis]
    layer = ConvTranspose(strides=(2, 2), auto_pad="SAME_UPPER")
    layer.apply(x, w)  # warm-up: plans are cached
    times = []
    for _ in range(5):
        start = time.perf_counter()
        y = layer.apply(x, w)
        times.append(time.perf_counter() - start)
    best = float(np.median(times))
    expected = reference_conv_transpose(x, w, strides=(2, 2), auto_pad="SAME_UPPER")
    error = float(np.max(np.abs(y - expected)))
    print(f"{layer!r}: bilinear x2 upsampling of a synthetic image")
    print(f"  x {x.shape} {x.dtype}  w {w.shape}  ->  y {y.shape} {y.dtype}")
    print(f"  time: {best * 1e3:.2f} ms (median of 5), "
          f"{flop_count(x.shape, w.shape) / best / 1e9:.2f} GFLOP/s")
    print(f"  largest |y - reference (float64)|: {error:.3g}")
    return 0 if error < 1e-5 else 1


def info():
    """Version, dtypes, threading and BLAS of this build."""
    threads = _kernels.max_threads()
    print(f"convt {__version__}")
    print(f"  dtypes: {', '.join(str(d) for d in SUPPORTED_DTYPES)} "
          "(float16 accumulates in float32)")
    if _kernels.openmp_enabled():
        print(f"  OpenMP: on, {threads} threads by default")
    else:
        print("  OpenMP: off (built without OpenMP; kernels run serially)")
    print(f"  GEMM kernels: {default_backend()} (available: {', '.join(_kernels.available_backends())})")
    print(f"  BLAS: {describe_blas()}")
    print(f"  numpy {np.__version__}, Python {sys.version.split()[0]}")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m convt", description=__doc__)
    parser.add_argument("command", choices=["demo", "info"])
    arguments = parser.parse_args(argv)
    return demo() if arguments.command == "demo" else info()


if __name__ == "__main__":
    sys.exit(main())
