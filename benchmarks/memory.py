"""Peak resident memory of one ConvTranspose call, one engine per fresh process.

Usage:
    python benchmarks/memory.py --engine convt|torch|onnxruntime|openvino [--threads N]
    python benchmarks/memory.py --all [--threads N] [--out benchmarks/results]

The workload is a 3-D upsampling layer, 1 x 32->16 channels, 96^3 volume,
k4 s2 p1, float32: the input is 108 MiB and the output 1x16x192^3 is 432 MiB.
Everything an engine needs (inputs, session, compiled model) is built first;
then VmRSS is read, the peak RSS counter is reset, and one call runs while a
thread samples VmRSS every millisecond. excess = peak - (before + output) is
the working memory the engine needs on top of its result.
`--all` runs every engine in its own subprocess and writes
<out>/memory-latest.md and <out>/memory-latest.json.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from engines import ENGINE_LABELS, ENGINE_NAMES, PREPARERS
from machine import cpu_description, cpu_line, usable_cores
from threadpoolctl import threadpool_limits

from workers import describe_failure
from workloads import Workload, make_inputs

MEMORY_WORKLOAD = Workload("volume3d_k4s2", "float32", 1, 32, 16, (96, 96, 96), 4, 2, 1)
SAMPLE_SECONDS = 0.001
MIB = 2**20
SUBPROCESS_TIMEOUT_SECONDS = 600


def status_bytes(field: str) -> int:
    """A memory field of /proc/self/status (e.g. VmRSS, VmHWM), in bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS; False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
        return True
    except OSError:
        return False


class RssSampler:
    """Context manager that records the highest VmRSS seen every SAMPLE_SECONDS."""

    def __init__(self) -> None:
        self.peak = status_bytes("VmRSS")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, status_bytes("VmRSS"))
            time.sleep(SAMPLE_SECONDS)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, status_bytes("VmRSS"))


def measure_engine(engine: str, threads: int) -> dict:
    """Build the engine, then measure the RSS of its first call on MEMORY_WORKLOAD."""
    x, w = make_inputs(MEMORY_WORKLOAD)
    call = PREPARERS[engine](MEMORY_WORKLOAD, x, w, threads)
    gc.collect()
    peak_counter_reset = reset_peak_rss()
    before = status_bytes("VmRSS")
    start = time.perf_counter()
    with RssSampler() as sampler:
        output = call()
    seconds = time.perf_counter() - start
    peak = max(sampler.peak, status_bytes("VmHWM") if peak_counter_reset else 0)
    return {
        "engine": engine,
        "before_mib": before / MIB,
        "output_mib": output.nbytes / MIB,
        "peak_mib": peak / MIB,
        "excess_mib": (peak - before - output.nbytes) / MIB,
        "call_seconds": seconds,
        "peak_source": "VmHWM and 1 ms sampler" if peak_counter_reset else "1 ms sampler",
    }


def measure_in_subprocess(engine: str, threads: int) -> dict:
    """Run `memory.py --engine` in a fresh interpreter and parse its JSON line."""
    command = [sys.executable, __file__, "--engine", engine, "--threads", str(threads), "--json"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        return {"engine": engine, "unavailable": f"timed out after {SUBPROCESS_TIMEOUT_SECONDS} s"}
    if done.returncode != 0:
        last_error = (done.stderr.strip().splitlines() or [""])[-1]
        return {"engine": engine, "unavailable": f"subprocess exit code {done.returncode}: {last_error}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def result_line(result: dict) -> str:
    """Human-readable result of one engine."""
    if "unavailable" in result:
        return f"{result['engine']}: n/a ({result['unavailable']})"
    return (
        f"{result['engine']}: before {result['before_mib']:.0f} MiB, output {result['output_mib']:.0f} MiB, "
        f"peak {result['peak_mib']:.0f} MiB, excess {result['excess_mib']:.0f} MiB "
        f"(call {result['call_seconds']:.2f} s; peak from {result['peak_source']})"
    )


def markdown_report(results: list[dict], threads: int) -> str:
    """memory-latest.md: one row per engine."""
    lines = [
        f"# Peak memory of one ConvTranspose call, {datetime.date.today().isoformat()}, {threads} thread(s)",
        "",
        f"CPU: {cpu_line(cpu_description())}",
        "",
        f"Workload: {MEMORY_WORKLOAD.describe()}, {MEMORY_WORKLOAD.dtype}; every engine in a fresh process. "
        "excess = peak - (before + output); the call is the engine's first, lazy allocations included. "
        "`convt out=` writes into an `np.empty` array made before the call, whose pages only become "
        "resident during it, so excess means the same for every engine.",
        "",
        "| engine | before MiB | output MiB | peak MiB | excess MiB | first call s |",
        "|---|---|---|---|---|---|",
    ]
    notes = []
    for result in results:
        label = ENGINE_LABELS[result["engine"]]
        if "unavailable" in result:
            lines.append(f"| {label} | n/a | n/a | n/a | n/a | n/a |")
            notes.append(f"- **{label}**: {result['unavailable']}")
            continue
        values = [result[key] for key in ("before_mib", "output_mib", "peak_mib", "excess_mib")]
        cells = [f"{value:.0f}" for value in values] + [f"{result['call_seconds']:.2f}"]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines + [""] + notes + [""])


def run_all(threads: int, out_dir: Path) -> None:
    """Measure every engine in its own subprocess; print and write the table."""
    results = []
    for engine in ENGINE_NAMES:
        results.append(measure_in_subprocess(engine, threads))
        print(result_line(results[-1]), flush=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    markdown = out_dir / "memory-latest.md"
    markdown.write_text(markdown_report(results, threads))
    data = {
        "date": datetime.date.today().isoformat(),
        "threads": threads,
        "machine": cpu_description(),
        "workload": MEMORY_WORKLOAD.describe(),
        "dtype": MEMORY_WORKLOAD.dtype,
        "engines": results,
    }
    (out_dir / "memory-latest.json").write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {markdown} and memory-latest.json")


def run_one(engine: str, threads: int, as_json: bool) -> None:
    """Measure one engine in this process; an engine that cannot run is n/a."""
    with threadpool_limits(limits=threads):
        try:
            result = measure_engine(engine, threads)
        except Exception as exc:  # report, never crash
            result = {"engine": engine, "unavailable": describe_failure(exc)}
    print(json.dumps(result) if as_json else result_line(result))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--engine", choices=ENGINE_NAMES, help="measure this engine in this process")
    target.add_argument("--all", action="store_true", help="measure every engine, each in a fresh subprocess")
    parser.add_argument("--threads", type=int, default=usable_cores(), help="threads (default: usable cores)")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent / "results",
        help="output directory for --all",
    )
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # used by --all
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.all:
        run_all(args.threads, args.out)
    else:
        run_one(args.engine, args.threads, args.json)


if __name__ == "__main__":
    main()
