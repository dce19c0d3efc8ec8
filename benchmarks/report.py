"""Render a benchmark run (the dict written to latest.json) as Markdown and a chart."""

from __future__ import annotations

import json
import math
import shutil
import statistics
from pathlib import Path
from typing import Callable

from engines import CONVT_ENGINES, ENGINE_NAMES, computes_in_full_precision

OTHER_ENGINES = tuple(engine for engine in ENGINE_NAMES if engine not in CONVT_ENGINES)
NOT_SELECTED = "–"


README_START = "<!-- benchmark-table:start -->"
README_END = "<!-- benchmark-table:end -->"


def update_readme(run: dict, readme: Path) -> Path:
    """Replace the README's benchmark section (between the markers) with this run's table."""
    text = readme.read_text()
    if README_START not in text or README_END not in text:
        raise ValueError(f"{readme} has no {README_START} ... {README_END} section")
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    section = [
        README_START,
        "",
        f"{run['date']}, {run['machine']['cpu']}, {run['threads']} threads; matmul roofline "
        f"float32 {run['roofline_gflops']['best']['float32']:.0f} and float64 "
        f"{run['roofline_gflops']['best']['float64']:.0f} GFLOP/s "
        "(full report: [benchmarks/results/latest.md](benchmarks/results/latest.md)).",
        "",
        *markdown_table(README_COLUMNS, table_rows(run, README_COLUMNS)),
        "",
        geometric_mean_line(run),
        "",
        "![GFLOP/s per workload and engine](benchmarks/results/latest.png)",
        "",
        README_END,
    ]
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


def format_ms(value: float) -> str:
    """Milliseconds with 3 significant digits, no exponent."""
    return f"{value:.0f}" if value >= 1000 else f"{value:.3g}"


def format_error(value: float | None) -> str:
    """An error in scientific notation, n/a if it could not be measured."""
    if value is None:
        return "n/a"
    return "0" if value == 0 else f"{value:.1e}"


def engine_cell(result: dict | None, key: str, formatter: Callable[[float], str]) -> str:
    """A table cell: the formatted value, n/a, or a dash for engines not selected."""
    if result is None:
        return NOT_SELECTED
    if "unavailable" in result or result.get(key) is None:
        return "n/a"
    return formatter(result[key])


def fastest_other(record: dict) -> tuple[str, float] | None:
    """(engine, median ms) of the fastest engine other than convt that computes in the
    workload's precision (OpenVINO's float64 is float32 math), if any ran."""
    timed = [
        (engine, result["median_ms"])
        for engine, result in record["engines"].items()
        if engine not in CONVT_ENGINES and "median_ms" in result
        and computes_in_full_precision(engine, record["dtype"])
    ]
    return min(timed, key=lambda item: item[1]) if timed else None


def convt_speedup(record: dict) -> float | None:
    """Fastest other engine's median time divided by convt's."""
    convt = record["engines"].get("convt", {})
    other = fastest_other(record)
    if "median_ms" not in convt or other is None:
        return None
    return other[1] / convt["median_ms"]


def roofline_rate(run: dict, dtype: str) -> float:
    """Matmul GFLOP/s of the matching dtype; float16 is compared with float32."""
    best = run["roofline_gflops"]["best"]
    return best["float64"] if dtype == "float64" else best["float32"]


def row_cells(run: dict, record: dict) -> dict[str, str]:
    """Every table cell of one workload, by column name."""
    engines = record["engines"]
    convt = engines.get("convt")
    other = fastest_other(record)
    speedup = convt_speedup(record)

    def percent_of_roofline(gflops: float) -> str:
        return f"{100 * gflops / roofline_rate(run, record['dtype']):.0f}%"

    cells = {
        "workload": record["name"],
        "dtype": record["dtype"],
        "convt ms": engine_cell(convt, "median_ms", format_ms),
        "convt new-array ms": engine_cell(engines.get("convt_new"), "median_ms", format_ms),
        "convt GFLOP/s": engine_cell(convt, "gflops", lambda gflops: f"{gflops:.1f}"),
        "convt % of matmul rate": engine_cell(convt, "gflops", percent_of_roofline),
    }
    for engine in OTHER_ENGINES:
        cells[f"{engine} ms"] = engine_cell(engines.get(engine), "median_ms", format_ms)
    cells["fastest other"] = other[0] if other else "n/a"
    cells["speed-up vs fastest other"] = f"{speedup:.2f}×" if speedup is not None else "n/a"
    cells["convt max rel err"] = engine_cell(convt, "max_rel_err", format_error)
    cells["torch max rel err"] = engine_cell(engines.get("torch"), "max_rel_err", format_error)
    return cells


