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
import compileall
import datetime
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from engines import ENGINE_LABELS, convt_revision, distribution_version, prepare_in, time_in_turn
from machine import (
    cpu_description,
    cpu_line,
    load_average,
    load_snapshot,
    other_processes_load,
    usable_cores,
    wait_until_idle,
)
from report import format_load, format_ms, markdown_table
from workers import TaskFailed, Worker, WorkerFailed, describe_failure
from workloads import WORKLOADS_BY_NAME, Workload

BUSY_TARGET = 1.3  # issue 11: default threads at most 1.3x slower than num_threads=1 on a busy machine
FIRST_CALL_TARGET_MS = 100.0
LATENCY_PAUSE_SECONDS = 0.05
BACK_TO_BACK_CALLS = 200
WARM_UP_CALLS = 20
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
print(json.dumps({
    "numpy_ms": 1e3 * (numpy_done - start),
    "import_ms": 1e3 * (import_done - numpy_done),
    "apply_ms": 1e3 * (apply_done - import_done),
    "above_numpy_ms": 1e3 * (apply_done - numpy_done),
    "scipy_after_import": scipy_after_import,
    "scipy_after_apply": "scipy" in sys.modules,
}))
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
# Part 1: busy machine

# Timings on a busy machine are bimodal (a thread runs or waits for a time slice): more repeats.
BUSY_REPEAT_FACTOR = 2
# The two configurations compared: label -> num_threads.
BUSY_CONFIGURATIONS: dict[str, int | None] = {"default": None, "1 thread": 1}


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


def busy_sweep(repeat: int) -> dict:
    """convt with default threads against num_threads=1, quiet, then with every core busy."""
    workers = {label: Worker(f"convt {label}", "engines", None) for label in BUSY_CONFIGURATIONS}
    rows = {workload.name: {"shape": workload.describe()} for workload in BUSY_SWEEP}
    try:
        for condition in ("quiet", "busy"):
            with spinners(usable_cores() if condition == "busy" else 0):
                for workload in BUSY_SWEEP:
                    rows[workload.name][condition] = busy_pair(workers, workload, BUSY_REPEAT_FACTOR * repeat)
                    summary = rows[workload.name][condition]
                    cells = [f"{label} {median_and_mean(summary[label])} ms" for label in BUSY_CONFIGURATIONS]
                    print(f"busy sweep {condition:<5} {workload.name:<12} " + ", ".join(cells))
    finally:
        for worker in workers.values():
            worker.stop()
    return {"spinners": usable_cores(), "repeat": BUSY_REPEAT_FACTOR * repeat, "rows": rows}


def busy_pair(workers: dict[str, Worker], workload: Workload, repeat: int) -> dict:
    """Median and mean ms of both configurations on `workload` (n/a with the reason if one
    failed) and the ratios default / 1 thread of the medians and of the means."""
    results = {
        label: prepare_in(worker, "convt", workload, BUSY_CONFIGURATIONS[label])
        for label, worker in workers.items()
    }
    ready = {label: workers[label] for label, result in results.items() if "unavailable" not in result}
    pids = [worker.pid for worker in workers.values() if worker.pid]
    for worker in ready.values():
        worker.call("thread_counts")  # from here on
    if ready:
        results |= time_in_turn(ready, repeat, lambda: pids)
    for label, worker in ready.items():
        if "times_ms" in results[label]:
            results[label]["threads"] = {int(k): v for k, v in worker.call("thread_counts").items()}
    for result in results.values():
        if "times_ms" in result:
            result["mean_ms"] = statistics.fmean(result["times_ms"])
    default, single = results["default"], results["1 thread"]
    for statistic in ("median", "mean"):
        if f"{statistic}_ms" in default and f"{statistic}_ms" in single:
            results[f"ratio_{statistic}"] = default[f"{statistic}_ms"] / single[f"{statistic}_ms"]
    return results


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
    rows: dict = {}
    try:
        for workload in LATENCY_WORKLOADS:
            results = {}
            for worker, (label, engine, count) in zip(workers, configurations):
                results[label] = latency_of(worker, engine, workload, count, workers, repeat)
                print(
                    f"latency {workload.name} {label}: "
                    + ", ".join(
                        f"{key} {format_ms(results[label][key])}"
                        for key in ("back_to_back_ms", "after_pause_ms")
                        if key in results[label]
                    )
                )
            rows[workload.name] = {"shape": workload.describe(), "engines": results}
    finally:
        for worker in workers:
            worker.stop()
    return {"pause_seconds": LATENCY_PAUSE_SECONDS, "back_to_back_calls": BACK_TO_BACK_CALLS, "rows": rows}


