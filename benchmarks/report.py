"""Render a benchmark run (the dict written to latest.json) as Markdown and a chart."""

from __future__ import annotations

import json
import math
import shutil
import statistics
from pathlib import Path
from typing import Callable

from engines import CONVT_ENGINES, ENGINE_LABELS, ENGINE_NAMES, computes_in_full_precision
from machine import cpu_line
from peaks import best_peak

NOT_SELECTED = "–"
SET_TITLES = {"table": "The table", "extended": "Extended set"}
KERNEL_SET_TITLES = {"avx512": "AVX-512 (zmm)", "avx2": "AVX2 (ymm)"}
README_START = "<!-- benchmark-table:start -->"
README_END = "<!-- benchmark-table:end -->"


# ---------------------------------------------------------------------------
# Figures derived from a run


def results_at(record: dict, threads: int) -> dict[str, dict]:
    """Every engine's result for one workload at one thread count ({} if not measured)."""
    return record["threads"].get(str(threads), {})


def fastest_other(results: dict[str, dict], dtype: str) -> tuple[str, float] | None:
    """(engine, median ms) of the fastest engine other than convt that computes in the
    workload's precision (OpenVINO's float64 is float32 math), if any ran."""
    timed = [
        (engine, result["median_ms"])
        for engine, result in results.items()
        if engine not in CONVT_ENGINES and "median_ms" in result and computes_in_full_precision(engine, dtype)
    ]
    return min(timed, key=lambda item: item[1]) if timed else None


def convt_ratio(results: dict[str, dict], dtype: str) -> float | None:
    """Fastest other engine's median time over convt's (fresh output): above 1, convt is faster."""
    convt = results.get("convt", {})
    other = fastest_other(results, dtype)
    if "median_ms" not in convt or other is None:
        return None
    return other[1] / convt["median_ms"]


def fma_peak(run: dict, threads: int, dtype: str) -> tuple[str, float] | None:
    """(kernel set, GFLOP/s) of the best FMA peak for `dtype`'s accumulation type at `threads`."""
    peaks = run["peaks"]["best"]["fma"].get(str(threads), {})
    return None if "unavailable" in peaks else best_peak(peaks, dtype)


def geometric_mean(values: list[float]) -> float | None:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def ratios(run: dict, set_name: str, threads: int) -> list[float]:
    """convt's ratio on every workload of a set where convt and another engine ran."""
    values = [
        convt_ratio(results_at(record, threads), record["dtype"])
        for record in run["workloads"]
        if record["set"] == set_name
    ]
    return [value for value in values if value is not None]


def sets_in(run: dict) -> list[str]:
    """The workload sets present in a run, in the order of SET_TITLES."""
    present = {record["set"] for record in run["workloads"]}
    return [name for name in SET_TITLES if name in present]


# ---------------------------------------------------------------------------
# Formatting


def format_ms(value: float) -> str:
    """Milliseconds with 3 significant digits, no exponent."""
    return f"{value:.0f}" if value >= 1000 else f"{value:.3g}"


def format_error(value: float | None) -> str:
    """An error in scientific notation, n/a if it could not be measured."""
    if value is None:
        return "n/a"
    return "0" if value == 0 else f"{value:.1e}"


def format_ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}×"


def engine_cell(result: dict | None, key: str, formatter: Callable[[float], str]) -> str:
    """A table cell: the formatted value, n/a, or a dash for engines not selected."""
    if result is None:
        return NOT_SELECTED
    if "unavailable" in result or result.get(key) is None:
        return "n/a"
    return formatter(result[key])


def markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Lines of a Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def format_load(averages: list[float] | None) -> str:
    return "unknown" if averages is None else ", ".join(f"{value:.2f}" for value in averages)


def threads_text(threads: int) -> str:
    return f"{threads} thread" + ("s" if threads != 1 else "")


# ---------------------------------------------------------------------------
# The speed tables