MAIN_COLUMNS = [
    "workload", "dtype", "convt ms", "convt new-array ms", "convt GFLOP/s",
    "convt % of matmul rate", *(f"{engine} ms" for engine in OTHER_ENGINES),
    "fastest other", "speed-up vs fastest other", "convt max rel err", "torch max rel err",
]  # fmt: skip
README_COLUMNS = [
    "workload", "dtype", "convt ms", "convt % of matmul rate",
    *(f"{engine} ms" for engine in OTHER_ENGINES), "fastest other", "speed-up vs fastest other",
]  # fmt: skip


def table_rows(run: dict, columns: list[str]) -> list[list[str]]:
    """The rows of a table with these columns, one per workload."""
    return [[row_cells(run, record)[column] for column in columns] for record in run["workloads"]]


def markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Lines of a Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def geometric_mean_line(run: dict) -> str:
    """The geometric mean of convt's speed-ups over the workloads where both sides ran."""
    speedups = [s for s in map(convt_speedup, run["workloads"]) if s is not None]
    if not speedups:
        return "Geometric mean of convt's speed-up vs the fastest other engine: n/a (convt did not run)."
    mean = math.exp(sum(map(math.log, speedups)) / len(speedups))
    return (
        f"Geometric mean of convt's speed-up vs the fastest other engine: **{mean:.2f}×** "
        f"over {len(speedups)} workload(s)."
    )


def accuracy_rows(run: dict) -> list[list[str]]:
    """Per workload, 'max abs error (max rel error)' of every engine."""
    rows = []
    for record in run["workloads"]:
        cells = [record["name"], record["dtype"]]
        for engine in ENGINE_NAMES:
            result = record["engines"].get(engine)
            if result is None:
                cells.append(NOT_SELECTED)
            elif result.get("max_abs_err") is None:
                cells.append("n/a")
            else:
                cells.append(f"{format_error(result['max_abs_err'])} ({format_error(result['max_rel_err'])})")
        rows.append(cells)
    return rows


def unavailable_lines(run: dict) -> list[str]:
    """One bullet per (engine, reason), listing the workloads it applies to."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for record in run["workloads"]:
        for engine, result in record["engines"].items():
            if "unavailable" in result:
                grouped.setdefault((engine, result["unavailable"]), []).append(record["name"])
        if not record["reference"].startswith("torch"):
            grouped.setdefault(("reference", record["reference"]), []).append(record["name"])
    every = len(run["workloads"])
    return [
        f"- **{engine}** on {'all workloads' if len(names) == every > 1 else ', '.join(names)}: {reason}"
        for (engine, reason), names in grouped.items()
    ]


def header_lines(run: dict) -> list[str]:
    """Title, machine, versions, roofline and method."""
    machine, roofline = run["machine"], run["roofline_gflops"]
    size = roofline["matrix_size"]
    versions = ", ".join(f"{name} {version or 'not importable'}" for name, version in run["versions"].items())

    def rates(by_dtype: dict) -> str:
        return ", ".join(f"{dtype} {by_dtype[dtype]:.1f}" for dtype in ("float32", "float64"))

    return [
        f"# ConvTranspose benchmark, {run['date']}, {run['threads']} thread(s)",
        "",
        f"- Machine: {machine['cpu']} (AVX-512: {machine['avx512']}), {machine['logical_cpus']} logical "
        f"CPUs, {machine['usable_cores']} usable by this process",
        f"- Threads: {run['threads']} for every engine and for the roofline",
        f"- Platform: {machine['platform']}",
        f"- Versions: {versions}",
        f"- BLAS/OpenMP pools seen by threadpoolctl: {'; '.join(run['thread_pools']) or 'none'}",
        f"- Roofline, NumPy {size}×{size} matmul GFLOP/s (best of before/after): {rates(roofline['best'])} "
        f"(before: {rates(roofline['before'])}; after: {rates(roofline['after'])})",
        f"- Times are medians of {run['repeat']} interleaved calls, each after an idle wait and an untimed "
        "priming call of the same engine; "
        "errors are vs a float64 torch reference, relative to max |reference|.",
        timing_spread_line(run),
        other_load_line(run),
    ]


def timing_spread_line(run: dict) -> str:
    """How noisy the timings were: the median, over all engines and workloads,
    of the interquartile range of the repeated calls relative to their median."""
    spreads = []
    for record in run["workloads"]:
        for result in record["engines"].values():
            if "times_ms" in result:
                quartiles = statistics.quantiles(result["times_ms"], n=4)
                spreads.append((quartiles[2] - quartiles[0]) / result["median_ms"])
    if not spreads:
        return "- Timing spread: n/a (nothing was timed)"
    return (
        f"- Timing spread (median over engines and workloads of IQR / median of the repeats): "
        f"{100 * statistics.median(spreads):.0f}%; raw timings are in latest.json"
    )


def other_load_line(run: dict) -> str:
    """How much of the machine other processes used while this run was timing."""
    load = run["other_processes_cpu_load"]
    if load is None:
        return "- CPU used by other processes during the run: unknown (no /proc/stat)"
    return (
        f"- CPU used by other processes (or stolen by the hypervisor) during the run: {100 * load:.0f}% "
        "of the machine; above a few percent, rerun on a quieter machine"
    )


def scaling_lines(run: dict) -> list[str]:
    """convt at one thread against convt at the run's thread count, same rounds."""
    rows = []
    for record in run["workloads"]:
        one, many = record["engines"].get("convt@1", {}), record["engines"].get("convt", {})
        if "median_ms" in one and "median_ms" in many:
            rows.append([record["name"], format_ms(one["median_ms"]), format_ms(many["median_ms"]),
                         f"{one['median_ms'] / many['median_ms']:.2f}×"])
    if not rows:
        return []
    header = ["workload", "convt 1 thread ms", f"convt {run['threads']} threads ms", "speed-up"]
    return [f"## Thread scaling of convt (1 -> {run['threads']} threads)", "",
            *markdown_table(header, rows), ""]