def latency_of(
    worker: Worker, engine: str, workload: Workload, threads: int | None, everyone: list[Worker], repeat: int
) -> dict:
    """Median ms back to back (BACK_TO_BACK_CALLS calls in a row, after WARM_UP_CALLS) and
    after an idle pause of LATENCY_PAUSE_SECONDS before each call (2 x `repeat` calls)."""
    prepared = prepare_in(worker, engine, workload, threads)
    if "unavailable" in prepared:
        return prepared

    def times(count: int, pause: float) -> list[float]:
        wait_until_idle([other.pid for other in everyone if other.pid])
        return worker.call("time_calls", count, pause, False)

    try:
        times(WARM_UP_CALLS, 0.0)
        back_to_back = times(BACK_TO_BACK_CALLS, 0.0)
        after_pause = times(2 * repeat, LATENCY_PAUSE_SECONDS)
    except (TaskFailed, WorkerFailed) as exc:
        return {"unavailable": describe_failure(exc)}
    return {
        "back_to_back_ms": statistics.median(back_to_back),
        "after_pause_ms": statistics.median(after_pause),
        "after_pause_times_ms": after_pause,
    }


# ---------------------------------------------------------------------------
# Part 3: first call


def compile_convt_bytecode() -> bool:
    """Write the bytecode of convt's modules, as `pip install` does, so that a fresh
    interpreter reads it instead of compiling every module: an editable checkout run
    with PYTHONDONTWRITEBYTECODE=1 (set on some machines) has none, and its first
    import took 50 ms more (77 against 24 ms on Zen 3). True if every module compiled."""
    spec = importlib.util.find_spec("convt")
    if spec is None or not spec.submodule_search_locations:
        return False
    return bool(compileall.compile_dir(spec.submodule_search_locations[0], quiet=1))


def first_call(repeat: int) -> dict:
    """`import convt` + first apply above `import numpy`, in fresh interpreters (median of `repeat`,
    after one untimed run that warms the file cache), convt's bytecode written first."""
    compiled = compile_convt_bytecode()
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
    summary["bytecode_compiled"] = compiled
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


def median_and_mean(result: dict) -> str:
    """'median / mean' ms of a timed result, n/a if it was not measured."""
    if "median_ms" not in result:
        return "n/a"
    return f"{format_ms(result['median_ms'])} / {format_ms(result['mean_ms'])}"


def threads_cell(result: dict) -> str:
    """The thread counts a configuration's timed calls resolved to: "2", or "1 (12), 2 (6)"."""
    counts = result.get("threads")
    if not counts:
        return "?"
    if len(counts) == 1:
        return str(next(iter(counts)))
    return ", ".join(f"{threads} ({calls})" for threads, calls in sorted(counts.items()))


def ran_one_thread(result: dict) -> bool:
    """Whether every timed call of a configuration ran on its caller alone."""
    counts = result.get("threads") or {}
    return bool(counts) and set(counts) == {1}


