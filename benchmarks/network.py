"""A whole network's convolutions in turn: ResNet-50's 53 Conv layers (batch 1, 224x224,
float32, 90 MiB of weights), each applied once per pass, as a user running the network
layer by layer does.

The per-layer tables time one layer called again and again, with its weights and
operands warm in the caches.  A network pass is different: 53 layers of weights (more
than the last-level cache) come round once per pass, so whatever an engine does with a
layer's weights on each call (convt compares them with the copy its packing came from,
unless the layer is bound) is paid from memory, and a cache of packed weights smaller
than the network thrashes unless it is built for that.

Engines, each in its own process, in turn, with idle gaps:
- convt: ``Conv(...).apply(x, w)`` per layer (the weights passed on every call);
- convt_bound: ``Conv(...).bind(w)`` once per layer, then ``bound(x)``;
- onnxruntime: one session whose graph holds the 53 Conv nodes side by side (one
  thread pool for all, weights as initializers: prepacked once);
- torch: ``torch.nn.functional.conv2d`` per layer under ``torch.no_grad()``.

Usage:
    python benchmarks/network.py [--passes P] [--threads N] [--out benchmarks/results]

Writes <out>/network-latest.md and <out>/network-latest.json: the median pass over
``--passes`` passes after two warm-up passes, and the first pass, at N threads and 1.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from engines import convt_revision, distribution_version
from machine import cpu_description, cpu_line, usable_cores

ENGINES = ("convt", "convt_bound", "onnxruntime", "torch")
SUBPROCESS_TIMEOUT_SECONDS = 900


def resnet50_layers():
    """(x shape, w shape, stride, pad) of ResNet-50's Conv layers in the order they run
    (v1.5: the stride on each stage's first 3x3; the projection shortcut last)."""
    layers = [((1, 3, 224, 224), (64, 3, 7, 7), 2, 3)]
    size, channels = 56, 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for block in range(blocks):
            step = stride if block == 0 else 1
            layers.append(((1, channels, size, size), (width, channels, 1, 1), 1, 0))
            layers.append(((1, width, size, size), (width, width, 3, 3), step, 1))
            inner = size // step
            layers.append(((1, width, inner, inner), (4 * width, width, 1, 1), 1, 0))
            if block == 0:
                layers.append(((1, channels, size, size), (4 * width, channels, 1, 1), step, 0))
            channels, size = 4 * width, inner
    return layers


def operands(seed=0):
    """x and w of every layer, standard normal, w scaled by 1/sqrt(fan-in)."""
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(x_shape, dtype=np.float32),
             (rng.standard_normal(w_shape, dtype=np.float32)
              / np.sqrt(np.prod(w_shape[1:]))).astype(np.float32))
            for x_shape, w_shape, _, _ in resnet50_layers()]


def convt_pass(threads, bound):
    import convt

    calls = []
    for (x, w), (_, _, stride, pad) in zip(operands(), resnet50_layers()):
        layer = convt.Conv(strides=(stride, stride), pads=(pad,) * 4, num_threads=threads)
        if bound:
            call = layer.bind(w)
            calls.append(lambda call=call, x=x: call(x))
        else:
            calls.append(lambda layer=layer, x=x, w=w: layer.apply(x, w))
    return calls


