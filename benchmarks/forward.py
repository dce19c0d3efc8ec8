"""Forward Conv: convt against PyTorch, onnxruntime and OpenVINO, side by side.

Usage:
    python benchmarks/forward.py [--threads N] [--repeat R] [--only a,b]
                                 [--engines convt,convt_bound,torch,onnxruntime,openvino]
                                 [--memory] [--out benchmarks/results]

Timed as benchmarks/run.py times ConvTranspose: every engine runs in a worker
process of its own (one per engine and thread count, kept across workloads),
on the same seeded inputs (benchmarks/forward_workloads.py); the driver times
the engines in turn, the order rotating every round, each timed call after
the workers' CPU use has settled (no pool left spinning) and after one
untimed priming call, R rounds (default 11), at N threads (default: the
cores this process may use) and, when N > 1, at 1 thread; the median is
reported.  The driver checks that every engine's output agrees with convt's,
writes <out>/forward-latest.md and .json and prints the tables.  With
--memory it also measures, in one fresh process per engine and layer, the
peak resident memory of one call on the 96^3 volumes of MEMORY_WORKLOADS
above inputs + output.

What is called (bias None everywhere):

* convt: ``convt.Conv(strides, pads, dilations, group, num_threads=N).apply(x, w,
  out=y)`` writing into a reused array;
* convt_bound: the same layer bound to w once (``layer.bind(w)``), then ``bound(x,
  out=y)``: shown beside convt, never counted as another engine;
* torch: ``torch.nn.functional.conv{1,2,3}d`` under ``torch.inference_mode()``,
  ``torch.set_num_threads(N)``;
* onnxruntime: a one-node ``Conv`` model (opset 22, or the highest it accepts),
  W an initializer, CPUExecutionProvider, ``intra_op_num_threads=N``;
* openvino: ``Convolution`` / ``GroupConvolution``, CPU plugin,
  ``INFERENCE_NUM_THREADS=N``, ``INFERENCE_PRECISION_HINT=f32``, one reused
  infer request.  OpenVINO computes float64 in float32: shown, but not counted
  as the fastest float64 engine.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engines as table_engines  # noqa: E402
from forward_workloads import MEMORY_WORKLOADS, SETS, by_name, make_inputs  # noqa: E402
from machine import cpu_description, cpu_line, usable_cores  # noqa: E402
from workers import TaskFailed, Worker, WorkerFailed, describe_failure  # noqa: E402

ENGINES = ("convt", "convt_bound", "torch", "onnxruntime", "openvino")
CONVT_OWN = ("convt", "convt_bound")   # convt's columns: never "the fastest other"
# (engine, dtype) pairs computed in a narrower type than asked for.
REDUCED_PRECISION = {("openvino", "float64"): "float32"}
PREFERRED_ONNX_OPSET = 22
SAMPLE_VALUES = 4096          # output values sent back to the parent for the agreement check
SUBPROCESS_TIMEOUT_SECONDS = 1200
MIB = 2**20


# --- engines: each returns the call to time ------------------------------------

def prepare_convt(workload, x, w, threads, reuse_output=True):
    """convt.Conv(...).apply(x, w), into a reused output array (or a new one)."""
    import convt

    layer = convt.Conv(**workload.convt_params(threads))
    if not reuse_output:
        return lambda: layer.apply(x, w)
    out = np.empty(layer.output_shape_for(x.shape, w.shape), dtype=x.dtype)
    return lambda: layer.apply(x, w, out=out)


def prepare_torch(workload, x, w, threads):
    """torch.nn.functional.conv{1,2,3}d with symmetric padding."""
    import torch

    torch.set_num_threads(threads)
    function = getattr(torch.nn.functional, f"conv{workload.ndim}d")
    x_tensor, w_tensor = torch.from_numpy(x), torch.from_numpy(w)

    def call():
        with torch.inference_mode():
            return function(x_tensor, w_tensor, stride=workload.stride, padding=workload.pad,
                            dilation=workload.dilation, groups=workload.group).numpy()

    return call


def onnx_conv_model(workload, w, opset):
    """A one-node ONNX model Y = Conv(X, W), W an initializer."""
    import onnx
    from onnx import helper, numpy_helper

    elem_type = helper.np_dtype_to_tensor_dtype(w.dtype)
    node = helper.make_node(
        "Conv", ["X", "W"], ["Y"], kernel_shape=workload.per_axis(workload.kernel),
        strides=workload.per_axis(workload.stride), pads=workload.per_axis(workload.pad) * 2,
        dilations=workload.per_axis(workload.dilation), group=workload.group)
    graph = helper.make_graph(
        [node], "conv", [helper.make_tensor_value_info("X", elem_type, workload.input_shape)],
        [helper.make_tensor_value_info("Y", elem_type, workload.output_shape)],
        initializer=[numpy_helper.from_array(w, "W")])
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = helper.find_min_ir_version_for(opsets)
    onnx.checker.check_model(model)
    return model


def onnxruntime_session(model, threads):
    """A CPU session with N intra-op threads and every graph optimization."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    return onnxruntime.InferenceSession(model.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"])


