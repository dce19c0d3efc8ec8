"""Benchmark convt's ConvTranspose against torch, onnxruntime and OpenVINO.

Every engine runs in a worker process of its own (one per engine and thread
count, spawned once and kept across workloads); this driver times them in
turn, with idle gaps between engines, at N threads and at 1 thread, and
measures the CPU's FMA peak in the same run.

Optional dependencies (the `bench` extra of pyproject.toml):
    torch==2.13.0  onnx  onnxruntime  openvino  matplotlib  threadpoolctl
Every engine is optional: one that cannot be imported, or cannot run a
workload, is reported as n/a with the reason.

Usage:
    python benchmarks/run.py [--threads N] [--repeat R] [--set table|extended|all]
                             [--only name1,name2] [--engines convt,convt_out,convt_bound,torch,...]
                             [--out benchmarks/results] [--readme [README.md]]

Writes <out>/<YYYY-MM-DD>-t<N>.md, <out>/latest.md, <out>/latest.json and
<out>/latest.png. See benchmarks/README.md for what is measured.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile
from pathlib import Path
from typing import Iterable

from engines import ENGINE_NAMES, convt_revision, distribution_version, prepare_in, time_in_turn
from machine import (
    cpu_description,
    load_average,
    load_snapshot,
    other_processes_load,
    usable_cores,
    wait_until_idle,
)
from report import update_readme, write_reports
from workers import TaskFailed, Worker, WorkerFailed, describe_failure
from workloads import SET_OF, WORKLOAD_SETS, WORKLOADS_BY_NAME, Workload

README = Path(__file__).resolve().parent.parent / "README.md"
MIN_REPEAT = 7
VERSIONED = ("convt", "numpy", "torch", "onnx", "onnxruntime", "openvino", "threadpoolctl")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options, validated."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--threads",
        type=int,
        default=usable_cores(),
        help="threads for every engine (default: the cores this process may use); "
        "every engine is also measured at 1 thread",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=9,
        help=f"timed calls per engine, workload and thread count, >= {MIN_REPEAT} (default: 9)",
    )
    parser.add_argument(
        "--set",
        dest="workload_set",
        choices=[*WORKLOAD_SETS, "all"],
        default="all",
        help="which workloads: the README's table, the extended set, or all (default)",
    )
    parser.add_argument("--only", help="comma-separated workload names from any set (overrides --set)")
    parser.add_argument(
        "--engines", default=",".join(ENGINE_NAMES), help="comma-separated engines (default: all)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent / "results",
        help="output directory (default: benchmarks/results)",
    )
    parser.add_argument(
        "--readme",
        type=Path,
        nargs="?",
        const=README,
        default=None,
        help="also replace the benchmark section of this README "
        "(default when given without a path: the repository's README.md)",
    )
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error("--threads must be >= 1")
    if args.repeat < MIN_REPEAT:
        parser.error(f"--repeat must be >= {MIN_REPEAT}")
    args.engines = split_names(parser, args.engines, ENGINE_NAMES, "engine")
    if args.only:
        args.workloads = [
            WORKLOADS_BY_NAME[name] for name in split_names(parser, args.only, WORKLOADS_BY_NAME, "workload")
        ]
    else:
        sets = list(WORKLOAD_SETS) if args.workload_set == "all" else [args.workload_set]
        args.workloads = [workload for name in sets for workload in WORKLOAD_SETS[name]]
    args.thread_counts = [args.threads, 1] if args.threads > 1 else [1]
    return args


def split_names(parser: argparse.ArgumentParser, text: str, known: Iterable[str], kind: str) -> list[str]:
    """Split a comma-separated list and reject unknown names."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        parser.error(f"unknown {kind}(s) {unknown}; choose from {', '.join(known)}")
    return names


class Workers:
    """Every worker process of a run: one per (engine, thread count), one that
    computes the float64 references, one that measures the peaks."""

    def __init__(self, engines: list[str], thread_counts: list[int]) -> None:
        self.engines = {
            (engine, threads): Worker(f"{engine}@{threads}", "engines", threads)
            for threads in thread_counts
            for engine in engines
        }
        self.reference = Worker("reference", "engines", None)
        self.peaks = Worker("peaks", "peaks", None)
        for worker in self.all():
            worker.start()

    def all(self) -> list[Worker]:
        return [*self.engines.values(), self.reference, self.peaks]

    def pids(self) -> list[int]:
        """Process ids of the running workers: whose CPU use must settle before a timed call."""
        return [worker.pid for worker in self.all() if worker.pid is not None]

    def at(self, threads: int) -> dict[str, Worker]:
        """The engine workers running at `threads` threads, by engine."""
        return {engine: worker for (engine, count), worker in self.engines.items() if count == threads}

    def stop(self) -> None:
        for worker in self.all():
            worker.stop()


def measure_peaks(workers: Workers, thread_counts: list[int]) -> dict:
    """FMA peaks and NumPy matmul rates per thread count, measured by the peaks
    worker while the engine workers are idle."""
    return {
        key: {str(threads): peak_task(workers, task, threads) for threads in thread_counts}
        for key, task in (("fma", "fma_peaks"), ("matmul", "matmul_rates"))
    }


def peak_task(workers: Workers, task: str, threads: int) -> dict:
    """One task of the peaks worker once all workers are idle; {"unavailable": reason} if it fails."""
    wait_until_idle(workers.pids())
    try:
        return workers.peaks.call(task, threads)
    except (TaskFailed, WorkerFailed) as exc:
        return {"unavailable": describe_failure(exc)}


