"""Benchmark convt's ConvTranspose against torch, onnxruntime and OpenVINO.

Optional dependencies (the `bench` extra of pyproject.toml):
    torch==2.13.0  onnx  onnxruntime  openvino  matplotlib  threadpoolctl
Every engine is optional: one that cannot be imported, or cannot run a
workload, is reported as n/a with the reason.

Usage:
    python benchmarks/run.py [--threads N] [--repeat R] [--only name1,name2]
                             [--engines convt,torch,onnxruntime,openvino]
                             [--out benchmarks/results]

Writes <out>/<YYYY-MM-DD>-t<N>.md, <out>/latest.md, <out>/latest.json and
<out>/latest.png. See benchmarks/README.md for what is measured.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Iterable

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from engines import (
    ENGINE_NAMES,
    Call,
    EngineUnavailable,
    describe_failure,
    import_engine,
    module_version,
    prepare_engine,
    usable_cores,
)
from report import update_readme, write_reports
from workloads import WORKLOADS_BY_NAME, Workload, make_inputs, reference_output

README = Path(__file__).resolve().parent.parent / "README.md"
MIN_REPEAT = 7
ROOFLINE_SIZE = 2048
ROOFLINE_REPEAT = 7
# Before every timed call the harness first waits until this process uses no
# CPU: after a call, thread pools keep spinning (measured here: onnxruntime
# ~40 ms, OpenBLAS ~100 ms, torch's OpenMP ~6 ms) and would steal the cores of
# the next engine on a small machine. It then makes one untimed call of the
# engine about to be timed, so that its threads (and a VM's idle vCPUs) are
# awake: every engine is timed hot, as in a loop, never just after waking up.
IDLE_SLICE_SECONDS = 0.005
IDLE_BUSY_FRACTION = 0.1
IDLE_TIMEOUT_SECONDS = 1.0
VERSIONED_MODULES = ("convt", "numpy", "torch", "onnx", "onnxruntime", "openvino", "threadpoolctl")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options, validated."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=usable_cores(),
                        help="threads for every engine (default: the cores this process may use)")
    parser.add_argument("--repeat", type=int, default=9,
                        help=f"timed calls per engine and workload, >= {MIN_REPEAT} (default: 9)")
    parser.add_argument("--only", help="comma-separated workload names (default: all)")
    parser.add_argument("--engines", default=",".join(ENGINE_NAMES),
                        help="comma-separated engines (default: all)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results",
                        help="output directory (default: benchmarks/results)")
    parser.add_argument("--readme", type=Path, nargs="?", const=README, default=None,
                        help="also replace the benchmark section of this README "
                             "(default when given without a path: the repository's README.md)")
    args = parser.parse_args(argv)  # fmt: skip
    if args.threads < 1:
        parser.error("--threads must be >= 1")
    if args.repeat < MIN_REPEAT:
        parser.error(f"--repeat must be >= {MIN_REPEAT}")
    args.engines = split_names(parser, args.engines, ENGINE_NAMES, "engine")
    names = split_names(parser, args.only, WORKLOADS_BY_NAME, "workload") if args.only else WORKLOADS_BY_NAME
    args.workloads = [WORKLOADS_BY_NAME[name] for name in names]
    return args


def split_names(parser: argparse.ArgumentParser, text: str, known: Iterable[str], kind: str) -> list[str]:
    """Split a comma-separated list and reject unknown names."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        parser.error(f"unknown {kind}(s) {unknown}; choose from {', '.join(known)}")
    return names