def row_cells(run: dict, record: dict, threads: int) -> dict[str, str]:
    """Every speed-table cell of one workload at one thread count, by column name."""
    results = results_at(record, threads)
    convt = results.get("convt")
    other = fastest_other(results, record["dtype"])
    peak = fma_peak(run, threads, record["dtype"])

    def percent_of_peak(gflops: float) -> str:
        return f"{100 * gflops / peak[1]:.0f}%" if peak else "n/a"

    cells = {"workload": record["name"], "dtype": record["dtype"]}
    for engine in ENGINE_NAMES:
        cells[f"{ENGINE_LABELS[engine]} ms"] = engine_cell(results.get(engine), "median_ms", format_ms)
    cells["fastest other"] = ENGINE_LABELS[other[0]] if other else "n/a"
    cells["ratio"] = format_ratio(convt_ratio(results, record["dtype"]))
    cells["convt GFLOP/s"] = engine_cell(convt, "gflops", lambda gflops: f"{gflops:.1f}")
    cells["convt % of FMA peak"] = engine_cell(convt, "gflops", percent_of_peak)
    return cells


SPEED_COLUMNS = [
    "workload",
    "dtype",
    *(f"{ENGINE_LABELS[engine]} ms" for engine in ENGINE_NAMES),
    "fastest other",
    "ratio",
    "convt GFLOP/s",
    "convt % of FMA peak",
]
README_COLUMNS = [column for column in SPEED_COLUMNS if column != "convt GFLOP/s"]


def speed_table(run: dict, set_name: str, threads: int, columns: list[str]) -> list[str]:
    """The speed table of one set at one thread count, then its geometric-mean line."""
    rows = [
        [row_cells(run, record, threads)[column] for column in columns]
        for record in run["workloads"]
        if record["set"] == set_name
    ]
    return [*markdown_table(columns, rows), "", geometric_mean_line(run, set_name, threads)]


def geometric_mean_line(run: dict, set_name: str, threads: int) -> str:
    """The geometric mean of convt's ratios over the workloads where convt and another engine ran."""
    values = ratios(run, set_name, threads)
    mean = geometric_mean(values)
    if mean is None:
        return f"Geometric mean of the ratio at {threads_text(threads)}: n/a (convt or the others missing)."
    return (
        f"Geometric mean of the ratio at {threads_text(threads)}: **{mean:.2f}×** over {len(values)} "
        f"workload(s); lowest {min(values):.2f}×."
    )


def scaling_table(run: dict) -> list[str]:
    """convt at 1 thread against convt at N threads (fresh output), every workload."""
    many, one = run["threads"], 1
    if many == one:
        return []
    rows = []
    for record in run["workloads"]:
        single = results_at(record, one).get("convt", {})
        multi = results_at(record, many).get("convt", {})
        if "median_ms" in single and "median_ms" in multi:
            rows.append(
                [
                    record["name"],
                    format_ms(single["median_ms"]),
                    format_ms(multi["median_ms"]),
                    format_ratio(single["median_ms"] / multi["median_ms"]),
                ]
            )
    if not rows:
        return []
    header = ["workload", "convt 1 thread ms", f"convt {many} threads ms", "speed-up"]
    return [f"## Thread scaling of convt (1 -> {many} threads)", "", *markdown_table(header, rows), ""]


# ---------------------------------------------------------------------------
# Peaks, accuracy, failures, method


def peak_table(run: dict) -> list[str]:
    """FMA peaks per kernel set, dtype and thread count, then the matmul rates (information only)."""
    counts = run["thread_counts"]
    fma = run["peaks"]["best"]["fma"]
    columns = [(threads, dtype) for threads in counts for dtype in ("float32", "float64")]
    rows = []
    for name, title in KERNEL_SET_TITLES.items():
        rates = [fma.get(str(threads), {}).get(name, {}).get(dtype) for threads, dtype in columns]
        if any(rates):
            rows.append([title, *("n/a" if rate is None else f"{rate:.1f}" for rate in rates)])
    header = ["kernel set", *(f"{dtype} {threads_text(threads)}" for threads, dtype in columns)]
    lines = ["## FMA peak of this CPU, GFLOP/s", "", *(markdown_table(header, rows) if rows else [])]
    lines += [
        f"- {threads_text(t)}: n/a, {fma[str(t)]['unavailable']}"
        for t in counts
        if "unavailable" in fma.get(str(t), {})
    ]
    lines += [
        "",
        "Register-only FMA loops (benchmarks/fma_peak.c: 12 independent accumulators, no memory "
        "traffic), best of 5 runs, before and after the workloads; 2 FLOPs per FMA lane. "
        '"convt % of FMA peak" uses the fastest kernel set at the table\'s thread count and the '
        "accumulation type (float16 against the float32 peak).",
        "",
        *peak_scaling_warning(run),
        matmul_line(run),
        "",
    ]
    return lines


