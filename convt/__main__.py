"""Command line: python -m convt demo | info | upsample IN OUT --factor F."""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from . import ConvTranspose, __version__, _dispatch, kernels
from ._compiled import load as load_kernels
from ._arrays import SUPPORTED_NAMES
from ._blas import describe as describe_blas
from ._engine import explain, flop_count

# The call `info` explains: a DCGAN-like decoder layer.
SAMPLE_LAYER = dict(strides=(2, 2), pads=(1, 1, 1, 1))
SAMPLE_SHAPES = ((1, 64, 32, 32), (64, 32, 4, 4))


def synthetic_image(size=512):
    """A smooth test image: rings and a tilted ramp, values in [0, 1]."""
    axis = np.linspace(-1.0, 1.0, size)
    rows, cols = np.meshgrid(axis, axis, indexing="ij")
    radius = np.hypot(rows, cols)
    image = 0.5 + 0.35 * np.cos(12.0 * radius) * np.exp(-radius) + 0.15 * (rows - cols) / 2
    return image.astype(np.float32)


def demo():
    """Upsample a synthetic image x2 and compare with the float64 reference."""
    from ._reference import reference_conv_transpose

    image = synthetic_image()
    x = image[np.newaxis, np.newaxis]
    w = kernels.linear(2, ndim=2, dtype=np.float32)
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


def _describe_family(family):
    flags = [name for name, bit in (("fused", _dispatch.SET_FUSED), ("B packing", _dispatch.SET_PACK),
                                    ("pair packing", _dispatch.SET_PACK_PAIRS),
                                    ("half panels", _dispatch.SET_HALF),
                                    ("pair kernels", _dispatch.SET_PAIRS),
                                    ("masked stores", _dispatch.SET_MASKED_STORES),
                                    ("transposed kernels", _dispatch.SET_TRANSPOSED),
                                    ("transposed runs", _dispatch.SET_T_RUNS))
             if family.f32.has(bit)]
    state = "available" if family.available else "not on this CPU"
    return (f"{family.name}: {state}; float32 {family.f32.mr} x {family.f32.nr}, float64 "
            f"{family.f64.mr} x {family.f64.nr}" + (f"; {', '.join(flags)}" if flags else ""))


def info():
    """Version, dtypes, threading, CPU, kernel sets, BLAS, and the decision for a sample call."""
    print(f"convt {__version__}")
    print(f"  dtypes: {', '.join(SUPPORTED_NAMES)} "
          "(float16 and bfloat16 accumulate in float32; bfloat16 is ml_dtypes')")
    print(f"  threads: {_dispatch.default_threads()} by default ("
          + " or ".join(_dispatch.THREAD_VARIABLES) + " or the cores this process may use)")
    print(f"  CPU features: {', '.join(load_kernels().cpu_features()) or 'none the kernels use'}")
    reported = load_kernels().l1_data_bytes()
    best = _dispatch.preferred_kernel_set()
    print(f"  L1 data cache: {_dispatch.l1_data_bytes() // 1024} KiB per core"
          + ("" if reported else " (assumed: neither the CPU nor the OS reports it)")
          + f"; K chunks of up to {_dispatch.chunk_depth(best)} steps"
          + (f" (sized to L2_CHUNK_L1_FACTOR={_dispatch.L2_CHUNK_L1_FACTOR} x L1: the {best} "
             "kernels read B from L2 as fast as they use it)"
             if _dispatch.b_streams_from_l2(best) else ""))
    print(f"  L2 cache: {_dispatch.l2_bytes() // 1024} KiB per core"
          + ("" if load_kernels().l2_bytes() else " (assumed: neither the CPU nor the OS reports it)"))
    speedup = _dispatch.fma_512_speedup()
    if speedup:
        print(f"  512-bit FMAs: {speedup:.2f}x the 256-bit rate per FLOP, measured: "
              + ("native" if _dispatch.native_512_fma() else "split in two")
              + f" (native from NATIVE_512_MIN_SPEEDUP={_dispatch.NATIVE_512_MIN_SPEEDUP})")
    print("  kernel families (rows x positions per micro-kernel call):")
    for family in _dispatch.families():
        print(f"    {_describe_family(family)}")
    print(f"  preferred kernel set: {_dispatch.preferred_kernel_set()} "
          f"(override: {_dispatch.KERNEL_SET_VARIABLE}=" + "|".join(_dispatch.available_kernel_sets())
          + ")")
    print(f"  BLAS: {describe_blas()}")
    print(f"  numpy {np.__version__}, Python {sys.version.split()[0]}")
    layer = ConvTranspose(**SAMPLE_LAYER)
    x_shape, w_shape = SAMPLE_SHAPES
    print(f"  sample call: {layer!r} on x {x_shape} float32, w {w_shape}:")
    for line in str(explain(layer, x_shape, w_shape, np.float32)).splitlines():
        print(f"    {line.strip()}")
    return 0


COMMANDS = {
    "demo": "upsample a synthetic image x2, time it and compare with a float64 reference",
    "info": "print the version, dtypes, threads, kernel sets, BLAS and a sample call's plan",
    "upsample": "upsample an image or volume (.npy or TIFF) by integer factors",
}


def _parser():
    parser = argparse.ArgumentParser(
        prog="python -m convt",
        description="convt: exact ONNX ConvTranspose and Conv for NumPy arrays, and image upsampling.",
        epilog="Run 'python -m convt COMMAND --help' for the options of a command.")
    parser.add_argument("--version", action="version", version=f"convt {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                     title="commands")
    for name, summary in COMMANDS.items():
        command = commands.add_parser(name, help=summary, description=summary[0].upper()
                                      + summary[1:] + ".")
        if name == "upsample":
            from ._cli_upsample import add_arguments

            add_arguments(command)
    return parser


def main(argv=None):
    arguments = _parser().parse_args(argv)
    if arguments.command == "upsample":
        from ._cli_upsample import run

        return run(arguments)
    return demo() if arguments.command == "demo" else info()


if __name__ == "__main__":
    sys.exit(main())