def write_reference(workers: Workers, workload: Workload, directory: str) -> tuple[str | None, str]:
    """(path of the .npy float64 reference or None, how it was made or why it is missing)."""
    path = os.path.join(directory, f"{workload.name}.npy")
    try:
        return path, workers.reference.call("write_reference", workload, path)
    except (TaskFailed, WorkerFailed) as exc:
        return None, "unavailable: " + describe_failure(exc)


def timed_results(
    workload: Workload,
    engine_workers: dict[str, Worker],
    threads: int,
    reference_path: str | None,
    repeat: int,
    all_workers: Workers,
) -> dict[str, dict]:
    """Build every engine in its worker, check its first call, then time the engines in turn.

    Returns per engine its errors plus every time, the median and GFLOP/s,
    or {"unavailable": reason}.
    """
    results = {
        engine: prepare_in(worker, engine, workload, threads, reference_path)
        for engine, worker in engine_workers.items()
    }
    ready = {
        engine: engine_workers[engine] for engine, result in results.items() if "unavailable" not in result
    }
    if not ready:
        return results
    for engine, timing in time_in_turn(ready, repeat, all_workers.pids).items():
        if "unavailable" in timing:
            results[engine] = timing
        else:
            results[engine] |= timing | {"gflops": workload.flops / timing["median_ms"] / 1e6}
    return results


def benchmark_workload(
    workload: Workload, workers: Workers, thread_counts: list[int], repeat: int, scratch: str
) -> dict:
    """Accuracy and timings of every engine on one workload, at every thread count."""
    reference_path, reference = write_reference(workers, workload, scratch)
    record = {
        "name": workload.name,
        "set": SET_OF[workload.name],
        "dtype": workload.dtype,
        "shape": workload.describe(),
        "flops": workload.flops,
        "reference": reference,
        "threads": {},
    }
    for threads in thread_counts:
        results = timed_results(workload, workers.at(threads), threads, reference_path, repeat, workers)
        record["threads"][str(threads)] = results
        print(progress_line(workload.name, threads, record["threads"][str(threads)]), flush=True)
    for worker in workers.engines.values():
        try:
            worker.call("release")
        except (TaskFailed, WorkerFailed):
            pass  # a dead worker holds nothing
    if reference_path and os.path.exists(reference_path):
        os.remove(reference_path)
    return record


def progress_line(name: str, threads: int, results: dict[str, dict]) -> str:
    """One console line per workload and thread count: median ms or n/a per engine."""
    cells = [
        f"{engine} {result['median_ms']:.3g} ms" if "median_ms" in result else f"{engine} n/a"
        for engine, result in results.items()
    ]
    return f"{name:<20} t{threads} " + " | ".join(cells)


def thread_pools(workers: Workers) -> dict[str, list[str]]:
    """The BLAS/OpenMP pools each engine's worker (at N threads) has loaded."""
    pools = {}
    for (engine, _), worker in workers.engines.items():
        if engine not in pools:
            try:
                pools[engine] = worker.call("thread_pools")
            except (TaskFailed, WorkerFailed) as exc:
                pools[engine] = [describe_failure(exc)]
    return pools


def run(args: argparse.Namespace) -> dict:
    """The whole benchmark: peaks, workloads at every thread count, peaks again."""
    load_start, load_average_at_start = load_snapshot(), load_average()
    workers = Workers(args.engines, args.thread_counts)
    try:
        peaks_before = measure_peaks(workers, args.thread_counts)
        print(f"FMA peaks before: {peaks_before['fma']}", flush=True)
        with tempfile.TemporaryDirectory(prefix="convt-bench-") as scratch:
            records = [
                benchmark_workload(workload, workers, args.thread_counts, args.repeat, scratch)
                for workload in args.workloads
            ]
        peaks_after = measure_peaks(workers, args.thread_counts)
        print(f"FMA peaks after:  {peaks_after['fma']}", flush=True)
        pools = thread_pools(workers)
    finally:
        workers.stop()
    return {
        "date": datetime.date.today().isoformat(),
        "threads": args.threads,
        "thread_counts": args.thread_counts,
        "repeat": args.repeat,
        "machine": cpu_description(),
        "versions": {"python": sys.version.split()[0]}
        | {name: distribution_version(name) for name in VERSIONED},
        "convt_revision": convt_revision(),
        "engines": args.engines,
        "thread_pools": pools,
        "load_average_at_start": load_average_at_start,
        "other_processes_cpu_load": other_processes_load(load_start, load_snapshot()),
        "peaks": {"before": peaks_before, "after": peaks_after, "best": best_of(peaks_before, peaks_after)},
        "workloads": records,
    }


def best_of(before: dict, after: dict) -> dict:
    """The higher of two peak measurements, kernel set by kernel set (a peak is a capability)."""

    def merge(first, second):
        if isinstance(first, dict) and isinstance(second, dict):
            if "unavailable" in first:
                return second
            if "unavailable" in second:
                return first
            return {key: merge(first[key], second[key]) for key in first if key in second}
        return max(first, second)

    return merge(before, after)


def main(argv: list[str] | None = None) -> None:
    """Parse the options, run, write the reports (and the README section)."""
    args = parse_args(argv)
    print(
        f"threads={args.thread_counts} repeat={args.repeat} engines={','.join(args.engines)} "
        f"workloads={len(args.workloads)}",
        flush=True,
    )
    results = run(args)
    for path in write_reports(results, args.out):
        print(f"wrote {path}")
    if args.readme:
        print(f"updated {update_readme(results, args.readme)}")


if __name__ == "__main__":
    main()