def matmul_gflops(dtype: str) -> float:
    """NumPy square matmul rate in GFLOP/s (median of ROOFLINE_REPEAT calls)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((ROOFLINE_SIZE, ROOFLINE_SIZE)).astype(dtype)
    b = rng.standard_normal((ROOFLINE_SIZE, ROOFLINE_SIZE)).astype(dtype)
    a @ b  # warm-up
    seconds = []
    for _ in range(ROOFLINE_REPEAT):
        start = time.perf_counter()
        a @ b
        seconds.append(time.perf_counter() - start)
    return 2 * ROOFLINE_SIZE**3 / statistics.median(seconds) / 1e9


def measure_roofline() -> dict[str, float]:
    """Matmul GFLOP/s for float32 and float64: the practical peak of this machine."""
    wait_until_idle()
    return {dtype: matmul_gflops(dtype) for dtype in ("float32", "float64")}


def output_errors(output: np.ndarray, reference: np.ndarray | None) -> dict:
    """Max abs error and max abs error relative to max |reference|."""
    if reference is None:
        return {"max_abs_err": None, "max_rel_err": None}
    if output.shape != reference.shape:
        raise ValueError(f"wrong output shape {output.shape}, expected {reference.shape}")
    max_abs_err = float(np.max(np.abs(output.astype(np.float64) - reference)))
    return {"max_abs_err": max_abs_err, "max_rel_err": max_abs_err / float(np.max(np.abs(reference)))}


def prepare_and_check(
    engines: list[str],
    workload: Workload,
    x: np.ndarray,
    w: np.ndarray,
    threads: int,
    reference: np.ndarray | None,
) -> tuple[dict[str, Call], dict[str, dict]]:
    """Build every engine, make its warm-up call and measure its error.

    Returns the calls to time and one result record per engine; an engine
    that fails here gets {"unavailable": reason} and no call.
    """
    calls, results = {}, {}
    for engine in engines:
        try:
            call = prepare_engine(engine, workload, x, w, threads)
            results[engine] = output_errors(call(), reference)
            calls[engine] = call
        except Exception as exc:  # never crash: report the engine as n/a
            results[engine] = {"unavailable": describe_failure(exc)}
    return calls, results


def time_round_robin(calls: dict[str, Call], repeat: int) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Time `repeat` calls per engine, interleaved, in milliseconds.

    The engine order rotates every round so no engine always follows the
    same one. Each timed call follows an idle wait and an untimed priming
    call (see IDLE_SLICE_SECONDS). Returns the timings and the engines that
    failed mid-way.
    """
    times_ms = {engine: [] for engine in calls}
    failures = {}
    names = list(calls)
    for round_index in range(repeat):
        shift = round_index % len(names)
        for engine in names[shift:] + names[:shift]:
            if engine in failures:
                continue
            wait_until_idle()
            try:
                calls[engine]()  # priming call, untimed
                times_ms[engine].append(time_one_call(calls[engine]))
            except Exception as exc:
                failures[engine] = describe_failure(exc)
    return times_ms, failures


def wait_until_idle() -> None:
    """Sleep until the process's own threads stop using CPU (pools have parked).

    Returns after a slice in which this process used less than
    IDLE_BUSY_FRACTION of one core, or after IDLE_TIMEOUT_SECONDS.
    """
    deadline = time.perf_counter() + IDLE_TIMEOUT_SECONDS
    while time.perf_counter() < deadline:
        cpu_seconds = time.process_time()
        time.sleep(IDLE_SLICE_SECONDS)
        if time.process_time() - cpu_seconds < IDLE_BUSY_FRACTION * IDLE_SLICE_SECONDS:
            return


def time_one_call(call: Call) -> float:
    """Wall time of one call in ms, with the garbage collector paused."""
    gc.disable()
    try:
        start = time.perf_counter()
        call()
        return (time.perf_counter() - start) * 1e3
    finally:
        gc.enable()


SINGLE_THREAD = "convt@1"  # convt at one thread, timed alongside for the scaling table


def add_single_thread_convt(calls: dict[str, Call], results: dict[str, dict],
                            workload: Workload, x: np.ndarray, w: np.ndarray) -> None:
    """Time convt at one thread in the same rounds, when convt runs at more."""
    try:
        call = prepare_engine("convt", workload, x, w, 1)
        call()
        calls[SINGLE_THREAD], results[SINGLE_THREAD] = call, {}
    except Exception as exc:
        results[SINGLE_THREAD] = {"unavailable": describe_failure(exc)}


def benchmark_workload(workload: Workload, engines: list[str], threads: int, repeat: int) -> dict:
    """Accuracy and timings of every engine on one workload."""
    x, w = make_inputs(workload)
    record = {
        "name": workload.name,
        "dtype": workload.dtype,
        "shape": workload.describe(),
        "flops": workload.flops,
    }
    try:
        reference = reference_output(workload, x, w)
        record["reference"] = "torch float64"
    except Exception as exc:
        reference = None
        record["reference"] = "unavailable: " + describe_failure(exc)
    calls, results = prepare_and_check(engines, workload, x, w, threads, reference)
    if "convt" in calls and threads > 1:
        add_single_thread_convt(calls, results, workload, x, w)
    if calls:
        times_ms, failures = time_round_robin(calls, repeat)
        for engine, milliseconds in times_ms.items():
            if engine in failures:
                results[engine] = {"unavailable": failures[engine]}
            else:
                median_ms = statistics.median(milliseconds)
                results[engine].update(
                    times_ms=milliseconds, median_ms=median_ms, gflops=workload.flops / median_ms / 1e6
                )
    record["engines"] = results
    return record