def prepare_onnxruntime(workload, x, w, threads):
    """A one-node Conv model at the highest opset (<= 22) onnxruntime accepts."""
    error = None
    for opset in range(PREFERRED_ONNX_OPSET, 10, -1):
        try:
            session = onnxruntime_session(onnx_conv_model(workload, w, opset), threads)
            break
        except Exception as exc:  # noqa: BLE001 - an older runtime: try a lower opset
            error = error or exc
    else:
        raise RuntimeError(f"onnxruntime accepts no Conv model for this workload: {error}")
    feeds = {"X": x}
    return lambda: session.run(["Y"], feeds)[0]


def prepare_openvino(workload, x, w, threads):
    """Convolution / GroupConvolution compiled for CPU at f32 precision."""
    import openvino
    import openvino.properties as properties
    import openvino.properties.hint as hints
    from openvino import opset13 as ops

    data = ops.parameter(list(workload.input_shape), x.dtype, name="X")
    attributes = dict(strides=workload.per_axis(workload.stride),
                      pads_begin=workload.per_axis(workload.pad),
                      pads_end=workload.per_axis(workload.pad),
                      dilations=workload.per_axis(workload.dilation))
    if workload.group == 1:
        output = ops.convolution(data, ops.constant(w), **attributes)
    else:
        grouped = w.reshape(workload.group, workload.c_out // workload.group, *w.shape[1:])
        output = ops.group_convolution(data, ops.constant(grouped), **attributes)
    config = {properties.inference_num_threads: threads,
              hints.inference_precision: openvino.Type.f32}
    compiled = openvino.Core().compile_model(openvino.Model([output], [data], "conv"), "CPU",
                                             config)
    request = compiled.create_infer_request()
    return lambda: request.infer({0: x}, share_inputs=True, share_outputs=True)[0]


def prepare_convt_bound(workload, x, w, threads):
    """convt.Conv(...).bind(w), then bound(x, out=y) into a reused output array."""
    import convt

    bound = convt.Conv(**workload.convt_params(threads)).bind(w)
    out = np.empty(bound.output_shape_for(x.shape), dtype=x.dtype)
    return lambda: bound(x, out=out)


PREPARERS = {"convt": prepare_convt, "convt_bound": prepare_convt_bound, "torch": prepare_torch,
             "onnxruntime": prepare_onnxruntime, "openvino": prepare_openvino}


def engine_version(engine):
    """The engine's version string, or None."""
    try:
        module = __import__(engine)
        return str(getattr(module, "__version__", None) or module.get_version())
    except Exception:  # noqa: BLE001
        return None


# --- worker tasks: one engine, in its own process (benchmarks/workers.py) ----------

def prepare_task(engine, name, threads):
    """Build ``engine`` for the workload ``name``, make one call, keep the call ready
    for ``time_calls``; return the output's shape and a sample of its values."""
    table_engines.release()
    workload = by_name(name)[0]
    x, w = make_inputs(workload)
    call = PREPARERS[engine](workload, x, w, threads)
    result = np.asarray(call())
    table_engines.Prepared.call = call
    return {"shape": list(result.shape),
            "sample": result.ravel()[:SAMPLE_VALUES].astype(np.float64).tolist()}


TASKS = {"prepare": prepare_task, "time_calls": table_engines.time_calls,
         "release": table_engines.release}


def status_bytes(field):
    """A memory field of /proc/self/status (VmRSS, VmHWM), in bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def peak_during(call):
    """(peak resident bytes seen while ``call()`` runs, its result); sampled every ms."""
    peak, stop = [status_bytes("VmRSS")], threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], status_bytes("VmRSS"))
            time.sleep(0.001)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        result = call()
    finally:
        stop.set()
        sampler.join()
    return max(peak[0], status_bytes("VmRSS")), result


def memory_workload(engine, workload, threads):
    """Peak resident memory of one call above inputs + output (everything built first)."""
    record = {"workload": workload.name, "engine": engine}
    try:
        x, w = make_inputs(workload)
        if engine == "convt":
            call = prepare_convt(workload, x, w, threads, reuse_output=False)
            # convt imports its engine modules on a first call, as the other engines do
            # when their sessions are built: a tiny unrelated call first, so the peak is
            # the measured call's own (with bytecode cached, those imports held 2-3 MiB)
            import convt

            convt.Conv(num_threads=1).apply(np.ones((1, 1, 2, 2, 2), x.dtype),
                                            np.ones((1, 1, 1, 1, 1), x.dtype))
        else:
            call = PREPARERS[engine](workload, x, w, threads)
        gc.collect()
        before = status_bytes("VmRSS")
        peak, result = peak_during(call)
        output = np.asarray(result).nbytes
        record.update(before=before, peak=peak, output=output, excess=peak - before - output)
    except Exception as exc:  # noqa: BLE001
        record["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    return record


def memory_worker(arguments):
    """Measure one engine's memory on one layer and print its JSON record."""
    workload = by_name(arguments.memory_workload, MEMORY_WORKLOADS)[0]
    print(json.dumps(memory_workload(arguments.worker, workload, arguments.threads)))


# --- parent: engines in turn, then the report ----------------------------------------

def run_process(engine, extra, threads):
    """Records printed by a fresh process for ``engine`` (the memory measurements)."""
    command = [sys.executable, __file__, "--worker", engine, "--threads", str(threads), *extra]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    done = subprocess.run(command, capture_output=True, text=True, env=env,
                          timeout=SUBPROCESS_TIMEOUT_SECONDS)
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 and not records:
        message = (done.stderr.strip().splitlines() or ["failed"])[-1][:200]
        return [{"engine": engine, "error": message}]
    return records


def time_workload_in_turn(workload, workers, repeat):
    """One record per engine: its times (s) and output sample, or its error."""
    records, ready = {}, {}
    for engine, worker in workers.items():
        records[engine] = {"workload": workload.name, "engine": engine}
        try:
            records[engine].update(worker.call("prepare", engine, workload.name, worker.threads))
            ready[engine] = worker
        except (TaskFailed, WorkerFailed) as exc:
            records[engine]["error"] = describe_failure(exc, 200)

    def pids():
        return [worker.pid for worker in workers.values() if worker.pid is not None]

    for engine, timing in table_engines.time_in_turn(ready, repeat, pids).items():
        if "unavailable" in timing:
            records[engine]["error"] = timing["unavailable"]
        else:
            records[engine]["times"] = [ms / 1e3 for ms in timing["times_ms"]]
    for worker in ready.values():
        try:
            worker.call("release")
        except (TaskFailed, WorkerFailed):
            pass  # a dead worker holds nothing
    return list(records.values())


def time_all(engines, workloads, threads, repeat):
    """Records of every engine on every workload at ``threads`` threads."""
    workers = {engine: Worker(f"{engine}@{threads}", "forward", threads) for engine in engines}
    records = []
    try:
        for workload in workloads:
            records += time_workload_in_turn(workload, workers, repeat)
            line = ", ".join(f"{r['engine']} {statistics.median(r['times']) * 1e3:.3g} ms"
                             if "times" in r else f"{r['engine']} n/a"
                             for r in records[-len(engines):])
            print(f"{workload.name:22s} t{threads} {line}", file=sys.stderr, flush=True)
    finally:
        for worker in workers.values():
            worker.stop()
    return records


def agreement(records):
    """Largest |engine - convt| / max|convt| over the sampled outputs, per record."""
    reference = {r["workload"]: np.array(r["sample"]) for r in records
                 if r["engine"] == "convt" and "sample" in r}
    for record in records:
        base = reference.get(record.get("workload"))
        if base is None or "sample" not in record:
            continue
        sample = np.array(record["sample"])
        record["relative_difference"] = (float(np.abs(sample - base).max() / np.abs(base).max())
                                         if sample.shape == base.shape else float("inf"))


def counts_as_fastest(engine, dtype):
    return (engine, dtype) not in REDUCED_PRECISION


def table(records, workloads, engines):
    """Markdown table of median times and convt's speed-up, and the geometric mean."""
    by_key = {(r["workload"], r["engine"]): r for r in records if "workload" in r}
    others = [e for e in engines if e != "convt"]
    lines = ["| workload | shape | dtype | GFLOP | convt ms | convt GFLOP/s | "
             + " | ".join(f"{e} ms" for e in others) + " | fastest other | speed-up |",
             "|---" * (8 + len(others)) + "|"]
    ratios = []
    for workload in workloads:
        medians = {}
        for engine in engines:
            record = by_key.get((workload.name, engine), {})
            if "times" in record:
                medians[engine] = statistics.median(record["times"])
        cells = []
        for engine in others:
            if engine in medians:
                mark = "" if counts_as_fastest(engine, workload.dtype) else " (f32)"
                cells.append(f"{medians[engine] * 1e3:.3g}{mark}")
            else:
                cells.append("n/a")
        rivals = {e: t for e, t in medians.items()
                  if e not in CONVT_OWN and counts_as_fastest(e, workload.dtype)}
        fastest = min(rivals, key=rivals.get) if rivals else None
        convt_ms = f"{medians['convt'] * 1e3:.3g}" if "convt" in medians else "n/a"
        rate = (f"{workload.flops / medians['convt'] / 1e9:.0f}" if "convt" in medians else "n/a")
        if fastest and "convt" in medians:
            ratio = rivals[fastest] / medians["convt"]
            ratios.append(ratio)
            speed = f"{ratio:.2f}x"
        else:
            speed = "n/a"
        shape = (f"{workload.batch}x{workload.c_in}->{workload.c_out}, "
                 f"{'x'.join(map(str, workload.spatial))}, k{workload.kernel}s{workload.stride}"
                 + (f" g{workload.group}" if workload.group > 1 else ""))
        lines.append(f"| {workload.name} | {shape} | {workload.dtype} | "
                     f"{workload.flops / 1e9:.2f} | {convt_ms} | {rate} | "
                     + " | ".join(cells) + f" | {fastest or 'n/a'} | {speed} |")
    mean = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None
    return "\n".join(lines), mean


def memory_table(records):
    lines = ["| layer | engine | peak above inputs + output |", "|---|---|---|"]
    for record in records:
        value = (f"{record['excess'] / MIB:+.0f} MiB (output {record['output'] / MIB:.0f} MiB)"
                 if "excess" in record else f"n/a ({record.get('error', '?')})")
        lines.append(f"| {record.get('workload', '?')} | {record['engine']} | {value} |")
    return "\n".join(lines)


def report(runs, memory, workloads, engines):
    """The markdown report of a run: ``runs`` maps a thread count to its records."""
    versions = ", ".join(f"{e} {engine_version(e)}" for e in engines if e != "convt_bound")
    counts = sorted(runs, reverse=True)
    parts = [
        f"# Forward Conv, {datetime.date.today()}, {' and '.join(map(str, counts))} thread(s)",
        f"CPU: {cpu_line(cpu_description())}; {os.uname().machine}, {os.cpu_count()} CPUs "
        f"visible; {versions}; convt source at `{table_engines.convt_revision()}`. Each engine in its "
        f"own worker process, timed in turn (the order rotating every round) after the workers "
        f"went idle and one priming call; medians of the timed calls; (f32): computed in "
        f"float32, not counted as the fastest float64 engine.",
    ]
    for threads in counts:
        records = runs[threads]
        timed, mean = table(records, workloads, engines)
        agreements = [r.get("relative_difference") for r in records
                      if r.get("relative_difference") is not None and r["engine"] != "convt"]
        parts += [
            f"## {threads} thread(s)", timed,
            (f"Geometric mean of convt's speed-up vs the fastest other engine at {threads} "
             f"thread(s): **{mean:.2f}x**" if mean else "No speed-up could be computed."),
            (f"Largest relative difference of a sampled output from convt's: "
             f"{max(agreements):.1e}." if agreements else ""),
        ]
        failures = [f"- {r['engine']} on {r.get('workload', 'every workload')}: {r['error']}"
                    for r in records if "error" in r]
        if failures:
            parts.append("Not measured:\n" + "\n".join(failures))
    if memory:
        parts.append("## Memory\n\nPeak resident memory of one call above inputs + output, "
                     "one fresh process per engine and layer:\n\n" + memory_table(memory))
    return "\n\n".join(p for p in parts if p) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=usable_cores(),
                        help="threads for every engine (default: the cores this process may "
                             "use); every engine is also timed at 1 thread")
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--set", choices=sorted(SETS), default="table",
                        help="which workloads: the table (default), the extended set, or all")
    parser.add_argument("--only", help="comma-separated workload names (overrides --set)")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--memory", action="store_true", help="also measure peak memory")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--memory-workload", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.worker:
        memory_worker(arguments)
        return
    engines = [e for e in arguments.engines.split(",") if e]
    workloads = by_name(arguments.only) if arguments.only else SETS[arguments.set]
    counts = [arguments.threads] + ([1] if arguments.threads > 1 else [])
    runs = {}
    for threads in counts:
        runs[threads] = time_all(engines, workloads, threads, arguments.repeat)
        agreement(runs[threads])
    memory = []
    if arguments.memory:
        for workload in MEMORY_WORKLOADS:
            for engine in engines:
                if engine == "convt_bound":  # its first call packs: memory is convt's
                    continue
                print(f"memory {engine} {workload.name} ...", file=sys.stderr, flush=True)
                memory += run_process(engine, ["--memory-workload", workload.name],
                                      arguments.threads)
    text = report(runs, memory, workloads, engines)
    out = Path(arguments.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "forward-latest" if arguments.set == "table" else f"forward-{arguments.set}-latest"
    (out / f"{stem}.md").write_text(text)
    kept = {str(threads): [{k: v for k, v in r.items() if k != "sample"} for r in records]
            for threads, records in runs.items()}
    (out / f"{stem}.json").write_text(json.dumps(
        {"threads": counts, "records": kept, "memory": memory}, indent=1))
    print(text)


if __name__ == "__main__":
    main()
