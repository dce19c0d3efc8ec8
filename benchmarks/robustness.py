"""How convt behaves outside a quiet benchmark loop: a busy machine, the fixed cost of
tiny calls, and the first call of a fresh interpreter.

Usage:
    python benchmarks/robustness.py [--parts busy,latency,first-call] [--repeat R]
                                    [--threads N] [--out benchmarks/results]

Parts:
- busy: while one CPU-bound spinner process per core keeps the machine busy,
  a default-threads convt call (`num_threads=None`) against the same call
  with `num_threads=1`, over a size sweep; also measured quiet, for reference.
- latency: the fixed cost of tiny calls, back to back and after a 50 ms idle
  pause, for convt (default threads, 1 and N threads), PyTorch and
  onnxruntime (their default threads).
- first-call: `import convt` plus the first small `apply`, above
  `import numpy`, in fresh interpreters; and whether scipy got imported.

Every engine configuration runs in a worker process of its own (see
workers.py), with the thread environment untouched: what a user gets.
Writes <out>/robustness-latest.md and <out>/robustness-latest.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from engines import ENGINE_LABELS, convt_revision, distribution_version
from machine import (
    cpu_description,
    cpu_line,
    load_average,
    load_snapshot,
    other_processes_load,
    usable_cores,
    wait_until_idle,
)
from report import format_ms, markdown_table
from workers import TaskFailed, Worker, WorkerFailed, describe_failure
from workloads import WORKLOADS_BY_NAME, Workload

BUSY_TARGET = 1.3  # issue 11: default threads at most 1.3x slower than num_threads=1 on a busy machine
FIRST_CALL_TARGET_MS = 100.0
LATENCY_PAUSE_SECONDS = 0.05
BACK_TO_BACK_CALLS = 200
SPINNER_CODE = "while True:\n    pass\n"

# The busy sweep: image upsampling (one channel, memory-bound) from a tiny map
# to a large image, and a channel-heavy decoder layer from tiny to mid-size.
BUSY_SWEEP: tuple[Workload, ...] = (
    *(
        Workload(f"image_{size}", "float32", 1, 1, 1, (size, size), 4, 2, 1)
        for size in (8, 32, 128, 512, 1024, 2048)
    ),
    *(
        Workload(f"layer64_{size}", "float32", 1, 64, 32, (size, size), 4, 2, 1)
        for size in (8, 16, 32, 64, 128)
    ),
)
LATENCY_WORKLOADS: tuple[Workload, ...] = (
    WORKLOADS_BY_NAME["tiny8x8_k4s2"],
    Workload("image_8x8_c1", "float32", 1, 1, 1, (8, 8), 4, 2, 1),
)

FIRST_CALL_SCRIPT = """
import json, sys, time
start = time.perf_counter()
import numpy as np
x = np.ones((1, 8, 16, 16), np.float32)
w = np.ones((8, 4, 4, 4), np.float32)
numpy_done = time.perf_counter()
import convt
import_done = time.perf_counter()
scipy_after_import = "scipy" in sys.modules
convt.ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1)).apply(x, w)
apply_done = time.perf_counter()
print(json.dumps({"numpy_ms": 1e3 * (numpy_done - start), "import_ms": 1e3 * (import_done - numpy_done),
                  "apply_ms": 1e3 * (apply_done - import_done), "above_numpy_ms": 1e3 * (apply_done - numpy_done),
                  "scipy_after_import": scipy_after_import, "scipy_after_apply": "scipy" in sys.modules}))
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--parts", default="busy,latency,first-call", help="comma-separated parts to run (default: all three)"
    )
    parser.add_argument("--repeat", type=int, default=9, help="timed calls per measurement (default: 9)")
    parser.add_argument(
        "--threads",
        type=int,
        default=usable_cores(),
        help="the N of 'convt N threads' in the latency part (default: usable cores)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent / "results",
        help="output directory (default: benchmarks/results)",
    )
    args = parser.parse_args(argv)
    args.parts = [part.strip() for part in args.parts.split(",") if part.strip()]
    unknown = set(args.parts) - {"busy", "latency", "first-call"}
    if unknown or not args.parts:
        parser.error(f"unknown part(s) {sorted(unknown)}; choose from busy, latency, first-call")
    if args.repeat < 3 or args.threads < 1:
        parser.error("--repeat must be >= 3 and --threads >= 1")
    return args