def cpu_model() -> str:
    """CPU model name from /proc/cpuinfo, else what platform reports."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def has_avx512() -> bool | None:
    """Whether the CPU reports AVX-512F, None if /proc/cpuinfo is unreadable."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return " avx512f " in cpuinfo.read()
    except OSError:
        return None


def environment(threads: int, repeat: int) -> dict:
    """Machine, thread count and library versions of this run."""
    return {
        "date": datetime.date.today().isoformat(),
        "threads": threads,
        "repeat": repeat,
        "machine": {
            "cpu": cpu_model(),
            "avx512": has_avx512(),
            "logical_cpus": os.cpu_count(),
            "usable_cores": usable_cores(),
            "platform": platform.platform(),
        },
        "versions": {"python": platform.python_version()}
        | {name: module_version(name) for name in VERSIONED_MODULES},
        "thread_pools": [
            " ".join(filter(None, (pool["prefix"], pool["version"]))) + f" ({pool['num_threads']} threads)"
            for pool in threadpool_info()
        ],
    }


def cpu_time_snapshot() -> tuple[float, float, float] | None:
    """(wall s, busy CPU s of the whole machine, CPU s of this process); None without /proc/stat."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(value) for value in stat.readline().split()[1:9]]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    busy_seconds = (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    own = os.times()
    return time.perf_counter(), busy_seconds, own.user + own.system


def other_processes_load(start: tuple | None, end: tuple | None) -> float | None:
    """Fraction of the machine's CPUs used by other processes (or stolen by the
    hypervisor) between two snapshots: the noise this run competed with."""
    if start is None or end is None:
        return None
    wall, busy, own = (after - before for before, after in zip(start, end))
    return max(0.0, (busy - own) / (wall * (os.cpu_count() or 1)))


def run(args: argparse.Namespace) -> dict:
    """The whole benchmark: roofline, workloads, roofline again."""
    snapshot_before = cpu_time_snapshot()
    roofline_before = measure_roofline()
    print(f"roofline before: {format_rates(roofline_before)}", flush=True)
    workload_records = []
    for workload in args.workloads:
        record = benchmark_workload(workload, args.engines, args.threads, args.repeat)
        print(progress_line(record), flush=True)
        workload_records.append(record)
    roofline_after = measure_roofline()
    print(f"roofline after:  {format_rates(roofline_after)}", flush=True)
    load = other_processes_load(snapshot_before, cpu_time_snapshot())
    return {
        **environment(args.threads, args.repeat),
        "engines": args.engines,
        "other_processes_cpu_load": load,
        "roofline_gflops": {
            "matrix_size": ROOFLINE_SIZE,
            "before": roofline_before,
            "after": roofline_after,
            "best": {dtype: max(roofline_before[dtype], roofline_after[dtype]) for dtype in roofline_before},
        },
        "workloads": workload_records,
    }


def format_rates(rates: dict[str, float]) -> str:
    """'float32 200.0 GFLOP/s, float64 100.0 GFLOP/s'."""
    return ", ".join(f"{dtype} {gflops:.1f} GFLOP/s" for dtype, gflops in rates.items())


def progress_line(record: dict) -> str:
    """One console line per workload: median ms or n/a per engine."""
    cells = []
    for engine, result in record["engines"].items():
        cells.append(f"{engine} {result['median_ms']:.3g} ms" if "median_ms" in result else f"{engine} n/a")
    return f"{record['name']:<18} " + " | ".join(cells)


def warn_if_convt_missing(engines: list[str]) -> None:
    """convt is optional here: say so loudly, then benchmark the other engines."""
    if "convt" not in engines:
        return
    try:
        import_engine("convt")
    except EngineUnavailable as exc:
        print(f"WARNING: {exc}; convt is reported as n/a, the other engines still run.", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    """Parse the options, run everything under the BLAS/OpenMP thread limit, write the reports."""
    args = parse_args(argv)
    warn_if_convt_missing(args.engines)
    print(f"threads={args.threads} repeat={args.repeat} engines={','.join(args.engines)}", flush=True)
    with threadpool_limits(limits=args.threads):
        results = run(args)
    for path in write_reports(results, args.out):
        print(f"wrote {path}")
    if args.readme:
        print(f"updated {update_readme(results, args.readme)}")


if __name__ == "__main__":
    main()
