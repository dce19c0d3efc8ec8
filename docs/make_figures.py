"""Draw the figures of docs/: python docs/make_figures.py (needs matplotlib).

Every figure is computed from convt itself (phases from convt._plan, sizes and
pads from ConvTranspose), so the pictures cannot drift from the code.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402

from convt import ConvTranspose, _dispatch  # noqa: E402
from convt._plan import axis_groups, axis_phases  # noqa: E402

HERE = Path(__file__).resolve().parent
PHASE_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red")


def phases_figure(path):
    """1-D, 5 inputs, kernel 4, stride 2, pads (1, 1): which taps reach which outputs."""
    size, kernel, stride, pad = 5, 4, 2, 1
    layer = ConvTranspose(strides=(stride,), pads=(pad, pad))
    (out,) = layer.output_shape_for((1, 1, size), (1, 1, kernel))[2:]
    phases = axis_phases(size, kernel, stride, 1, pad, out)
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5.8),
                                         gridspec_kw={"height_ratios": [3, 1.6]})
    # scatter view: every (input, tap) pair lands on output o = i * s + k - pad
    for i in range(size):
        top.add_patch(Rectangle((2 * i + 0.6, 2.6), 0.8, 0.8, color="0.85"))
        top.text(2 * i + 1.0, 3.0, f"x{i}", ha="center", va="center")
    for o in range(out):
        colour = PHASE_COLOURS[o % stride]
        top.add_patch(Rectangle((o + 0.6, -0.4), 0.8, 0.8, color=colour, alpha=0.35))
        top.text(o + 1.0, 0.0, f"y{o}", ha="center", va="center")
    for i in range(size):
        for k in range(kernel):
            o = i * stride + k - pad
            if 0 <= o < out:
                top.add_patch(FancyArrowPatch((2 * i + 1.0, 2.55), (o + 1.0, 0.45),
                                              arrowstyle="-|>", mutation_scale=8,
                                              color=PHASE_COLOURS[o % stride], alpha=0.7))
                top.text((2 * i + o + 2.0) / 2, 1.5 + 0.18 * (k - 1.5), f"w{k}",
                         fontsize=7, color=PHASE_COLOURS[o % stride])
    top.set_xlim(0, max(out, 2 * size) + 1)
    top.set_ylim(-0.8, 3.6)
    top.axis("off")
    top.set_title(f"Input {size}, kernel {kernel}, stride {stride}, pads ({pad}, {pad}): output {out}."
                  f"  y[o] receives x[i] w[k] where o = {stride}i + k - {pad}.", fontsize=11)
    # phase view: each residue is a stride-1 correlation with its own taps
    lines = ["Outputs o = r + t*stride of one residue r read fixed taps: a stride-1 "
             "correlation over the un-expanded input."]
    for phase in phases:
        taps = " + ".join(f"w{k} x[t{offset:+d}]".replace("+0]", "]") for k, offset in phase.taps)
        lines.append(f"residue r = {phase.residue}  (y{phase.residue}, y{phase.residue + stride}, ...):"
                     f"   y[{phase.residue} + {stride}t] = {taps}")
    groups = axis_groups(phases)
    shifts = sorted({shift for group in groups for shift in group.shifts})
    if len(groups) == 1:
        lines.append(f"Both read offsets {list(groups[0].offsets)} up to a shift {shifts}: stacked "
                     "into one GEMM.  Every output is written exactly once.")
    else:
        lines.append(f"Same offsets up to shifts {shifts}, but on so short an axis the shared grid "
                     f"would be 1/{max(phase.count for phase in phases)} longer: {len(groups)} GEMMs.")
    for row, text in enumerate(lines):
        colour = PHASE_COLOURS[row - 1] if 1 <= row <= len(phases) else "black"
        bottom.text(0.0, 1.0 - 0.26 * row, text, fontsize=10, color=colour, va="top",
                    family="monospace" if 1 <= row <= len(phases) else None)
    bottom.axis("off")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def padding_figure(path):
    """Full size, pads and output_padding along one axis, for the main auto_pad modes."""
    size, kernel, stride = 4, 3, 2
    cases = [
        ("pads=(1, 2)", dict(pads=(1, 2))),
        ("output_padding=1, pads=(0, 0)", dict(output_padding=(1,), pads=(0, 0))),
        ("SAME_UPPER (output = 4 * 2)", dict(auto_pad="SAME_UPPER")),
        ("SAME_LOWER", dict(auto_pad="SAME_LOWER")),
        ("output_shape=(12,): negative pads", dict(output_shape=(12,))),
    ]
    full = stride * (size - 1) + kernel
    figure, axes = plt.subplots(figsize=(10, 4.6))
    for row, (label, params) in enumerate(cases):
        layer = ConvTranspose(strides=(stride,), **params)
        ((begin, end),) = layer.pads_for((1, 1, size), (1, 1, kernel))
        (out,) = layer.output_shape_for((1, 1, size), (1, 1, kernel))[2:]
        extra = params.get("output_padding", (0,))[0]
        y = len(cases) - row
        for o in range(full + extra):
            computed = o < full
            axes.add_patch(Rectangle((o, y), 0.9, 0.6, color="0.8" if computed else "0.95",
                                     ec="0.5", lw=0.5))
        for o in range(out):
            position = o + begin  # index in the un-cropped output
            zero = position < 0 or position >= full
            axes.add_patch(Rectangle((position + 0.05, y + 0.05), 0.8, 0.5,
                                     color="white" if zero else "tab:blue",
                                     ec="tab:blue", lw=1.2, alpha=0.8))
        axes.text(-9.5, y + 0.3, label, va="center", fontsize=9)
        axes.text(full + 3, y + 0.3, f"pads ({begin}, {end}), output {out}", va="center",
                  fontsize=9)
    axes.set_xlim(-9.6, full + 8)
    axes.set_ylim(0.6, len(cases) + 1)
    axes.axis("off")
    axes.set_title(f"Input {size}, kernel {kernel}, stride {stride}: grey = the {full} computed "
                   "values, blue = the output (white = zero margin from a negative pad)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def engine_figure(path):
    """Data flow of the GEMM engine for one work item."""
    figure, axes = plt.subplots(figsize=(10, 3.6))
    boxes = [
        (0.0, "x tile\n(any layout, f16/f32/f64)"),
        (2.1, "zero-padded buffer\ncopied once per tile\n(L2-sized)"),
        (4.2, "micro-kernel\n6 rows x 16 positions\nB row k = buffer[q + offset[k]]"),
        (6.3, "product rows\n(phase, channel, residue)"),
        (8.4, "y\nresidues interleaved,\nbias, rounded once"),
    ]
    for x, text in boxes:
        axes.add_patch(Rectangle((x, 0.3), 1.7, 1.4, color="tab:blue", alpha=0.15, ec="tab:blue"))
        axes.text(x + 0.85, 1.0, text, ha="center", va="center", fontsize=9)
    for (x0, _), (x1, _) in zip(boxes, boxes[1:]):
        axes.add_patch(FancyArrowPatch((x0 + 1.72, 1.0), (x1 - 0.02, 1.0), arrowstyle="-|>",
                                       mutation_scale=12))
    axes.text(4.2 + 0.85, 2.05, "packed weights [block][depth][rows]\n(once per call)",
              ha="center", fontsize=9)
    axes.add_patch(FancyArrowPatch((5.05, 1.9), (5.05, 1.72), arrowstyle="-|>", mutation_scale=12))
    axes.set_xlim(-0.1, 10.2)
    axes.set_ylim(0.1, 2.5)
    axes.axis("off")
    axes.set_title("GEMM engine: one work item (tile of positions x group of rows), "
                   "OpenMP threads take items dynamically")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _box(axes, x, y, width, height, text, colour, size=8.5):
    axes.add_patch(Rectangle((x, y), width, height, color=colour, alpha=0.13, ec=colour))
    axes.text(x + width / 2, y + height / 2, text, ha="center", va="center", fontsize=size)


def _arrow(axes, start, end, colour="0.3"):
    axes.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=11, color=colour))


def architecture_figure(path):
    """The layers of convt (left) and the path of one apply call (right)."""
    figure, axes = plt.subplots(figsize=(12, 7.2))
    families = ", ".join(family.name for family in _dispatch.families())
    layers = [
        ("front-ends (pure Python)", "ConvTranspose, conv_transpose\n_validation.py, _geometry.py: "
         "attributes -> Geometry", "tab:blue"),
        ("dispatch point (pure Python)", "_dispatch.py: Problem + CPU + environment -> Decision\n"
         "(engine, kernel set, blocking, flags, named thresholds)", "tab:purple"),
        ("planner (pure Python)", "_plan.py: stride phases, stacks, tiles, work items\n"
         "-> read-only records (_records.py = src/records.h)", "tab:green"),
        ("Cython drivers (prange, fused float/double)", "_kernels.pyx: _gemm.pxi, _tiles.pxi, _pack.pxi, "
         "_direct.pxi,\n_storage.pxi (element types), _registry.pxi", "tab:orange"),
        ("C kernel sets, one file per CPU family", f"src/registry.c: {families}\n"
         "src/cpu.c (detection, once), src/reference.c (tests)", "tab:red"),
    ]
    top = 6.2
    for index, (title, text, colour) in enumerate(layers):
        y = top - index * 1.3
        _box(axes, 0.2, y, 5.4, 0.95, text, colour)
        axes.text(0.25, y + 1.0, title, fontsize=9, fontweight="bold", color=colour)
        if index:
            _arrow(axes, (4.9, y + 1.28), (4.9, y + 0.97))
    steps = [
        "layer.apply(x, w, b)",
        "validate attributes (memoised), arrays, shapes\nresolve pads and output size -> Geometry",
        "_engine.compute: Problem (shapes, group, dtype, layouts)",
        "execution(problem): cached per problem, request, tuning\n"
        "decide() -> Decision;  plan_for() -> GemmPlan / DirectPlan",
        "threads = min(requested, work items, work / MIN_MULTIPLY_ADDS_PER_THREAD)",
        "pack_weights: w -> [block][depth][rows] (GEMM engine)",
        "run_gemm: prange over work items: fill tile buffer ->\n"
        "set.gemm / pair / pair_store kernels -> scatter into y",
    ]
    for index, text in enumerate(steps):
        y = 6.55 - index * 0.93
        _box(axes, 6.4, y, 5.4, 0.72, text, "0.35", size=8.2)
        axes.text(6.25, y + 0.36, str(index + 1), ha="right", va="center", fontsize=9,
                  fontweight="bold")
        if index:
            _arrow(axes, (9.1, y + 0.91), (9.1, y + 0.74))
    axes.text(9.1, 7.45, "one call's path", ha="center", fontsize=10, fontweight="bold")
    axes.text(2.9, 7.45, "layers", ha="center", fontsize=10, fontweight="bold")
    axes.set_xlim(0, 12)
    axes.set_ylim(0.8, 7.7)
    axes.axis("off")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main():
    phases_figure(HERE / "phases.png")
    padding_figure(HERE / "padding.png")
    engine_figure(HERE / "engine.png")
    architecture_figure(HERE / "architecture.png")
    for name in ("phases.png", "padding.png", "engine.png", "architecture.png"):
        print("wrote", HERE / name)


if __name__ == "__main__":
    main()