PEAK_SCALING_TOLERANCE = 0.9


def peak_scaling_warning(run: dict) -> list[str]:
    """A warning when the N-thread float32 peak is under 90% of N x the 1-thread peak: the cores
    were busy while it was measured (or SMT siblings share FMA units), so shares of it are too high."""
    many = run["threads"]
    multi, single = fma_peak(run, many, "float32"), fma_peak(run, 1, "float32")
    if many == 1 or not multi or not single or multi[1] >= PEAK_SCALING_TOLERANCE * many * single[1]:
        return []
    return [
        f"**Warning**: the {threads_text(many)} float32 peak ({multi[1]:.0f}) is below "
        f"{PEAK_SCALING_TOLERANCE:.0%} of {many} x the 1-thread peak ({single[1]:.0f}): other processes "
        "used the cores while it was measured, or SMT siblings share their FMA units. Percentages of it "
        "are then too high.",
        "",
    ]


def matmul_line(run: dict) -> str:
    """NumPy's matmul rates, which are information, not a roofline."""
    parts = []
    for threads, rates in run["peaks"]["best"]["matmul"].items():
        if "unavailable" in rates:
            parts.append(f"{threads_text(int(threads))}: n/a ({rates['unavailable']})")
        else:
            parts.append(
                f"{threads_text(int(threads))}: float32 {rates['float32']:.0f}, "
                f"float64 {rates['float64']:.0f}"
            )
    return (
        "NumPy 2048×2048 matmul GFLOP/s, for information only (sgemm is no roofline: it stays "
        "well below the FMA peak on CPUs with full-width 512-bit FMAs): " + "; ".join(parts) + "."
    )


def accuracy_table(run: dict) -> list[str]:
    """Per workload, 'max abs error (max rel error)' of every engine, at N threads."""
    rows = []
    for record in run["workloads"]:
        results = results_at(record, run["threads"])
        cells = [record["name"], record["dtype"]]
        for engine in run["engines"]:
            result = results.get(engine)
            if result is None or result.get("max_abs_err") is None:
                cells.append("n/a")
            else:
                cells.append(f"{format_error(result['max_abs_err'])} ({format_error(result['max_rel_err'])})")
        rows.append(cells)
    header = ["workload", "dtype", *(f"{ENGINE_LABELS[engine]} abs (rel)" for engine in run["engines"])]
    return [
        f"## Accuracy at {threads_text(run['threads'])}: max abs error (max relative error)",
        "",
        *markdown_table(header, rows),
        "",
        "Errors are against a float64 torch reference on the same (rounded) inputs, relative to "
        "max |reference|; 1-thread errors are in latest.json. OpenVINO computes float64 and float16 "
        "models in float32 (INFERENCE_PRECISION_HINT=f32).",
        "",
    ]