def onnxruntime_pass(threads):
    import onnx
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    nodes, inputs, outputs, weights, feeds = [], [], [], [], {}
    for index, ((x, w), (_, _, stride, pad)) in enumerate(zip(operands(), resnet50_layers())):
        nodes.append(helper.make_node("Conv", [f"x{index}", f"w{index}"], [f"y{index}"],
                                      strides=[stride, stride], pads=[pad] * 4,
                                      kernel_shape=list(w.shape[2:])))
        inputs.append(helper.make_tensor_value_info(f"x{index}", TensorProto.FLOAT, x.shape))
        outputs.append(helper.make_tensor_value_info(f"y{index}", TensorProto.FLOAT, None))
        weights.append(numpy_helper.from_array(w, f"w{index}"))
        feeds[f"x{index}"] = x
    graph = helper.make_graph(nodes, "resnet50_convs", inputs, outputs, initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    return [lambda: session.run(None, feeds)]


def torch_pass(threads):
    import torch

    torch.set_num_threads(threads)
    calls = []
    for (x, w), (_, _, stride, pad) in zip(operands(), resnet50_layers()):
        tx, tw = torch.from_numpy(x), torch.from_numpy(w)

        def call(tx=tx, tw=tw, stride=stride, pad=pad):
            with torch.no_grad():
                return torch.nn.functional.conv2d(tx, tw, stride=stride, padding=pad)
        calls.append(call)
    return calls


def worker(engine, threads, passes):
    """Time ``passes`` passes (after the first and one more) in this process; print JSON."""
    build = {"convt": lambda: convt_pass(threads, False),
             "convt_bound": lambda: convt_pass(threads, True),
             "onnxruntime": lambda: onnxruntime_pass(threads),
             "torch": lambda: torch_pass(threads)}[engine]
    calls = build()
    times = []
    for _ in range(passes + 2):
        start = time.perf_counter()
        for call in calls:
            call()
        times.append(time.perf_counter() - start)
    print(json.dumps({"engine": engine, "threads": threads, "first_ms": times[0] * 1e3,
                      "median_ms": statistics.median(times[2:]) * 1e3,
                      "passes_ms": [t * 1e3 for t in times]}))


def run_engine(engine, threads, passes):
    command = [sys.executable, __file__, "--worker", engine, "--threads", str(threads),
               "--passes", str(passes)]
    done = subprocess.run(command, capture_output=True, text=True,
                          timeout=SUBPROCESS_TIMEOUT_SECONDS)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        message = (done.stderr.strip().splitlines() or ["failed"])[-1][:200]
        return {"engine": engine, "threads": threads, "error": message}
    return json.loads(lines[-1])


def report(records, cpu, threads_list):
    lines = [f"# A network's convolutions in turn: ResNet-50, {datetime.date.today()}", "",
             f"CPU: {cpu_line(cpu)}; convt source at `{convt_revision()}`, onnxruntime "
             f"{distribution_version('onnxruntime')}, torch {distribution_version('torch')}. "
             f"53 Conv layers (batch 1, 224x224, float32, 90 MiB of weights), each once per "
             "pass; each engine in its own process, in turn; median pass after two warm-up "
             "passes, and the first pass (plans, packing).", ""]
    for threads in threads_list:
        rows = [r for r in records if r["threads"] == threads]
        # other engines only: convt's bound layers are convt, as in the other reports
        ok = [r for r in rows if "median_ms" in r and not r["engine"].startswith("convt")]
        fastest = min(ok, key=lambda r: r["median_ms"]) if ok else None
        lines += [f"## {threads} thread(s)", "",
                  "| engine | pass ms (median) | first pass ms | convt apply's speed-up |",
                  "|---|---|---|---|"]
        base = next((r for r in rows if r["engine"] == "convt" and "median_ms" in r), None)
        for r in rows:
            if "error" in r:
                lines.append(f"| {r['engine']} | n/a ({r['error']}) | | |")
                continue
            ratio = f"{r['median_ms'] / base['median_ms']:.2f}x" if base else ""
            lines.append(f"| {r['engine']} | {r['median_ms']:.1f} | {r['first_ms']:.1f} | "
                         f"{ratio} |")
        if fastest and base:
            lines += ["", f"convt (apply) against the fastest other engine ({fastest['engine']}): "
                      f"**{fastest['median_ms'] / base['median_ms']:.2f}x**"]
        lines.append("")
    return "\n".join(lines)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passes", type=int, default=9, help="timed passes (default: 9)")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for every engine (default: the usable cores); also 1")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    arguments = parse_args(argv)
    if arguments.worker:
        worker(arguments.worker, arguments.threads, arguments.passes)
        return
    threads = arguments.threads or usable_cores()
    threads_list = sorted({threads, 1}, reverse=True)
    records = []
    for count in threads_list:
        for engine in arguments.engines.split(","):
            time.sleep(1.0)  # idle gap: no other engine's threads left spinning
            record = run_engine(engine, count, arguments.passes)
            records.append(record)
            print(f"{engine:12s} t{count} "
                  + (f"{record['median_ms']:.1f} ms a pass" if "median_ms" in record
                     else record["error"]), file=sys.stderr, flush=True)
    cpu = cpu_description()
    text = report(records, cpu, threads_list)
    out = Path(arguments.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "network-latest.md").write_text(text + "\n")
    (out / "network-latest.json").write_text(json.dumps({"cpu": cpu, "records": records},
                                                        indent=1) + "\n")
    print(text)


if __name__ == "__main__":
    main()