def render_markdown(run: dict) -> str:
    """The whole Markdown report of a run."""
    header = [f"{column}¹" if column == "openvino ms" else column for column in MAIN_COLUMNS]
    rows = table_rows(run, MAIN_COLUMNS)
    shapes = [
        [record["name"], record["shape"], f"{record['flops'] / 1e9:.3g}"]
        for record in run["workloads"]
    ]
    accuracy_header = ["workload", "dtype", *(f"{engine} abs (rel)" for engine in ENGINE_NAMES)]
    lines = header_lines(run) + ["", *markdown_table(header, rows), "", geometric_mean_line(run), ""]
    lines += [
        "`convt ms` writes into a reused `out=` array, as OpenVINO reuses its request's output "
        "tensor; `convt new-array ms` is `apply(x, w)` returning a fresh array (the difference is "
        "the OS mapping new pages). ¹ OpenVINO computes float64 in float32, so it is not counted "
        "as the fastest float64 engine.",
        "",
    ]
    lines += scaling_lines(run)
    lines += ["## Accuracy of every engine: max abs error (max relative error)", ""]
    lines += markdown_table(accuracy_header, accuracy_rows(run)) + [""]
    unavailable = unavailable_lines(run)
    if unavailable:
        lines += ["## Not available (n/a)", "", *unavailable, ""]
    lines += ["## Workloads", "", *markdown_table(["workload", "shape", "GFLOP"], shapes), ""]
    return "\n".join(lines)


def plot_rates(run: dict, path: Path) -> None:
    """Grouped bars of GFLOP/s per workload and engine, with the matmul rooflines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads, engines = run["workloads"], run["engines"]
    width = 0.8 / len(engines)
    figure, axes = plt.subplots(figsize=(max(8.0, 1.1 * len(workloads) + 3), 6))
    all_rates = []
    for index, engine in enumerate(engines):
        positions, rates = [], []
        for position, record in enumerate(workloads):
            result = record["engines"].get(engine, {})
            if "gflops" in result:
                positions.append(position + (index - (len(engines) - 1) / 2) * width)
                rates.append(result["gflops"])
        color = f"C{ENGINE_NAMES.index(engine)}"  # the same colour for an engine in every chart
        axes.bar(positions, rates, width, label=engine, color=color)
        all_rates += rates
    best = run["roofline_gflops"]["best"]
    for dtype, style in (("float32", "-"), ("float64", "--")):
        axes.axhline(best[dtype], color="black", linestyle=style, linewidth=1,
                     label=f"NumPy matmul {dtype}: {best[dtype]:.0f}")  # fmt: skip
    axes.set_yscale("log")
    lowest = min(all_rates, default=best["float64"])
    axes.set_ylim(10 ** math.floor(math.log10(lowest / 1.5)), 1.5 * max(best.values()))
    axes.set_ylabel("GFLOP/s (log scale, higher is better)")
    axes.set_xticks(range(len(workloads)), [record["name"] for record in workloads], rotation=35, ha="right")
    axes.set_title(f"ConvTranspose, {run['machine']['cpu']}, {run['threads']} thread(s), {run['date']}")
    axes.grid(axis="y", which="both", alpha=0.3)
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