def unavailable_lines(run: dict) -> list[str]:
    """One bullet per (engine, reason), listing the workloads and thread counts it applies to."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for record in run["workloads"]:
        for threads, results in record["threads"].items():
            for engine, result in results.items():
                if "unavailable" in result:
                    grouped.setdefault((engine, result["unavailable"]), []).append(
                        f"{record['name']}@{threads}"
                    )
        if not record["reference"].startswith("torch"):
            grouped.setdefault(("reference", record["reference"]), []).append(record["name"])
    if not grouped:
        return []
    lines = [
        f"- **{ENGINE_LABELS.get(engine, engine)}** on {', '.join(names)}: {reason}"
        for (engine, reason), names in grouped.items()
    ]
    return ["## Not available (n/a)", "", *lines, ""]


def timing_spread(run: dict) -> float | None:
    """Median, over engines, workloads and thread counts, of the IQR of the repeats over their median."""
    spreads = []
    for record in run["workloads"]:
        for results in record["threads"].values():
            for result in results.values():
                if len(result.get("times_ms", [])) >= 2:
                    quartiles = statistics.quantiles(result["times_ms"], n=4)
                    spreads.append((quartiles[2] - quartiles[0]) / result["median_ms"])
    return statistics.median(spreads) if spreads else None


def header_lines(run: dict) -> list[str]:
    """Title, machine, versions, method and noise."""
    versions = ", ".join(f"{name} {version or 'not installed'}" for name, version in run["versions"].items())
    pools = "; ".join(
        f"{ENGINE_LABELS[engine]}: {', '.join(found) or 'none'}"
        for engine, found in run["thread_pools"].items()
    )
    spread = timing_spread(run)
    load = run["other_processes_cpu_load"]
    counts = " and ".join(threads_text(threads) for threads in run["thread_counts"])
    return [
        f"# ConvTranspose benchmark, {run['date']}, {counts}",
        "",
        f"- CPU: {cpu_line(run['machine'])}",
        f"- Platform: {run['machine']['platform']}",
        f"- Versions: {versions}; convt source at `{run.get('convt_revision') or 'unknown'}`",
        f"- Thread pools loaded in each engine's worker: {pools or 'n/a'}",
        "- Method: every engine in its own worker process (one per engine and thread count); the driver "
        "times them in turn, the order rotating every round, after waiting until no worker uses CPU; each "
        "timed call follows an untimed priming call of the same engine. Times are medians of "
        f"{run['repeat']} calls, timed inside the worker (perf_counter, GC paused). Every engine returns a "
        "fresh output array, except `convt out=`, which writes into a reused `out=` array. `convt bound` "
        "is convt with its weights bound once (`layer.bind(w)`, then `bound(x)`), as onnxruntime and "
        "OpenVINO get theirs; the ratio is that of `convt` (`apply(x, w)` every call).",
        "- Timing spread (median IQR / median of the repeats): "
        + ("n/a" if spread is None else f"{100 * spread:.0f}%; raw timings are in latest.json"),
        f"- Load average (1, 5, 15 min) at the start: {format_load(run.get('load_average_at_start'))}",
        "- CPU used by other processes (or stolen by the hypervisor) during the run: "
        + (
            "unknown"
            if load is None
            else f"{100 * load:.0f}% of the machine; above a few percent, rerun on a quieter machine"
        ),
        "",
    ]


def render_markdown(run: dict) -> str:
    """The whole Markdown report of a run."""
    lines = header_lines(run) + peak_table(run)
    for set_name in sets_in(run):
        for threads in run["thread_counts"]:
            lines += [f"## {SET_TITLES[set_name]}, {threads_text(threads)}", ""]
            lines += speed_table(run, set_name, threads, SPEED_COLUMNS) + [""]
    lines += [
        "Ratio = fastest other engine's ms / convt's ms (fresh output): above 1, convt is faster. OpenVINO "
        "computes float64 in float32, so it is not counted as the fastest float64 engine.",
        "",
    ]
    lines += scaling_table(run) + accuracy_table(run) + unavailable_lines(run)
    shapes = [
        [record["name"], record["set"], record["dtype"], record["shape"], f"{record['flops'] / 1e9:.3g}"]
        for record in run["workloads"]
    ]
    lines += ["## Workloads", "", *markdown_table(["workload", "set", "dtype", "shape", "GFLOP"], shapes), ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# README section and files


def peaks_sentence(run: dict) -> str:
    """'FMA peak (register-only loop, best kernel set) float32 235 / float64 117 GFLOP/s at
    2 threads, 117 / 59 at 1 thread'."""
    parts = []
    for threads in run["thread_counts"]:
        float32, float64 = fma_peak(run, threads, "float32"), fma_peak(run, threads, "float64")
        if float32 and float64:
            parts.append(f"{float32[1]:.0f} / {float64[1]:.0f} at {threads_text(threads)}")
    if not parts:
        return "FMA peak n/a"
    return "FMA peak (register-only loop, best kernel set) float32 / float64 GFLOP/s: " + ", ".join(parts)


