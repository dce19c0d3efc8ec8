"""Channels-last against channels-first: convt's time for NXC/XOI over NCX/IOX.

The same workload (benchmarks/workloads.py) runs in both layouts, calls
interleaved, each writing into its own reused ``out=`` array; the median of
``--repeat`` calls is reported with the ratio.  NXC data is read and written in
place through strides, so the ratio measures the kernels' strided accesses.

Usage:
    python benchmarks/layouts.py [--threads N] [--repeat R] [--only name1,name2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from convt import ConvTranspose
from workloads import WORKLOADS, WORKLOADS_BY_NAME, make_inputs


def _layer(workload, threads, channels_last):
    formats = dict(data_format="NXC", filter_format="XOI") if channels_last else {}
    return ConvTranspose(strides=workload.stride, pads=workload.onnx_pads,
                         dilations=workload.dilation, group=workload.group,
                         output_padding=workload.output_padding, num_threads=threads,
                         **formats)


def measure(workload, threads, repeat):
    """Median seconds of (NCX, NXC) calls, interleaved."""
    x, w = make_inputs(workload)
    x_last = np.ascontiguousarray(np.moveaxis(x, 1, -1))
    w_last = np.ascontiguousarray(np.moveaxis(w, (0, 1), (-1, -2)))
    runs = []
    for layer, args in ((_layer(workload, threads, False), (x, w)),
                        (_layer(workload, threads, True), (x_last, w_last))):
        out = layer.apply(*args)                     # warm up, plan, and the out= array
        runs.append((layer, args, out, []))
    for _ in range(repeat):
        for layer, args, out, times in runs:
            start = time.perf_counter()
            layer.apply(*args, out=out)
            times.append(time.perf_counter() - start)
    # the layouts may run different engines (channels-last depthwise rows), which
    # sum in other orders: equal within rounding, not always bit for bit
    first, last = (np.moveaxis(runs[1][2], -1, 1).astype(np.float64),
                   runs[0][2].astype(np.float64))
    scale = np.abs(last).max() + 1e-30
    assert np.abs(first - last).max() <= 64 * np.finfo(runs[0][2].dtype).eps * scale, \
        "NXC and NCX results differ beyond rounding"
    return tuple(statistics.median(times) for *_, times in runs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--only", default="")
    arguments = parser.parse_args()
    names = [name for name in arguments.only.split(",") if name]
    workloads = [WORKLOADS_BY_NAME[name] for name in names] if names else WORKLOADS
    print("| workload | shape | NCX ms | NXC ms | NXC / NCX |")
    print("|---|---|---|---|---|")
    for workload in workloads:
        ncx, nxc = measure(workload, arguments.threads, arguments.repeat)
        print(f"| {workload.name} | {workload.describe()} | {ncx * 1e3:.2f} | {nxc * 1e3:.2f} "
              f"| {nxc / ncx:.2f} |", flush=True)


if __name__ == "__main__":
    main()
