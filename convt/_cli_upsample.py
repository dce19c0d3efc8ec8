"""python -m convt upsample IN OUT --factor F: .npy and TIFF files, slab by slab.

Inputs are memory-mapped where the format allows it (.npy, uncompressed TIFF)
and outputs are written into a memory-mapped file slab by slab (about 16 MiB of
output at a time), so files larger than memory work too.  Each slab is computed
with the same bits as a single in-memory ``convt.upsample`` call.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

from ._upsample import resolve, slab_rows_for, upsample_slabs
from ._upsample_args import MODE_ALIASES
from .kernels import KERNELS

# Outputs with at least this many elements (64 MiB of float32) get a progress bar.
PROGRESS_ELEMENTS = 2**24
TIFF_SUFFIXES = (".tif", ".tiff")


def _integers(text):
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"expected an integer or comma-separated integers, got {text!r}") from None
    return values[0] if len(values) == 1 else tuple(values)


def _argument_type(function, label):
    def convert(text):
        try:
            return function(text)
        except ValueError as error:
            import argparse

            raise argparse.ArgumentTypeError(f"{label}: {error}") from None
    convert.__name__ = label
    return convert


def add_arguments(parser):
    """The options of the upsample command."""
    integers = _argument_type(_integers, "integers")
    parser.add_argument("input", metavar="IN", help="input image or volume: .npy, or .tif/.tiff "
                        "(needs the tifffile package)")
    parser.add_argument("output", metavar="OUT", help="output file: .npy or .tif/.tiff")
    parser.add_argument("--factor", required=True, type=integers,
                        help="integer factor for every upsampled axis, or one per axis: 2 or 2,2,1")
    parser.add_argument("--kernel", choices=KERNELS, default="linear",
                        help="interpolation kernel (default: linear)")
    parser.add_argument("--mode", choices=list(MODE_ALIASES), default="edge", metavar="MODE",
                        help="values beyond the border, scipy.ndimage's names: edge (= nearest), "
                        "reflect, mirror, constant, wrap (default: edge)")
    parser.add_argument("--cval", type=float, default=0.0, help="value beyond the border for "
                        "mode constant (default: 0)")
    parser.add_argument("--axes", type=integers, default=None,
                        help="axes to upsample, e.g. 0,1 (default: all but --channel-axis)")
    parser.add_argument("--channel-axis", type=int, default=None,
                        help="an axis that is not upsampled, e.g. -1 for RGB images")
    parser.add_argument("--dtype", choices=["float16", "float32", "float64"], default=None,
                        help="output dtype (default: the input's float dtype; float32 for 8- "
                        "and 16-bit integers, float64 for wider ones)")
    parser.add_argument("--threads", type=int, default=None, help="threads (default: every core)")
    parser.add_argument("--progress", choices=["auto", "always", "never"], default="auto",
                        help="progress bar on stderr: auto shows it for outputs of 2**24 "
                        "elements or more (default: auto)")
    parser.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")


class ProgressBar:
    """A one-line progress bar: ``label [#####.....]  50%  1.2 s``, redrawn in place."""

    def __init__(self, stream, label="upsample", width=30):
        self.stream, self.label, self.width = stream, label, width
        self.start = time.perf_counter()

    def __call__(self, done, total):
        fraction = done / total if total else 1.0
        filled = int(round(self.width * fraction))
        elapsed = time.perf_counter() - self.start
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (self.width - filled)}] "
                          f"{100 * fraction:3.0f}%  {elapsed:.1f} s")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


def _tifffile():
    try:
        import tifffile
    except ImportError:
        raise ValueError("TIFF files need the tifffile package: pip install tifffile") from None
    return tifffile


def _suffix(path):
    suffix = Path(path).suffix.lower()
    if suffix != ".npy" and suffix not in TIFF_SUFFIXES:
        raise ValueError(f"{path}: unknown file type {suffix!r}; use .npy, .tif or .tiff")
    return suffix


def read_image(path):
    """The image in ``path``, memory-mapped when the format allows."""
    if _suffix(path) == ".npy":
        return np.load(path, mmap_mode="r", allow_pickle=False)
    tifffile = _tifffile()
    try:
        return tifffile.memmap(path, mode="r")
    except ValueError:  # compressed or tiled: read it whole
        return tifffile.imread(path)


def create_output(path, shape, dtype, colour=False):
    """A writeable memory map of ``shape`` and ``dtype`` backed by ``path``.

    ``colour``: the last axis holds RGB(A) samples (a TIFF is then written as RGB).
    """
    if _suffix(path) == ".npy":
        return np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=shape)
    photometric = "rgb" if colour else "minisblack"
    return _tifffile().memmap(path, shape=shape, dtype=dtype, photometric=photometric)


def _fail(message):
    print(f"python -m convt upsample: error: {message}", file=sys.stderr)
    return 2


def run(arguments):
    """Upsample arguments.input into arguments.output; the exit status."""
    source, target = arguments.input, arguments.output
    try:
        _suffix(target)
        if not os.path.exists(source):
            raise ValueError(f"{source}: no such file")
        if os.path.exists(target) and not arguments.overwrite:
            raise ValueError(f"{target} exists; pass --overwrite to replace it")
        if os.path.abspath(source) == os.path.abspath(target):
            raise ValueError("IN and OUT must be different files")
        image = read_image(source)
        spec = resolve(image.shape, image.dtype, arguments.factor, arguments.kernel,
                       arguments.axes, arguments.mode, arguments.cval, arguments.channel_axis,
                       arguments.dtype, "python -m convt upsample")
        if arguments.threads is not None and arguments.threads < 1:
            raise ValueError(f"--threads must be >= 1; got {arguments.threads}")
    except (ValueError, TypeError, OSError) as error:
        return _fail(error)
    shape = spec.output_shape(image.shape)
    if image.ndim == 0 or 0 in shape:
        return _fail(f"{source} has shape {image.shape}: nothing to upsample")
    started = time.perf_counter()
    colour = image.ndim >= 3 and shape[-1] in (3, 4) and spec.factors[-1] == 1
    result = create_output(target, shape, spec.dtype, colour)
    size = int(np.prod(shape))
    show = arguments.progress == "always" or (arguments.progress == "auto"
                                              and size >= PROGRESS_ELEMENTS)
    rows = slab_rows_for(shape) if show else shape[0]
    upsample_slabs(image, spec, result, rows, arguments.threads,
                   ProgressBar(sys.stderr) if show else None)
    result.flush()
    del result
    print(f"{source} {image.shape} {image.dtype} -> {target} {shape} {spec.dtype} "
          f"({arguments.kernel}, mode {arguments.mode}) in {time.perf_counter() - started:.2f} s")
    return 0
