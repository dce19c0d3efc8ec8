"""Re-measure convt's tuning thresholds on this machine and print what it would choose.

Every threshold of convt/_dispatch.py is measured by timing convt itself with
the constant changed (the constants are part of every plan cache key, so they
can change at run time), on layers that sit on both sides of it:

    python benchmarks/tune.py [--threads N] [--repeat R] [--only name,name]

Nothing is written: compare the choices with the constants in _dispatch.py and
change them there, with the measurement in the comment.  Run it on a quiet
machine (other processes distort thread timings); it takes a few minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import os
import statistics
import time

import numpy as np

import convt
from convt import _dispatch, _engine

DEFAULT_REPEAT = 9


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT)
    parser.add_argument("--only", help=f"comma-separated subset of: {', '.join(TUNERS)}")
    return parser.parse_args(argv)


@contextlib.contextmanager
def constant(name, value):
    """_dispatch.<name> = value for the duration."""
    saved = getattr(_dispatch, name)
    setattr(_dispatch, name, value)
    try:
        yield
    finally:
        setattr(_dispatch, name, saved)


@contextlib.contextmanager
def kernel_set_forced(name):
    """CONVT_GEMM_BACKEND=name (None: unset) for the duration."""
    variable = _dispatch.KERNEL_SET_VARIABLE
    saved = os.environ.pop(variable, None)
    if name is not None:
        os.environ[variable] = name
    try:
        yield
    finally:
        os.environ.pop(variable, None)
        if saved is not None:
            os.environ[variable] = saved


class Layer:
    """A ConvTranspose call with fixed random operands, timed through one path."""

    def __init__(self, x_shape, w_shape, dtype=np.float32, **params):
        rng = np.random.default_rng(0)
        self.x = rng.standard_normal(x_shape).astype(dtype)
        self.w = (rng.standard_normal(w_shape) / math.sqrt(w_shape[0])).astype(dtype)
        self.layer = convt.ConvTranspose(**params)
        self.label = (f"{x_shape[0]}x{x_shape[1]}->{w_shape[1] * params.get('group', 1)} "
                      f"{'x'.join(map(str, x_shape[2:]))} k{w_shape[2]} "
                      f"s{params.get('strides', (1,))[0]} g{params.get('group', 1)}")

    def time(self, threads, repeat, engine=None, kernel_set=None, **overrides):
        """Median seconds of one call (output reused, as in a loop)."""
        attributes, x, w, b, geometry = self.layer._prepare(self.x, self.w, None)
        # y in the layer's layout, seen (N, C, D...) as the engine takes it
        y = np.empty(self.layer.output_shape_for(self.x.shape, self.w.shape), x.dtype)
        if self.layer.data_format == "NXC":
            y = np.moveaxis(y, -1, 1)

        def call():
            _engine.compute(x, w, None, y, geometry, attributes.group, threads,
                            engine=engine, backend=kernel_set, **overrides)

        for _ in range(2):
            call()
        times = []
        gc.disable()
        try:
            for _ in range(repeat):
                start = time.perf_counter()
                call()
                times.append(time.perf_counter() - start)
        finally:
            gc.enable()
        return statistics.median(times)

    @property
    def work(self):
        """Multiply-adds per output position and group (the engine criterion)."""
        group = self.layer.group
        return self.x.shape[1] // group * self.w.shape[1] * math.prod(self.w.shape[2:])


def report(title, rows, header):
    print(f"\n== {title}")
    print("   " + " | ".join(header))
    for row in rows:
        print("   " + " | ".join(str(cell) for cell in row))


def tune_direct_max_work(args):
    """Direct engine below this many multiply-adds per output and group, GEMM above."""
    layers = [
        Layer((1, 1, 512, 512), (1, 1, 2, 2), strides=(2, 2)),
        Layer((1, 1, 512, 512), (1, 1, 3, 3), pads=(1, 1, 1, 1)),
        Layer((1, 16, 256, 256), (16, 1, 2, 2), strides=(2, 2), group=16),
        Layer((1, 16, 256, 256), (16, 1, 3, 3), pads=(1, 1, 1, 1), group=16),
        Layer((1, 1, 1024, 1024), (1, 1, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1)),
        Layer((1, 16, 256, 256), (16, 1, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1), group=16),
        Layer((1, 2, 256, 256), (2, 2, 3, 3), pads=(1, 1, 1, 1)),
        Layer((1, 2, 256, 256), (2, 2, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1)),
        Layer((1, 4, 128, 128), (4, 4, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1)),
    ]
    rows, direct_wins = [], []
    for layer in layers:
        direct = layer.time(args.threads, args.repeat, engine="direct")
        gemm = layer.time(args.threads, args.repeat, engine="gemm")
        rows.append((layer.label, layer.work, f"{direct * 1e3:.3f}", f"{gemm * 1e3:.3f}",
                     f"{gemm / direct:.2f}"))
        direct_wins.append((layer.work, direct < gemm))
    report("DIRECT_MAX_WORK: direct vs GEMM engine", rows,
           ["layer", "work", "direct ms", "gemm ms", "gemm/direct"])
    # the smallest work where the GEMM engine wins and keeps winning
    choice = min((work for work, _ in direct_wins if all(not wins for w, wins in direct_wins
                                                          if w >= work)), default=None)
    print(f"   would choose DIRECT_MAX_WORK = {choice} (now {_dispatch.DIRECT_MAX_WORK})")


def tune_direct_min_row(args):
    """Direct engine only on output rows this long (below DIRECT_MAX_WORK)."""
    rows, direct_wins = [], []
    for width, channels in ((56, 128), (112, 128), (128, 64), (160, 32), (192, 32), (256, 16),
                            (512, 4)):
        layer = Layer((1, channels, width, width), (channels, 1, 3, 3), pads=(1, 1, 1, 1),
                      group=channels)
        direct = layer.time(args.threads, args.repeat, engine="direct")
        gemm = layer.time(args.threads, args.repeat, engine="gemm")
        rows.append((layer.label, width, f"{direct * 1e3:.3f}", f"{gemm * 1e3:.3f}",
                     f"{gemm / direct:.2f}"))
        direct_wins.append((width, direct < gemm))
    report("DIRECT_MIN_ROW: direct vs GEMM engine on depthwise 3x3 by row length", rows,
           ["layer", "row", "direct ms", "gemm ms", "gemm/direct"])
    choice = min((row for row, _ in direct_wins if all(wins for r, wins in direct_wins
                                                       if r >= row)), default=None)
    print(f"   would choose DIRECT_MIN_ROW = {choice} (now {_dispatch.DIRECT_MIN_ROW})")


def tune_avx512_min_depth(args):
    """AVX2 kernels below this reduction depth, AVX-512 above (where both exist)."""
    sets = _dispatch.available_kernel_sets()
    if not {"avx2", "avx512"} <= set(sets):
        print("\n== AVX512_MIN_DEPTH: needs both AVX2 and AVX-512 here; skipped")
        return
    rows, avx512_wins = [], []
    for channels in (1, 2, 4, 8, 16, 32, 64):
        depth = channels * 4  # k4 s2: 2 x 2 taps per phase
        layer = Layer((1, channels, 96, 96), (channels, 16, 4, 4), strides=(2, 2),
                      pads=(1, 1, 1, 1))
        avx2 = layer.time(args.threads, args.repeat, kernel_set="avx2")
        avx512 = layer.time(args.threads, args.repeat, kernel_set="avx512")
        rows.append((depth, f"{avx2 * 1e3:.3f}", f"{avx512 * 1e3:.3f}", f"{avx2 / avx512:.2f}"))
        avx512_wins.append((depth, avx512 < avx2))
    report("AVX512_MIN_DEPTH: AVX2 vs AVX-512 by reduction depth", rows,
           ["depth", "avx2 ms", "avx512 ms", "avx512 speed-up"])
    choice = min((depth for depth, _ in avx512_wins if all(wins for d, wins in avx512_wins
                                                           if d >= depth)), default=None)
    print(f"   would choose AVX512_MIN_DEPTH = {choice} (now {_dispatch.AVX512_MIN_DEPTH})")


def tune_wide(args):
    """avx512_wide (8 x 32) against avx512 (12 x 16) by layer size and row length."""
    if not {"avx512", "avx512_wide"} <= set(_dispatch.available_kernel_sets()):
        print("\n== WIDE_MIN_WORK / WIDE_MIN_POSITIONS: needs AVX-512 here; skipped")
        return
    layers = [Layer((1, 64, 8, 8), (64, 32, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1)),
              Layer((1, 64, 32, 32), (64, 32, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1)),
              Layer((1, 128, 64, 64), (128, 64, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1)),
              Layer((1, 320, 8, 12, 12), (320, 256, 1, 2, 2), strides=(1, 2, 2)),
              Layer((1, 128, 128, 128), (128, 64, 2, 2), strides=(2, 2)),
              Layer((8, 64, 56, 56), (64, 64, 3, 3), pads=(1, 1, 1, 1)),
              Layer((8, 256, 32, 32), (256, 128, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1)),
              Layer((1, 512, 1024), (512, 256, 16), strides=(8,), pads=(4, 4))]
    rows = []
    for layer in layers:
        narrow = layer.time(args.threads, args.repeat, kernel_set="avx512")
        wide = layer.time(args.threads, args.repeat, kernel_set="avx512_wide")
        group = layer.layer.group
        problem = _dispatch.Problem(layer.layer._geometry_for(layer.x.shape, layer.w.shape),
                                    layer.x.shape[0], layer.x.shape[1], layer.w.shape[1] * group,
                                    group, layer.x.dtype)
        chosen = _dispatch.decide(problem).kernel_set
        rows.append((layer.label, f"{problem.multiply_adds() / 1e6:.0f}", f"{narrow * 1e3:.3f}",
                     f"{wide * 1e3:.3f}", f"{narrow / wide:.2f}", chosen))
    report("WIDE_MIN_WORK / WIDE_MIN_POSITIONS: avx512 vs avx512_wide", rows,
           ["layer", "M multiply-adds", "avx512 ms", "avx512_wide ms", "wide speed-up",
            "chosen now"])
    print(f"   512-bit FMAs measured at {_dispatch.fma_512_speedup():.2f}x the 256-bit rate per "
          f"FLOP: {'native' if _dispatch.native_512_fma() else 'split'} (the wide set needs "
          f">= NATIVE_512_MIN_SPEEDUP={_dispatch.NATIVE_512_MIN_SPEEDUP}; the table above forces "
          f"both sets)")
    print(f"   now: wide from {_dispatch.WIDE_MIN_WORK} multiply-adds "
          f"({_dispatch.WIDE_MIN_WORK_PAIRED} for exact-stack layers: k4s2 and the like) on "
          f"rows of {_dispatch.WIDE_MIN_POSITIONS} or more; choose the smallest work above "
          f"which wide wins on every layer of each kind with rows that long")


def _sweep(args, title, name, values, layers, scale=1):
    """Time `layers` with _dispatch.<name> at each value; choose the best geometric mean.
    The GEMM engine's constants: the layers run it even where Winograd would serve them."""
    table, scores = [], {}
    for value in values:
        with constant(name, value):
            times = [layer.time(args.threads, args.repeat, engine="gemm") for layer in layers]
        scores[value] = math.exp(sum(map(math.log, times)) / len(times))
        table.append((value // scale,) + tuple(f"{t * 1e3:.3f}" for t in times))
    report(f"{name}: {title}", table,
           [name + ("" if scale == 1 else f" / {scale}")] + [layer.label for layer in layers])
    best = min(scores, key=scores.get)
    now = getattr(_dispatch, name)
    print(f"   would choose {name} = {best} (now {now}: "
          f"{scores[now] / scores[best]:.3f}x the best)" if now in scores else
          f"   would choose {name} = {best} (now {now})")


def _dense_layers():
    return [
        Layer((1, 256, 64, 64), (256, 128, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1)),
        Layer((1, 64, 32, 32, 32), (64, 32, 2, 2, 2), strides=(2, 2, 2)),
        Layer((8, 64, 56, 56), (64, 64, 3, 3), pads=(1, 1, 1, 1)),
    ]


def tune_operand_bytes(args):
    _sweep(args, "tile buffer budget per thread", "OPERAND_BYTES",
           [128 << 10, 256 << 10, 384 << 10, 512 << 10, 1 << 20], _dense_layers(), 1024)


def tune_product_bytes(args):
    _sweep(args, "product buffer budget per thread", "PRODUCT_BYTES",
           [256 << 10, 512 << 10, 1 << 20, 2 << 20], _dense_layers(), 1024)


def tune_max_depth(args):
    """K chunks: K_STEP_BYTES sets how many steps fit two thirds of the L1 data cache."""
    layers = [Layer((1, 512, 1024), (512, 256, 16), strides=(8,), pads=(4, 4)),
              Layer((1, 512, 32, 32), (512, 256, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1)),
              Layer((8, 64, 56, 56), (64, 64, 3, 3), pads=(1, 1, 1, 1)),
              Layer((8, 256, 32, 32), (256, 128, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1))]
    l1 = _dispatch.l1_data_bytes()
    print(f"L1 data cache {l1 // 1024} KiB: K_STEP_BYTES 32, 64, 128, 256, 512 give chunks of "
          + ", ".join(str(min(_dispatch.MAX_DEPTH, max(_dispatch.MIN_DEPTH, l1 * 2 // (3 * b))))
                      for b in (32, 64, 128, 256, 512)) + " steps")
    _sweep(args, "bytes of B rows per K step in L1", "K_STEP_BYTES", [32, 64, 128, 256, 512],
           layers)
    best = _dispatch.preferred_kernel_set()
    if _dispatch.b_streams_from_l2(best):
        # exact stacks (k4s2) too: their pair chunks follow the same factor
        layers.append(Layer((1, 256, 64, 64), (256, 128, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1)))
        _sweep(args, f"L1s a K chunk's B rows are sized to ({best} kernels read B from L2 here)",
               "L2_CHUNK_L1_FACTOR", [1, 2, 4, 8, 16], layers)


def tune_min_work_items(args):
    layers = [Layer((1, 64, 32, 32), (64, 32, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1)),
              Layer((1, 128, 16, 16), (128, 64, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1)),
              Layer((1, 256, 256), (256, 128, 8), strides=(4,), pads=(2, 2))]
    _sweep(args, f"work items to aim for, per core ({os.cpu_count()} cores; at most "
           f"MAX_WORK_ITEMS={_dispatch.MAX_WORK_ITEMS})", "WORK_ITEMS_PER_CORE",
           [1, 2, 4, 8, 12], layers)
    _sweep(args, "fewest grid rows per split tile", "MIN_SPLIT_ROWS", [1, 2, 4, 8], layers)


def tune_pack_min_blocks(args):
    if "avx2" not in _dispatch.available_kernel_sets():
        print("\n== PACK_MIN_BLOCKS: the packing kernels are AVX2's; skipped")
        return
    layers = [layer for layer in _dense_layers()]
    table, scores = [], {}
    for value in (2, 4, 8, 10**9):
        with constant("PACK_MIN_BLOCKS", value):
            times = [layer.time(args.threads, args.repeat, kernel_set="avx2") for layer in layers]
        scores[value] = math.exp(sum(map(math.log, times)) / len(times))
        table.append(("never" if value == 10**9 else value,)
                     + tuple(f"{t * 1e3:.3f}" for t in times))
    report("PACK_MIN_BLOCKS: AVX2 kernels, B panels packed from this many row blocks", table,
           ["PACK_MIN_BLOCKS"] + [layer.label for layer in layers])
    print(f"   would choose PACK_MIN_BLOCKS = {min(scores, key=scores.get)} "
          f"(now {_dispatch.PACK_MIN_BLOCKS})")


def tune_sum_blocks(args):
    """Speed of the blocked-summation lengths (accuracy favours about 2 sqrt(depth))."""
    layers = _dense_layers()[:1] + [Layer((1, 512, 1024), (512, 256, 16), strides=(8,),
                                          pads=(4, 4))]
    for name, values in (("SUM_BLOCK_SHALLOW", [16, 32, 64]), ("SUM_BLOCK_DEEP", [32, 64, 128])):
        _sweep(args, "steps per blocked sum (speed only; errors grow with longer blocks)", name,
               values, layers)


def tune_winograd_phases(args):
    """Winograd F(2x2, 2x2) on the stride phases of k4 s2 layers against the GEMM engine:
    WINOGRAD_PHASE_MIN_CHANNELS and WINOGRAD_PHASE_MIN_WORK (in-process medians, the
    same call in a loop: its transformed weights stay in the caches)."""
    k4s2 = dict(strides=(2, 2), pads=(1, 1, 1, 1))
    layers = [
        Layer((1, 256, 64, 64), (256, 128, 4, 4), **k4s2),
        Layer((1, 64, 128, 128), (64, 64, 4, 4), **k4s2),
        Layer((1, 128, 32, 32), (128, 128, 4, 4), **k4s2),
        Layer((1, 64, 64, 64), (64, 64, 4, 4), **k4s2),
        Layer((4, 128, 32, 32), (128, 64, 4, 4), **k4s2),
        Layer((1, 256, 16, 16), (256, 128, 4, 4), **k4s2),
        Layer((1, 512, 8, 8), (512, 256, 4, 4), **k4s2),
        Layer((1, 32, 64, 64), (32, 32, 4, 4), **k4s2),
        Layer((1, 64, 128, 128), (64, 32, 4, 4), **k4s2),
    ]
    rows = []
    with constant("WINOGRAD_PHASE_MIN_WORK", 0), constant("WINOGRAD_PHASE_MIN_CHANNELS", 1):
        for layer in layers:
            work = layer.work * math.prod(layer.x.shape[2:]) * layer.x.shape[0]
            winograd = layer.time(args.threads, args.repeat)
            gemm = layer.time(args.threads, args.repeat, engine="gemm")
            rows.append((layer.label, f"2^{math.log2(work):.1f}", f"{winograd * 1e3:.3f}",
                         f"{gemm * 1e3:.3f}", f"{gemm / winograd:.2f}"))
    report("WINOGRAD_PHASE_MIN_WORK / _MIN_CHANNELS: F(2x2, 2x2) phases vs GEMM engine", rows,
           ["layer", "multiply-adds", "winograd ms", "gemm ms", "gemm/winograd"])
    print(f"   now: from {_dispatch.WINOGRAD_PHASE_MIN_CHANNELS} channels and "
          f"2^{math.log2(_dispatch.WINOGRAD_PHASE_MIN_WORK):.0f} multiply-adds; choose the "
          f"smallest of each above which gemm/winograd stays above 1")


def tune_threads(args):
    """Multiply-adds per thread before another thread is woken."""
    rows = []
    crossover = None
    for side in (4, 8, 12, 16, 24, 32, 48):
        layer = Layer((1, 64, side, side), (64, 32, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1))
        macs = 64 * 32 * 16 * side * side
        with constant("MIN_MULTIPLY_ADDS_PER_THREAD", 1):
            one = layer.time(1, args.repeat * 5)
            many = layer.time(args.threads, args.repeat * 5)
        rows.append((side, f"{macs / 1e6:.1f}", f"{one * 1e6:.0f}", f"{many * 1e6:.0f}",
                     f"{one / many:.2f}"))
        if crossover is None and many < one:
            crossover = macs
    report(f"MIN_MULTIPLY_ADDS_PER_THREAD: 1 vs {args.threads} threads on small maps", rows,
           ["side", "M multiply-adds", "1 thread us", f"{args.threads} threads us", "speed-up"])
    if crossover is not None:
        per_thread = crossover // args.threads
        print(f"   would choose MIN_MULTIPLY_ADDS_PER_THREAD ~ {per_thread:,} "
              f"(now {_dispatch.MIN_MULTIPLY_ADDS_PER_THREAD:,})")


def tune_channel_rows(args):
    """Channels-last depthwise rows with the channels as vector lanes from this many
    channels; the channel-by-channel direct rows below."""
    rows, wins = [], []
    for channels, size in ((3, 512), (4, 512), (6, 384), (8, 384), (12, 256), (16, 256),
                           (32, 192)):
        for kernel, params in ((4, dict(strides=(2, 2), pads=(1, 1, 1, 1))),
                               (3, dict(pads=(1, 1, 1, 1)))):
            layer = Layer((1, size, size, channels), (kernel, kernel, 1, channels),
                          group=channels, data_format="NXC", filter_format="XOI", **params)
            vectors = layer.time(args.threads, args.repeat, engine="direct",
                                 channel_vectors=True)
            rows_of_one = layer.time(args.threads, args.repeat, engine="direct",
                                     channel_vectors=False)
            rows.append((f"{channels} channels {size}x{size} k{kernel}", f"{vectors * 1e3:.3f}",
                         f"{rows_of_one * 1e3:.3f}", f"{rows_of_one / vectors:.2f}"))
            wins.append((channels, vectors < rows_of_one))
    report("CHANNEL_ROW_MIN_CHANNELS: channel-vector rows vs channel-by-channel rows", rows,
           ["layer (NXC, depthwise)", "vectors ms", "channel by channel ms", "speed-up"])
    choice = min((c for c, _ in wins if all(win for d, win in wins if d >= c)), default=None)
    print(f"   would choose CHANNEL_ROW_MIN_CHANNELS = {choice} "
          f"(now {_dispatch.CHANNEL_ROW_MIN_CHANNELS})")


def tune_wide_planes(args):
    """512-bit against 256-bit depthwise planes, and what wide_planes chooses."""
    if not {"avx2", "avx512"} <= set(_dispatch.available_kernel_sets()):
        print("\n== PLANE_WIDE_MIN_TAPS: needs both AVX2 and AVX-512 here; skipped")
        return
    rng = np.random.default_rng(0)
    rows = []
    repeat = max(args.repeat, 50)  # calls of 0.05-1 ms
    # (channels, side, kernel, stride, dtype): MobileNet, EfficientNet and ConvNeXt planes
    for channels, side, kernel, stride, dtype in (
            (960, 7, 3, 1, np.float32), (576, 14, 3, 1, np.float32), (192, 28, 3, 1, np.float32),
            (144, 56, 3, 1, np.float32), (128, 112, 3, 1, np.float32), (144, 56, 3, 2, np.float32),
            (1152, 7, 5, 1, np.float32), (480, 14, 5, 1, np.float32), (240, 28, 5, 1, np.float32),
            (240, 56, 5, 2, np.float32), (768, 7, 7, 1, np.float32), (384, 14, 7, 1, np.float32),
            (192, 28, 7, 1, np.float32), (96, 56, 7, 1, np.float32), (960, 7, 3, 1, np.float64),
            (240, 28, 5, 1, np.float64), (144, 56, 3, 1, np.float64)):
        pad = kernel // 2
        layer = convt.Conv(group=channels, strides=(stride, stride), pads=(pad,) * 4,
                           num_threads=args.threads)
        x = rng.standard_normal((1, channels, side, side)).astype(dtype)
        w = rng.standard_normal((channels, 1, kernel, kernel)).astype(dtype)
        seconds = {}
        for family in ("avx2", "avx512", "avx2", "avx512"):  # alternating, medians of each
            with kernel_set_forced(family):  # (apply's remembered calls: planned once)
                for _ in range(2):
                    layer.apply(x, w)
                times = []
                for _ in range(repeat):
                    start = time.perf_counter()
                    layer.apply(x, w)
                    times.append(time.perf_counter() - start)
            seconds.setdefault(family, []).append(statistics.median(times))
        narrow, wide = min(seconds["avx2"]), min(seconds["avx512"])
        with kernel_set_forced(None):
            chosen = convt.explain(layer, x.shape, w.shape, dtype).plane.family
        rows.append((f"{kernel}x{kernel} s{stride} {side}x{side} x {channels} "
                     f"{np.dtype(dtype).name}", f"{narrow * 1e3:.3f}", f"{wide * 1e3:.3f}",
                     f"{narrow / wide:.2f}", chosen,
                     "yes" if (chosen == "avx512") == (wide < narrow) else "NO"))
    report("PLANE_WIDE_MIN_TAPS (wide_planes): 256-bit vs 512-bit depthwise planes", rows,
           ["layer", "256-bit ms", "512-bit ms", "512-bit speed-up", "chosen", "faster chosen"])


TUNERS = {
    "direct": tune_direct_max_work,
    "rows": tune_direct_min_row,
    "channels": tune_channel_rows,
    "avx512": tune_avx512_min_depth,
    "wide": tune_wide,
    "operand": tune_operand_bytes,
    "product": tune_product_bytes,
    "depth": tune_max_depth,
    "items": tune_min_work_items,
    "pack": tune_pack_min_blocks,
    "sum": tune_sum_blocks,
    "threads": tune_threads,
    "winograd": tune_winograd_phases,
    "planes": tune_wide_planes,
}


def main(argv=None):
    args = parse_args(argv)
    names = args.only.split(",") if args.only else list(TUNERS)
    unknown = set(names) - set(TUNERS)
    if unknown:
        raise SystemExit(f"unknown tuners {sorted(unknown)}; choose from {', '.join(TUNERS)}")
    print(f"convt {convt.__version__}; kernel sets {', '.join(_dispatch.available_kernel_sets())}; "
          f"{args.threads} threads, {args.repeat} repeats, medians")
    for name in names:
        TUNERS[name](args)


if __name__ == "__main__":
    main()