def busy_lines(busy: dict) -> list[str]:
    """The busy-machine section: one row per size, the worst ratio against the target.

    Where the default configuration ran every busy call on one thread (small
    calls, or a contended pool), it ran the same code as num_threads=1: its
    ratio measures the timing noise, which the section reports apart, and
    the verdict takes the rows where the default used more threads.
    """
    header = [
        "workload",
        "shape",
        "quiet default ms",
        "quiet 1 thread ms",
        "busy default ms",
        "busy 1 thread ms",
        "busy default threads",
        "busy ratio default / 1 thread",
    ]
    rows, worst, noise = [], [], []
    for name, row in busy["rows"].items():
        quiet, loaded = row["quiet"], row["busy"]
        ratios = {key: loaded[key] for key in ("ratio_median", "ratio_mean") if key in loaded}
        same = ran_one_thread(loaded.get("default", {}))
        (noise if same else worst).extend(ratios.values())
        ratio_cell = " / ".join(f"{value:.2f}×" for value in ratios.values()) or "n/a"
        rows.append(
            [
                name,
                row["shape"],
                *(median_and_mean(quiet[label]) for label in BUSY_CONFIGURATIONS),
                *(median_and_mean(loaded[label]) for label in BUSY_CONFIGURATIONS),
                threads_cell(loaded.get("default", {})),
                ratio_cell + (" (same configuration)" if same else ""),
            ]
        )
    if worst:
        met = "met" if max(worst) <= BUSY_TARGET else "NOT met"
        verdict = (f"Worst busy ratio where the default used more than one thread {max(worst):.2f}× "
                   f"(target: at most {BUSY_TARGET}×): {met}.")
    else:
        verdict = "No busy ratio measured where the default used more than one thread."
    if noise:
        verdict += (f" Where both ran on one thread (the same code), the ratios spread from "
                    f"{min(noise):.2f}× to {max(noise):.2f}×: the timing noise of this run.")
    return [
        "## Busy machine: default threads against num_threads=1",
        "",
        f"While {busy['spinners']} CPU-bound spinner process(es) (`while True: pass`, one per core) run, "
        f"each configuration is timed {busy['repeat']} times, interleaved, each call after an untimed "
        "priming call of the same worker. Cells give the median / the mean (a loop of calls pays the "
        "mean, descheduled threads included); the ratio is default / 1 thread of each; the verdict takes "
        "the worse. The quiet columns are the same calls without spinners. \"busy default threads\" is "
        "what the default configuration's busy calls resolved to (calls: count when it varied); "
        "where that is 1 throughout, both columns ran the same code.",
        "",
        *markdown_table(header, rows),
        "",
        verdict,
        "",
    ]


def latency_lines(latency_result: dict) -> list[str]:
    """The latency section: one table per tiny workload."""
    lines = [
        "## Latency of tiny calls",
        "",
        f"Back to back: median of {latency_result['back_to_back_calls']} calls in a row (after "
        f"{WARM_UP_CALLS} warm-up calls). After a pause: median of calls each made "
        f"{1e3 * latency_result['pause_seconds']:.0f} ms after the previous one returned (thread pools "
        "parked, idle cores asleep). Each configuration in its own process.",
        "",
    ]
    for name, row in latency_result["rows"].items():
        table = [
            [
                label,
                format_optional_ms(result.get("back_to_back_ms")),
                format_optional_ms(result.get("after_pause_ms")),
            ]
            for label, result in row["engines"].items()
        ]
        lines += [
            f"**{name}** ({row['shape']})",
            "",
            *markdown_table(["engine", "back to back ms", "after pause ms"], table),
            "",
        ]
    return lines


def first_call_lines(first: dict) -> list[str]:
    """The first-call section, against the target."""
    if "unavailable" in first:
        return ["## First call", "", f"n/a: {first['unavailable']}", ""]
    met = "met" if first["above_numpy_ms"] <= FIRST_CALL_TARGET_MS else "NOT met"
    return [
        "## First call in a fresh interpreter",
        "",
        "`import convt` plus the first `apply` (1x8->4 16x16 k4 s2 p1), above `import numpy`: median "
        f"**{first['above_numpy_ms']:.1f} ms** over {len(first['runs'])} fresh interpreters (import "
        f"{first['import_ms']:.1f} ms, first apply {first['apply_ms']:.1f} ms; worst "
        f"{first['max_above_numpy_ms']:.1f} ms; `import numpy` itself {first['numpy_ms']:.1f} ms). "
        f"Target at most {FIRST_CALL_TARGET_MS:.0f} ms: {met}. convt's bytecode was "
        + ("written first, as `pip install` does." if first.get("bytecode_compiled")
           else "not written (the timings include compiling its modules)."),
        "",
        f"scipy imported after `import convt`: {first['scipy_after_import']}; after the first apply: "
        f"{first['scipy_after_apply']}.",
        "",
    ]


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
