"""A quick sweep of many real layers beyond the tables: where does convt lose?

Usage:
    python benchmarks/sweep.py [--kind transpose|conv] [--threads N] [--only a,b]
                               [--engines convt,onnxruntime,torch]

For each engine in turn, one fresh process (no other engine's threads in it)
loops over every layer: two untimed calls, then calls for about 0.6 s (at least
5, at most 400); the median and the minimum are kept.  The engines run twice,
in opposite orders, and each engine's lower median and minimum are reported,
with convt's ratio to the fastest other engine (fastest other's ms / convt's ms:
above 1, convt is faster).  Quicker and rougher than run.py and forward.py (no
idle gaps, no priming before every call, one process per engine for all
layers): a map of the layers to look at, not figures for the README.  Layers
below 0.9x are marked.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from forward_workloads import ForwardWorkload  # noqa: E402
from workloads import Workload  # noqa: E402

SECONDS_PER_LAYER = 0.6
MARK_BELOW = 0.9


def transpose_layers():
    """ConvTranspose layers: DCGAN/VAE k4s2 over a range of maps, U-Net k2s2 (2-D and
    3-D), k3s2 with output padding, k3s1, 1-D vocoder upsamplers, depthwise and grouped,
    few-channel large kernels, float16 and float64."""
    layers = [Workload(f"k4s2_{c}_{s}", "float32", 1, c, c // 2, (s, s), 4, 2, 1)
              for c, s in [(1024, 4), (512, 4), (256, 8), (128, 16), (64, 32), (32, 64),
                           (16, 128), (64, 8), (32, 16), (128, 32)]]
    layers += [Workload(f"k2s2_{c}_{s}_b{b}", "float32", b, c, c // 2, (s, s), 2, 2, 0)
               for c, s, b in [(256, 16, 4), (128, 32, 2), (64, 64, 1), (512, 8, 1), (32, 128, 1)]]
    layers += [Workload(f"k2s2_3d_{c}_{s}", "float32", 1, c, c // 2, (s, s, s), 2, 2, 0)
               for c, s in [(128, 16), (64, 24), (256, 8)]]
    layers += [Workload(f"k3s2op1_{c}_{s}", "float32", 1, c, c // 2, (s, s), 3, 2, 1,
                        output_padding=1) for c, s in [(128, 32), (64, 64), (256, 16), (32, 96)]]
    layers += [Workload(f"k3s1_{c}_{s}", "float32", 1, c, c, (s, s), 3, 1, 1)
               for c, s in [(64, 64), (128, 32), (32, 128)]]
    layers += [Workload(f"1d_k{k}s{st}_{c}_{n}_b{b}", "float32", b, c, c // 2, (n,), k, st,
                        (k - st) // 2)
               for c, n, b, k, st in [(512, 64, 1, 16, 8), (256, 512, 2, 16, 8),
                                      (128, 4096, 1, 8, 4), (64, 8192, 1, 4, 2),
                                      (256, 256, 8, 4, 2), (32, 16384, 1, 16, 8)]]
    layers += [Workload(f"dw_k4s2_{c}_{s}", "float32", 1, c, c, (s, s), 4, 2, 1, group=c)
               for c, s in [(32, 64), (128, 32), (96, 56)]]
    layers += [
        Workload("g4_k4s2_128_32", "float32", 1, 128, 128, (32, 32), 4, 2, 1, group=4),
        Workload("few_k8s4_4_128", "float32", 1, 4, 4, (128, 128), 8, 4, 2),
        Workload("few_k5s1_8_256", "float32", 1, 8, 8, (256, 256), 5, 1, 2),
        Workload("c1_k3s2_1_512", "float32", 1, 1, 1, (512, 512), 3, 2, 1, output_padding=1),
        Workload("f16_k4s2_128_32", "float16", 1, 128, 64, (32, 32), 4, 2, 1),
        Workload("f16_k2s2_64_64", "float16", 1, 64, 32, (64, 64), 2, 2, 0),
        Workload("f64_k4s2_32_64", "float64", 1, 32, 16, (64, 64), 4, 2, 1),
        Workload("f64_k3s2_16_128", "float64", 1, 16, 8, (128, 128), 3, 2, 1, output_padding=1),
        Workload("dil2_k3s1_64_32", "float32", 1, 64, 64, (32, 32), 3, 1, 2, dilation=2),
    ]
    return layers


def conv_layers():
    """Conv layers: ResNet/VGG 3x3 stride 1 and 2 over every stage, 1x1 bottlenecks, the
    7x7 stem, MobileNet depthwise, batches, 1-D, 3-D, dilated, 5x5, float16 and float64."""
    layers = [ForwardWorkload(f"c3s1_{c}_{s}", "float32", 1, c, c, (s, s), 3, 1, 1)
              for c, s in [(64, 56), (128, 28), (256, 14), (512, 7), (32, 112), (16, 224)]]
    layers += [ForwardWorkload(f"c3s2_{c}_{s}", "float32", 1, c, 2 * c, (s, s), 3, 2, 1)
               for c, s in [(64, 56), (256, 28), (512, 14), (32, 112)]]
    layers += [ForwardWorkload(f"c1_{ci}_{co}_{s}", "float32", 1, ci, co, (s, s), 1, 1, 0)
               for ci, co, s in [(64, 256, 56), (512, 128, 28), (1024, 256, 14),
                                 (128, 512, 28), (2048, 512, 7)]]
    layers += [ForwardWorkload("stem_k7s2", "float32", 1, 3, 64, (224, 224), 7, 2, 3)]
    layers += [ForwardWorkload(f"dw3_s{st}_{c}_{s}", "float32", 1, c, c, (s, s), 3, st, 1,
                               group=c)
               for c, s, st in [(32, 112, 1), (144, 56, 2), (384, 14, 1), (960, 7, 1)]]
    layers += [
        ForwardWorkload("c3s1_b4_64_56", "float32", 4, 64, 64, (56, 56), 3, 1, 1),
        ForwardWorkload("c3s1_b16_32_32", "float32", 16, 32, 32, (32, 32), 3, 1, 1),
        ForwardWorkload("1d_k3_128_2048", "float32", 1, 128, 128, (2048,), 3, 1, 1),
        ForwardWorkload("1d_k5_b4_64_8000", "float32", 4, 64, 64, (8000,), 5, 1, 2),
        ForwardWorkload("1d_k31_64_4096", "float32", 1, 64, 64, (4096,), 31, 1, 15),
        ForwardWorkload("3d_k3_16_48", "float32", 1, 16, 16, (48, 48, 48), 3, 1, 1),
        ForwardWorkload("3d_k3s2_32_32", "float32", 1, 32, 64, (32, 32, 32), 3, 2, 1),
        ForwardWorkload("dil2_c3_64_64", "float32", 1, 64, 64, (64, 64), 3, 1, 2, dilation=2),
        ForwardWorkload("f64_c3_32_128", "float64", 1, 32, 32, (128, 128), 3, 1, 1),
        ForwardWorkload("f16_c3_64_56", "float16", 1, 64, 64, (56, 56), 3, 1, 1),
        ForwardWorkload("c5s1_32_128", "float32", 1, 32, 32, (128, 128), 5, 1, 2),
    ]
    return layers


def layers_of(kind):
    return transpose_layers() if kind == "transpose" else conv_layers()


def run_engine(kind, engine, threads, names):
    """Worker: time ``engine`` on the named layers in this process; print JSON
    {name: [min ms, median ms] or null}."""
    import gc

    import numpy as np

    if kind == "transpose":
        import engines as builders
        from workloads import make_inputs
    else:
        import forward as builders
        from forward_workloads import make_inputs
    by_name = {layer.name: layer for layer in layers_of(kind)}
    results = {}
    for name in names:
        layer = by_name[name]
        x, w = make_inputs(layer)
        try:
            call = builders.PREPARERS[engine](layer, x, w, threads)
            call()
            call()
        except Exception:  # noqa: BLE001 - an engine without this layer: n/a
            results[name] = None
            continue
        times = []
        start = time.perf_counter()
        gc.disable()
        while ((time.perf_counter() - start < SECONDS_PER_LAYER or len(times) < 5)
               and len(times) < 400):
            begin = time.perf_counter()
            call()  # the output is freed after the clock stops
            times.append(time.perf_counter() - begin)
        gc.enable()
        times = np.array(times) * 1e3
        results[name] = [float(times.min()), float(np.median(times))]
        del call
    print(json.dumps(results))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", choices=("transpose", "conv"), default="transpose")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", help="comma-separated substrings of layer names")
    parser.add_argument("--engines", default="convt,onnxruntime,torch")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        engine, names = args.worker[0], args.worker[2].split(",")
        run_engine(args.kind, engine, args.threads, names)
        return
    names = [layer.name for layer in layers_of(args.kind)]
    if args.only:
        names = [n for n in names if any(part in n for part in args.only.split(","))]
    engines = args.engines.split(",")
    if engines[0] != "convt":
        engines = ["convt"] + [e for e in engines if e != "convt"]
    best = {engine: {} for engine in engines}
    for order in (engines, engines[::-1]):
        for engine in order:
            time.sleep(1.0)  # let the previous process's threads go
            done = subprocess.run(
                [sys.executable, __file__, "--kind", args.kind, "--threads", str(args.threads),
                 "--worker", engine, "-", ",".join(names)],
                capture_output=True, text=True)
            try:
                timed = json.loads(done.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                print(f"{engine}: failed: {done.stderr[-300:]}")
                continue
            for name, value in timed.items():
                if value is not None:
                    old = best[engine].get(name)
                    best[engine][name] = value if old is None else [min(old[0], value[0]),
                                                                    min(old[1], value[1])]
    others = engines[1:]
    print(f"{args.kind}, {args.threads} thread(s); median ms (ratio: fastest other / convt)")
    print(f"{'layer':26s} {'convt':>9s} " + " ".join(f"{e:>12s}" for e in others)
          + "   ratio  (of minima)")
    logs = []
    for name in names:
        mine = best["convt"].get(name)
        theirs = {e: best[e].get(name) for e in others if best[e].get(name)}
        if mine is None or not theirs:
            continue
        fastest = min(theirs, key=lambda e: theirs[e][1])
        ratio = theirs[fastest][1] / mine[1]
        of_minima = min(v[0] for v in theirs.values()) / mine[0]
        logs.append(math.log(ratio))
        cells = " ".join(f"{best[e][name][1]:12.3f}" if name in best[e] else f"{'n/a':>12s}"
                         for e in others)
        print(f"{name:26s} {mine[1]:9.3f} {cells}   {ratio:5.2f}x ({of_minima:4.2f}x) "
              f"{fastest}{'  <<<' if ratio < MARK_BELOW else ''}")
    if logs:
        print(f"geometric mean of the ratio: {math.exp(sum(logs) / len(logs)):.2f}x "
              f"over {len(logs)} layers")


if __name__ == "__main__":
    main()