# ---------------------------------------------------------------------------
# Helpers


@contextmanager
def spinners(count: int):
    """`count` CPU-bound Python processes spinning while the block runs (killed after it)."""
    processes = [subprocess.Popen([sys.executable, "-c", SPINNER_CODE]) for _ in range(count)]
    try:
        yield processes
    finally:
        for process in processes:
            process.kill()
        for process in processes:
            process.wait()


def median_or_none(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def prepare(worker: Worker, engine: str, workload: Workload, threads: int | None) -> str | None:
    """Prepare `engine` in `worker`; the reason it cannot run, or None."""
    try:
        worker.call("prepare", engine, workload, threads, None)
        return None
    except (TaskFailed, WorkerFailed) as exc:
        return describe_failure(exc)


def timed(worker: Worker, pids: list[int], count: int, pause: float = 0.0, prime: bool = True) -> list[float]:
    """Times (ms) of `count` calls of the prepared call in `worker`, after all `pids` are idle."""
    wait_until_idle(pids)
    return worker.call("time_calls", count, pause, prime)


# ---------------------------------------------------------------------------
# Part 1: busy machine


def busy_sweep(repeat: int) -> dict:
    """convt with default threads against num_threads=1, quiet then with every core busy."""
    workers = {
        "default": Worker("convt default", "engines", None),
        "one": Worker("convt 1 thread", "engines", None),
    }
    for worker in workers.values():
        worker.start()
    pids = [worker.pid for worker in workers.values()]
    rows = {workload.name: {"shape": workload.describe()} for workload in BUSY_SWEEP}
    try:
        for condition in ("quiet", "busy"):
            with spinners(usable_cores() if condition == "busy" else 0):
                for workload in BUSY_SWEEP:
                    prepared = {
                        "default": prepare(workers["default"], "convt", workload, None) or workers["default"],
                        "one": prepare(workers["one"], "convt", workload, 1) or workers["one"],
                    }
                    rows[workload.name][condition] = measure_pair(prepared, pids, repeat)
                    print(
                        f"busy sweep {condition:<5} {workload.name:<12} "
                        f"{format_optional_ms(rows[workload.name][condition]['default_ms'])} ms vs "
                        f"{format_optional_ms(rows[workload.name][condition]['one_ms'])} ms",
                        flush=True,
                    )
    finally:
        for worker in workers.values():
            worker.stop()
    return {"spinners": usable_cores(), "rows": rows}


def measure_pair(prepared: dict[str, Worker | str], pids: list[int], repeat: int) -> dict:
    """Median ms of each prepared worker (or the reason it failed to prepare), interleaved over
    `repeat` rounds, and the ratio default / one."""
    times: dict[str, list[float]] = {key: [] for key in prepared}
    result: dict = {}
    for round_index in range(repeat):
        keys = list(prepared) if round_index % 2 == 0 else list(reversed(prepared))
        for key in keys:
            worker = prepared[key]
            if isinstance(worker, str) or f"{key}_unavailable" in result:
                continue
            try:
                times[key] += timed(worker, pids, 1)
            except (TaskFailed, WorkerFailed) as exc:
                result[f"{key}_unavailable"] = describe_failure(exc)
    for key, worker in prepared.items():
        if isinstance(worker, str):
            result[f"{key}_unavailable"] = worker
        result[f"{key}_ms"] = median_or_none(times[key])
        result[f"{key}_times_ms"] = times[key]
    if result["default_ms"] and result["one_ms"]:
        result["ratio"] = result["default_ms"] / result["one_ms"]
    return result


# ---------------------------------------------------------------------------
# Part 2: latency of tiny calls


def latency_configurations(threads: int) -> list[tuple[str, str, int | None]]:
    """(label, engine, threads) of every configuration measured; None is the engine's default."""
    configurations = [("convt default threads", "convt", None), ("convt 1 thread", "convt", 1)]
    if threads > 1:
        configurations.append((f"convt {threads} threads", "convt", threads))
    return configurations + [
        (f"{ENGINE_LABELS['torch']} default threads", "torch", None),
        (f"{ENGINE_LABELS['onnxruntime']} default threads", "onnxruntime", None),
    ]


def latency(threads: int, repeat: int) -> dict:
    """Back-to-back and after-pause times of tiny calls, every configuration in its own worker."""
    configurations = latency_configurations(threads)
    workers = [Worker(label, "engines", None) for label, _, _ in configurations]
    for worker in workers:
        worker.start()
    pids = [worker.pid for worker in workers]
    results: dict = {}
    try:
        for workload in LATENCY_WORKLOADS:
            results[workload.name] = {"shape": workload.describe()}
            for worker, (label, engine, count) in zip(workers, configurations):
                results[workload.name][label] = latency_of(worker, engine, workload, count, pids, repeat)
                print(f"latency {workload.name} {label}: {results[workload.name][label]}", flush=True)
    finally:
        for worker in workers:
            worker.stop()
    return {"pause_seconds": LATENCY_PAUSE_SECONDS, "back_to_back_calls": BACK_TO_BACK_CALLS, "rows": results}


def latency_of(
    worker: Worker, engine: str, workload: Workload, threads: int | None, pids: list[int], repeat: int
) -> dict:
    """Median ms back to back (BACK_TO_BACK_CALLS calls in a row) and after an idle pause."""
    reason = prepare(worker, engine, workload, threads)
    if reason:
        return {"unavailable": reason}
    try:
        timed(worker, pids, 20, prime=False)  # warm-up: caches, plans, pools
        back_to_back = timed(worker, pids, BACK_TO_BACK_CALLS, prime=False)
        after_pause = timed(worker, pids, 2 * repeat, LATENCY_PAUSE_SECONDS, prime=False)
    except (TaskFailed, WorkerFailed) as exc:
        return {"unavailable": describe_failure(exc)}
    return {
        "back_to_back_ms": statistics.median(back_to_back),
        "after_pause_ms": statistics.median(after_pause),
        "after_pause_times_ms": after_pause,
    }


# ---------------------------------------------------------------------------
# Part 3: first call


def first_call(repeat: int) -> dict:
    """`import convt` + first apply above `import numpy`, in fresh interpreters (median of `repeat`,
    after one untimed run that warms the file cache)."""
    runs = []
    with tempfile.TemporaryDirectory() as cwd:  # not the repository root: import the installed convt
        for index in range(repeat + 1):
            done = subprocess.run(
                [sys.executable, "-c", FIRST_CALL_SCRIPT], capture_output=True, text=True, cwd=cwd
            )
            if done.returncode != 0:
                return {"unavailable": (done.stderr.strip().splitlines() or ["no output"])[-1]}
            if index:
                runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    summary = {
        key: statistics.median(run[key] for run in runs)
        for key in ("numpy_ms", "import_ms", "apply_ms", "above_numpy_ms")
    }
    summary["max_above_numpy_ms"] = max(run["above_numpy_ms"] for run in runs)
    summary["scipy_after_import"] = any(run["scipy_after_import"] for run in runs)
    summary["scipy_after_apply"] = any(run["scipy_after_apply"] for run in runs)
    summary["runs"] = runs
    print(
        f"first call: {summary['above_numpy_ms']:.1f} ms above numpy, scipy imported: "
        f"{summary['scipy_after_apply']}",
        flush=True,
    )
    return summary


# ---------------------------------------------------------------------------
# Report


def format_optional_ms(value: float | None) -> str:
    return "n/a" if value is None else format_ms(value)


def busy_lines(busy: dict) -> list[str]:
    header = [
        "workload",
        "shape",
        "quiet default ms",
        "quiet 1 thread ms",
        "busy default ms",
        "busy 1 thread ms",
        "busy ratio default / 1 thread",
    ]
    rows, ratios = [], []
    for name, row in busy["rows"].items():
        quiet, loaded = row.get("quiet", {}), row.get("busy", {})
        ratio = loaded.get("ratio")
        ratios += [ratio] if ratio else []
        rows.append(
            [
                name,
                row["shape"],
                format_optional_ms(quiet.get("default_ms")),
                format_optional_ms(quiet.get("one_ms")),
                format_optional_ms(loaded.get("default_ms")),
                format_optional_ms(loaded.get("one_ms")),
                "n/a" if ratio is None else f"{ratio:.2f}×",
            ]
        )
    verdict = (
        f"Worst busy ratio {max(ratios):.2f}× (target: at most {BUSY_TARGET}×): "
        f"{'met' if max(ratios) <= BUSY_TARGET else 'NOT met'}."
        if ratios
        else "No busy ratio measured."
    )
    return [
        "## Busy machine: default threads against num_threads=1",
        "",
        f"While {busy['spinners']} CPU-bound spinner process(es) (`while True: pass`, one per core) run, each "
        "call is timed after an untimed priming call of the same worker; medians of the interleaved repeats. "
        "The quiet columns are the same calls without spinners.",
        "",
        *markdown_table(header, rows),
        "",
        verdict,
        "",
    ]


def latency_lines(latency_result: dict) -> list[str]:
    lines = [
        "## Latency of tiny calls",
        "",
        f"Back to back: median of {latency_result['back_to_back_calls']} calls in a row (after 20 warm-up calls). "
        f"After a pause: median of calls each made {1e3 * latency_result['pause_seconds']:.0f} ms after the "
        "previous one returned (thread pools parked, idle cores asleep). Each configuration in its own process.",
        "",
    ]
    for name, row in latency_result["rows"].items():
        table = []
        for label, result in row.items():
            if label == "shape":
                continue
            if "unavailable" in result:
                table.append([label, "n/a", "n/a"])
            else:
                table.append(
                    [label, format_ms(result["back_to_back_ms"]), format_ms(result["after_pause_ms"])]
                )
        lines += [
            f"**{name}** ({row['shape']})",
            "",
            *markdown_table(["engine", "back to back ms", "after pause ms"], table),
            "",
        ]
    return lines


def first_call_lines(first: dict) -> list[str]:
    if "unavailable" in first:
        return ["## First call", "", f"n/a: {first['unavailable']}", ""]
    met = first["above_numpy_ms"] <= FIRST_CALL_TARGET_MS
    return [
        "## First call in a fresh interpreter",
        "",
        f"`import convt` plus the first `apply` (1x8->4 16x16 k4 s2 p1), above `import numpy`: median "
        f"**{first['above_numpy_ms']:.1f} ms** over {len(first['runs'])} fresh interpreters (import "
        f"{first['import_ms']:.1f} ms, first apply {first['apply_ms']:.1f} ms; worst {first['max_above_numpy_ms']:.1f} "
        f"ms; `import numpy` itself {first['numpy_ms']:.1f} ms). Target at most {FIRST_CALL_TARGET_MS:.0f} ms: "
        f"{'met' if met else 'NOT met'}.",
        "",
        f"scipy imported after `import convt`: {first['scipy_after_import']}; after the first apply: "
        f"{first['scipy_after_apply']}.",
        "",
    ]


def format_load(averages: list[float] | None) -> str:
    return "unknown" if averages is None else ", ".join(f"{value:.2f}" for value in averages)


def render(result: dict) -> str:
    load = result["other_processes_cpu_load"]
    lines = [
        f"# convt robustness: busy machine, latency, first call, {result['date']}",
        "",
        f"- CPU: {cpu_line(result['machine'])}",
        f"- Versions: {', '.join(f'{name} {version}' for name, version in result['versions'].items())}; "
        f"convt source at `{result['convt_revision']}`",
        f"- Load average (1, 5, 15 min) at the start: {format_load(result['load_average_at_start'])}; "
        "CPU used by other processes "
        f"during the run (outside the busy part's own spinners): "
        + ("unknown" if load is None else f"{100 * load:.0f}% of the machine"),
        "",
    ]
    if "busy" in result:
        lines += busy_lines(result["busy"])
    if "latency" in result:
        lines += latency_lines(result["latency"])
    if "first_call" in result:
        lines += first_call_lines(result["first_call"])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    start = load_snapshot()
    result: dict = {
        "date": datetime.date.today().isoformat(),
        "machine": cpu_description(),
        "versions": {name: distribution_version(name) for name in ("convt", "numpy", "torch", "onnxruntime")},
        "convt_revision": convt_revision(),
        "load_average_at_start": load_average(),
    }
    if "first-call" in args.parts:
        result["first_call"] = first_call(args.repeat)
    if "latency" in args.parts:
        result["latency"] = latency(args.threads, args.repeat)
    if "busy" in args.parts:
        result["busy"] = busy_sweep(args.repeat)
    # The spinners are reaped children by now, so their CPU time counts as ours.
    result["other_processes_cpu_load"] = other_processes_load(start, load_snapshot())
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "robustness-latest.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / "robustness-latest.md").write_text(render(result))
    print(f"wrote {args.out / 'robustness-latest.md'} and robustness-latest.json")


if __name__ == "__main__":
    main()
