"""Narrow storage types against float32: convt's time for float16 and bfloat16.

The same workload (benchmarks/workloads.py) runs with float32, float16 and
bfloat16 (ml_dtypes) operands, calls interleaved, each writing into its own
reused ``out=`` array; the median of ``--repeat`` calls is reported with each
narrow type's time over float32's.  Narrow types are converted tile by tile
inside the kernels and accumulated in float32, so the ratios measure the
conversions and the narrower memory traffic.

Usage:
    python benchmarks/narrow.py [--threads N] [--repeat R] [--only name1,name2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from convt import ConvTranspose
from workloads import TABLE, WORKLOADS_BY_NAME, make_inputs


def _dtypes():
    import ml_dtypes

    return {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
            "bfloat16": np.dtype(ml_dtypes.bfloat16)}


def measure(workload, threads, repeat):
    """Median seconds per dtype name, calls interleaved."""
    x, w = make_inputs(workload)
    layer = ConvTranspose(strides=workload.stride, pads=workload.onnx_pads,
                          dilations=workload.dilation, group=workload.group,
                          output_padding=workload.output_padding, num_threads=threads)
    runs = {}
    for name, dtype in _dtypes().items():
        args = (x.astype(np.float32).astype(dtype), w.astype(np.float32).astype(dtype))
        runs[name] = (args, layer.apply(*args), [])  # warm up, plan, the out= array
    for _ in range(repeat):
        for args, out, times in runs.values():
            start = time.perf_counter()
            layer.apply(*args, out=out)
            times.append(time.perf_counter() - start)
    return {name: statistics.median(times) for name, (_, _, times) in runs.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--only", default="", help="workload names (default: the table's)")
    arguments = parser.parse_args()
    names = [name for name in arguments.only.split(",") if name]
    workloads = [WORKLOADS_BY_NAME[name] for name in names] if names else TABLE
    print("| workload | shape | float32 ms | float16 ms | bfloat16 ms | float16 / float32 "
          "| bfloat16 / float32 |")
    print("|---|---|---|---|---|---|---|")
    for workload in workloads:
        t = measure(workload, arguments.threads, arguments.repeat)
        print(f"| {workload.name} | {workload.describe()} | {t['float32'] * 1e3:.2f} "
              f"| {t['float16'] * 1e3:.2f} | {t['bfloat16'] * 1e3:.2f} "
              f"| {t['float16'] / t['float32']:.2f} | {t['bfloat16'] / t['float32']:.2f} |",
              flush=True)


if __name__ == "__main__":
    main()