def update_readme(run: dict, readme: Path) -> Path:
    """Replace the README's benchmark section (between the markers) with this run's tables."""
    text = readme.read_text()
    if README_START not in text or README_END not in text:
        raise ValueError(f"{readme} has no {README_START} ... {README_END} section")
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    machine = run["machine"]
    section = [
        README_START,
        "",
        f"{run['date']}, {machine['model_name']} (family {machine['family']}, model {machine['model']}); "
        f"{peaks_sentence(run)}. Each engine in its own process, fresh output arrays (`convt out=`: a "
        f"reused `out=` array; `convt bound`: `layer.bind(w)` once, then `bound(x)`), medians of "
        f"{run['repeat']} calls; ratio = fastest other / convt (`apply(x, w)`). Full "
        "report, extended set and accuracy: [benchmarks/results/latest.md](benchmarks/results/latest.md).",
        "",
    ]
    if "table" in sets_in(run):
        for threads in run["thread_counts"]:
            section += [
                f"**{threads_text(threads)}**",
                "",
                *speed_table(run, "table", threads, README_COLUMNS),
                "",
            ]
    if "extended" in sets_in(run):
        means = [
            f"{format_ratio(geometric_mean(ratios(run, 'extended', t)))} at {threads_text(t)}"
            for t in run["thread_counts"]
        ]
        section += [
            f"Extended set ({sum(r['set'] == 'extended' for r in run['workloads'])} real layers): "
            f"geometric mean of the ratio {', '.join(means)}.",
            "",
        ]
    section += ["![GFLOP/s per workload and engine](benchmarks/results/latest.png)", "", README_END]
    readme.write_text(head + "\n".join(section) + tail)
    return readme


def write_reports(run: dict, out_dir: Path) -> list[Path]:
    """Write <date>-t<N>.md, latest.md, latest.json and latest.png into out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    dated = out_dir / f"{run['date']}-t{run['threads']}.md"
    dated.write_text(render_markdown(run))
    latest_md = out_dir / "latest.md"
    shutil.copyfile(dated, latest_md)
    latest_json = out_dir / "latest.json"
    latest_json.write_text(json.dumps(run, indent=1) + "\n")
    latest_png = out_dir / "latest.png"
    plot_rates(run, latest_png)
    return [dated, latest_md, latest_json, latest_png]


def plot_rates(run: dict, path: Path) -> None:
    """Grouped bars of GFLOP/s per workload and engine at N threads, one panel per set,
    with the FMA peaks as horizontal lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets, threads = sets_in(run), run["threads"]
    widest = max(sum(record["set"] == name for record in run["workloads"]) for name in sets)
    figure, panels = plt.subplots(
        len(sets), 1, figsize=(max(9.0, 0.8 * widest + 3), 5.5 * len(sets)), squeeze=False
    )
    for axes, set_name in zip(panels[:, 0], sets):
        records = [record for record in run["workloads"] if record["set"] == set_name]
        draw_rates(axes, run, records, threads)
        axes.set_title(f"{SET_TITLES[set_name]}, {threads_text(threads)}")
    figure.suptitle(f"ConvTranspose, {run['machine']['model_name']}, {run['date']}")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def draw_rates(axes, run: dict, records: list[dict], threads: int) -> None:
    """One panel: bars per engine, FMA peak lines, log scale."""
    engines = run["engines"]
    width = 0.8 / len(engines)
    all_rates = []
    for index, engine in enumerate(engines):
        positions, rates = [], []
        for position, record in enumerate(records):
            result = results_at(record, threads).get(engine, {})
            if "gflops" in result:
                positions.append(position + (index - (len(engines) - 1) / 2) * width)
                rates.append(result["gflops"])
        if rates:
            color = f"C{ENGINE_NAMES.index(engine)}"  # the same colour for an engine in every chart
            axes.bar(positions, rates, width, label=ENGINE_LABELS[engine], color=color)
        all_rates += rates
    peaks = []
    for dtype, style in (("float32", "-"), ("float64", "--")):
        peak = fma_peak(run, threads, dtype)
        if peak:
            axes.axhline(
                peak[1], color="black", linestyle=style, linewidth=1, label=f"FMA peak {dtype}: {peak[1]:.0f}"
            )
            peaks.append(peak[1])
    axes.set_yscale("log")
    lowest = min(all_rates, default=1.0)
    axes.set_ylim(10 ** math.floor(math.log10(lowest / 1.5)), 1.5 * max(peaks + all_rates + [1.0]))
    axes.set_ylabel("GFLOP/s (log scale, higher is better)")
    axes.set_xticks(range(len(records)), [record["name"] for record in records], rotation=35, ha="right")
    axes.grid(axis="y", which="both", alpha=0.3)
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
