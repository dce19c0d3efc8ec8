"""Upsampling x2: convt.upsample vs skimage.transform.rescale vs scipy.ndimage.zoom.

Each (workload, engine) runs in its own Python process, so that one engine's
allocations, thread pools and page cache do not touch another's timings.  Every
process makes the same input (a seeded generator), calls its engine once to
warm up, then times ``--repeat`` calls, each returning a new array (as all three
libraries do by default).  Medians are reported.

Engines, all on the same grid (pixel centres at (i + 0.5) * 2 - 0.5) and the
same boundary ('edge' / 'nearest'):

- convt:  ``convt.upsample(x, 2, kernel=k, mode="edge")``, all cores (OpenMP);
- convt@1: the same with ``num_threads=1``;
- scipy:  ``scipy.ndimage.zoom(x, 2, order=o, grid_mode=True, mode="nearest")`` (one core);
- skimage: ``skimage.transform.rescale(x, 2, order=o, mode="edge")`` (one core; it calls
  scipy.ndimage.zoom and clips to the input range).

Kernels: linear (order 1, the same numbers in all three) and nearest (order 0).
'cubic' (not run by default) is Keys' cubic convolution in convt and a
prefiltered cubic B-spline in scipy/skimage (order 3): a different
interpolation, timed for reference only (scipy takes about 30 s per call on the
volume).

``--passes`` instead times, in this process and interleaved, convt's one N-D
ConvTranspose against one 1-D ConvTranspose per axis (the design choice of
convt.upsample), both writing into preallocated arrays, without the border
correction (the same in both).

Usage:
    python benchmarks/upsample.py [--repeat 7] [--kernels linear,nearest,cubic]
                                  [--engines convt,convt@1,scipy,skimage] [--out DIR]
    python benchmarks/upsample.py --passes [--repeat 9]

Writes <out>/upsample-latest.md and <out>/upsample-latest.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

WORKLOADS = {"image2d_2048": (2048, 2048), "volume3d_256": (256, 256, 256)}
ENGINES = ("convt", "convt@1", "scipy", "skimage")
ORDERS = {"nearest": 0, "linear": 1, "cubic": 3}
HERE = Path(__file__).resolve().parent


def make_input(shape):
    import numpy as np

    return np.random.default_rng(20261122).random(shape, dtype=np.float32)


def engine_call(engine, kernel):
    """A function x -> upsampled x, and a description of the call."""
    order = ORDERS[kernel]
    if engine.startswith("convt"):
        import convt

        threads = 1 if engine == "convt@1" else None
        return (lambda x: convt.upsample(x, 2, kernel=kernel, mode="edge", num_threads=threads),
                f"convt {convt.__version__}")
    if engine == "scipy":
        import scipy
        from scipy import ndimage

        return (lambda x: ndimage.zoom(x, 2, order=order, grid_mode=True, mode="nearest"),
                f"scipy {scipy.__version__}")
    import skimage
    from skimage import transform

    return (lambda x: transform.rescale(x, 2, order=order, mode="edge"),
            f"scikit-image {skimage.__version__}")


def worker(engine, workload, kernel, repeat):
    """Time one engine on one workload in this process; print a JSON line."""
    x = make_input(WORKLOADS[workload])
    call, version = engine_call(engine, kernel)
    result = call(x)
    shape, dtype = result.shape, str(result.dtype)
    del result
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = call(x)
        times.append(time.perf_counter() - start)
        del result
    print(json.dumps({"engine": engine, "workload": workload, "kernel": kernel,
                      "version": version, "shape": shape, "dtype": dtype, "times": times}))


def run_worker(engine, workload, kernel, repeat):
    command = [sys.executable, __file__, "--worker", engine, workload, kernel, str(repeat)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        reason = (result.stderr.strip().splitlines() or ["failed"])[-1]
        return {"engine": engine, "workload": workload, "kernel": kernel, "error": reason}
    return json.loads(result.stdout.strip().splitlines()[-1])


def compare_passes(repeat):
    """Median ms of one N-D ConvTranspose vs one 1-D ConvTranspose per axis, interleaved."""
    import numpy as np

    from convt import ConvTranspose, kernels

    print("| workload | kernel | one N-D call ms | 1-D passes ms |")
    print("|---|---|---|---|")
    for workload, shape in WORKLOADS.items():
        x = make_input(shape)[np.newaxis, np.newaxis]
        ndim = len(shape)
        for kernel in ("linear", "cubic"):
            taps = kernels.taps(kernel, 2).astype(np.float32)
            pad = kernels.pads(kernel, 2, ndim=1)[0]
            whole = ConvTranspose(strides=(2,) * ndim, pads=(pad,) * 2 * ndim)
            weight = kernels.weights(kernel, 2, ndim, dtype=np.float32)
            out = np.empty(x.shape[:2] + tuple(2 * n for n in shape), np.float32)
            passes, current = [], list(x.shape)
            for axis in range(ndim):  # the first axis first: the cheapest order measured
                sizes = [1] * ndim
                sizes[axis] = len(taps)
                strides, pads = [1] * ndim, [0] * ndim
                strides[axis], pads[axis] = 2, pad
                current[2 + axis] *= 2
                passes.append((ConvTranspose(strides=tuple(strides), pads=tuple(pads * 2)),
                               taps.reshape([1, 1] + sizes), np.empty(current, np.float32)))

            def one_call():
                whole.apply(x, weight, out=out)

            def per_axis():
                current = x
                for layer, w, result in passes:
                    current = layer.apply(current, w, out=result)

            times = {one_call: [], per_axis: []}
            for function in times:
                function()
            for _ in range(repeat):
                for function, spent in times.items():
                    start = time.perf_counter()
                    function()
                    spent.append(time.perf_counter() - start)
            medians = [statistics.median(times[f]) * 1e3 for f in (one_call, per_axis)]
            print(f"| {workload} | {kernel} | {medians[0]:.1f} | {medians[1]:.1f} |", flush=True)


def load_average():
    try:
        return os.getloadavg()
    except OSError:
        return None


def report(results):
    """A Markdown table: median ms per engine, and convt's speed-up over each other engine."""
    calls = {}
    for r in results:
        if "times" in r:
            calls.setdefault(r["engine"], set()).add(len(r["times"]))
    counts = ", ".join(f"{engine} {'/'.join(map(str, sorted(n)))}" for engine, n in calls.items())
    lines = [f"# Upsampling x2: convt vs scikit-image vs scipy ({datetime.date.today()})", "",
             f"{platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs, "
             f"Python {platform.python_version()}; medians (calls per engine: {counts}), each "
             f"engine in its own process; float32 input, new output array per call.", ""]
    versions = sorted({r["version"] for r in results if "version" in r})
    lines += ["Versions: " + ", ".join(versions), ""]
    lines += ["| workload | kernel | " + " | ".join(f"{e} ms" for e in ENGINES)
              + " | convt vs scipy | convt vs skimage |",
              "|---" * (len(ENGINES) + 4) + "|"]
    keys = sorted({(r["workload"], r["kernel"]) for r in results},
                  key=lambda k: (list(WORKLOADS).index(k[0]), list(ORDERS).index(k[1])))
    for workload, kernel in keys:
        medians = {}
        for r in results:
            if (r["workload"], r["kernel"]) == (workload, kernel) and "times" in r:
                medians[r["engine"]] = statistics.median(r["times"]) * 1e3
        cells = [f"{medians[e]:.1f}" if e in medians else "n/a" for e in ENGINES]
        ratios = [f"{medians[o] / medians['convt']:.1f}×" if {o, "convt"} <= medians.keys()
                  else "n/a" for o in ("scipy", "skimage")]
        label = kernel + (" (scipy/skimage: B-spline)" if kernel == "cubic" else "")
        lines.append(f"| {workload} {'x'.join(map(str, WORKLOADS[workload]))} | {label} | "
                     + " | ".join(cells + ratios) + " |")
    failures = [r for r in results if "error" in r]
    if failures:
        lines += ["", "Failures:"] + [f"- {r['engine']} {r['workload']} {r['kernel']}: "
                                      f"{r['error']}" for r in failures]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--kernels", default="linear,nearest")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--only", default=",".join(WORKLOADS), help="workloads")
    parser.add_argument("--out", default=str(HERE / "results"))
    parser.add_argument("--merge", action="store_true",
                        help="keep the other engines' results of <out>/upsample-latest.json")
    parser.add_argument("--passes", action="store_true",
                        help="time one N-D call against one 1-D call per axis")
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.passes:
        compare_passes(arguments.repeat)
        return 0
    if arguments.worker:
        engine, workload, kernel, repeat = arguments.worker
        worker(engine, workload, kernel, int(repeat))
        return 0
    before = load_average()
    results = []
    for workload in arguments.only.split(","):
        for kernel in arguments.kernels.split(","):
            for engine in arguments.engines.split(","):
                result = run_worker(engine, workload, kernel, arguments.repeat)
                results.append(result)
                shown = (f"{statistics.median(result['times']) * 1e3:.1f} ms" if "times" in result
                         else result["error"])
                print(f"{workload:14s} {kernel:8s} {engine:8s} {shown}", flush=True)
    out = Path(arguments.out)
    if arguments.merge and (out / "upsample-latest.json").exists():
        fresh = {(r["engine"], r["workload"], r["kernel"]) for r in results}
        kept = [r for r in json.loads((out / "upsample-latest.json").read_text())
                if (r["engine"], r["workload"], r["kernel"]) not in fresh]
        results = kept + results
    text = report(results)
    after = load_average()
    if before and after:
        text += (f"\nLoad average (1 min) before and after the run: {before[0]:.2f}, "
                 f"{after[0]:.2f}.\n")
    print()
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    (out / "upsample-latest.md").write_text(text)
    (out / "upsample-latest.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
