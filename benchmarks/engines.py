"""The engines under comparison, and the tasks a worker process runs for them.

Driver side: ENGINE_NAMES, labels, precision notes, and `prepare_in` and
`time_in_turn`, which drive worker processes. Worker side (the
TASKS at the bottom, run by workers.serve in a process of its own per engine
and thread count): `prepare` does all the one-off work (imports, thread
settings, model building, compilation, tensor conversion), makes one call and
checks its output against the float64 reference; `time_calls` times the
prepared call with perf_counter, the garbage collector paused.

Every engine returns a FRESH output array on every call, as a user gets it:
convt's `apply(x, w)`, torch's new tensor, onnxruntime's `run`, and OpenVINO
writing into a new NumPy array set as its request's output tensor. The one
exception is `convt_out`, convt writing into a reused `out=` array, reported
as a column of its own. Bias is None everywhere.

Weights are given to onnxruntime and OpenVINO as model constants, the way
those engines are deployed, so they may pre-pack them at build time outside
the timing; convt and torch receive the weight on every call.  `convt_bound`
is convt given its weights once too (`layer.bind(w)`, then `bound(x)` per call,
a fresh output each), reported as a column of its own; the ratios stay those of
`convt`'s `apply(x, w)`.
"""

from __future__ import annotations

import functools
import gc
import importlib
import importlib.metadata
import importlib.util
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

from machine import wait_until_idle
from workers import TaskFailed, Unavailable, Worker, WorkerFailed, describe_failure
from workloads import Workload, make_inputs, reference_output, torch_conv_transpose

ENGINE_NAMES: tuple[str, ...] = ("convt", "convt_out", "convt_bound", "torch", "onnxruntime",
                                 "openvino")
ENGINE_LABELS: dict[str, str] = {
    "convt": "convt",
    "convt_out": "convt out=",
    "convt_bound": "convt bound",
    "torch": "PyTorch",
    "onnxruntime": "onnxruntime",
    "openvino": "OpenVINO",
}
CONVT_ENGINES: tuple[str, ...] = ("convt", "convt_out", "convt_bound")  # never the "fastest other"
OTHER_ENGINES: tuple[str, ...] = tuple(name for name in ENGINE_NAMES if name not in CONVT_ENGINES)
# Engines that compute some storage dtypes in a lower precision. They are
# timed and shown, but not counted as the "fastest other" engine for that
# dtype: a float32 result is not a float64 result.
REDUCED_PRECISION = {("openvino", "float64"): "float32"}


def computes_in_full_precision(engine: str, dtype: str) -> bool:
    """Whether `engine` computes `dtype` workloads in (at least) that precision."""
    return (engine, dtype) not in REDUCED_PRECISION


# The ONNX opset the ConvTranspose model is built with, if onnxruntime accepts it.
PREFERRED_ONNX_OPSET = 22

Call = Callable[[], np.ndarray]


class EngineUnavailable(Unavailable):
    """The engine cannot run here (not installed, or unsupported workload)."""


def import_engine(module_name: str):
    """Import an optional engine module, or raise EngineUnavailable."""
    try:
        return importlib.import_module(module_name)
    except Exception as exc:  # a half-built extension can raise anything
        raise EngineUnavailable(f"import {module_name} failed: {exc}") from exc


def distribution_version(name: str) -> str | None:
    """Installed version of a Python distribution, without importing it; None if absent."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def convt_revision() -> str | None:
    """The git commit of the source tree the installed convt is imported from (found without
    importing it), with '+modified' if files of the package differ from it; None outside git."""
    spec = importlib.util.find_spec("convt")
    if spec is None or spec.origin is None:
        return None
    package = Path(spec.origin).parent
    commit, changes = (
        git_output(package, "rev-parse", "--short", "HEAD"),
        git_output(package, "status", "--porcelain", "--", "."),
    )
    if not commit:
        return None
    return commit + ("+modified" if changes else "")


def git_output(directory: Path, *arguments: str) -> str:
    """stdout of `git <arguments>` run in `directory` ('' if git fails)."""
    try:
        done = subprocess.run(["git", *arguments], capture_output=True, text=True, cwd=directory, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def prepare_in(
    worker: Worker, engine: str, workload: Workload, threads: int | None, reference_path: str | None = None
) -> dict:
    """Have `worker` prepare `engine` for `workload` (the `prepare` task below): the errors of its
    first call against the reference, or {"unavailable": reason}."""
    try:
        return worker.call("prepare", engine, workload, threads, reference_path)
    except (TaskFailed, WorkerFailed) as exc:
        return {"unavailable": describe_failure(exc)}


def time_in_turn(
    workers: dict[str, Worker], repeat: int, watched: Callable[[], list[int]]
) -> dict[str, dict]:
    """Time the prepared call of every worker `repeat` times, one call each per round.

    The order rotates every round, so that no worker always follows the same
    one. Before each timed call the driver waits until the processes
    `watched()` use no CPU (no pool left spinning), then the worker makes one
    untimed priming call and one timed call. Returns, per key of `workers`,
    {"times_ms": [...], "median_ms": m}, or {"unavailable": reason} if it
    failed mid-way.
    """
    times_ms: dict[str, list[float]] = {key: [] for key in workers}
    failures: dict[str, str] = {}
    keys = list(workers)
    for round_index in range(repeat):
        shift = round_index % len(keys)
        for key in keys[shift:] + keys[:shift]:
            if key in failures:
                continue
            wait_until_idle(watched())
            try:
                times_ms[key] += workers[key].call("time_calls", 1, 0.0, True)
            except (TaskFailed, WorkerFailed) as exc:
                failures[key] = describe_failure(exc)
    return {
        key: {"unavailable": failures[key]}
        if key in failures
        else {"times_ms": times_ms[key], "median_ms": statistics.median(times_ms[key])}
        for key in workers
    }


# ---------------------------------------------------------------------------
# Worker side: building each engine's call. `threads=None` means the engine's
# own default thread count.


def convt_operator(workload: Workload, threads: int | None):
    """convt.ConvTranspose with the workload's attributes."""
    convt = import_engine("convt")
    return convt.ConvTranspose(
        strides=workload.stride,
        pads=workload.onnx_pads,
        dilations=workload.dilation,
        group=workload.group,
        output_padding=workload.output_padding,
        num_threads=threads,
    )


def prepare_convt(workload: Workload, x: np.ndarray, w: np.ndarray, threads: int | None) -> Call:
    """convt.ConvTranspose(...).apply(x, w, None), returning a new array each call."""
    operator = convt_operator(workload, threads)
    return lambda: operator.apply(x, w, None)


def prepare_convt_out(workload: Workload, x: np.ndarray, w: np.ndarray, threads: int | None) -> Call:
    """convt.ConvTranspose(...).apply(x, w, None, out=y) into a reused output array."""
    operator = convt_operator(workload, threads)
    out = np.empty(operator.output_shape_for(x.shape, w.shape), dtype=x.dtype)
    return lambda: operator.apply(x, w, None, out=out)


def prepare_convt_bound(workload: Workload, x: np.ndarray, w: np.ndarray,
                        threads: int | None) -> Call:
    """convt.ConvTranspose(...).bind(w)(x), the weights bound once, a new array each call."""
    bound = convt_operator(workload, threads).bind(w)
    return lambda: bound(x)


def prepare_torch(workload: Workload, x: np.ndarray, w: np.ndarray, threads: int | None) -> Call:
    """torch.nn.functional.conv_transpose{1,2,3}d under no_grad, a new tensor each call."""
    torch = import_engine("torch")
    if threads is not None:
        torch.set_num_threads(threads)
    x_tensor, w_tensor = torch.from_numpy(x), torch.from_numpy(w)

    def call() -> np.ndarray:
        with torch.no_grad():
            return torch_conv_transpose(workload, x_tensor, w_tensor).numpy()

    return call


def onnx_conv_transpose_model(workload: Workload, w: np.ndarray, opset: int):
    """A one-node ONNX model Y = ConvTranspose(X, W) with W as an initializer."""
    import onnx
    from onnx import helper, numpy_helper

    elem_type = helper.np_dtype_to_tensor_dtype(w.dtype)
    node = helper.make_node(
        "ConvTranspose",
        ["X", "W"],
        ["Y"],
        kernel_shape=list(workload.kernel),
        strides=list(workload.stride),
        pads=workload.onnx_pads,
        dilations=list(workload.dilation),
        group=workload.group,
        output_padding=list(workload.output_padding),
    )
    graph = helper.make_graph(
        [node],
        "conv_transpose",
        [helper.make_tensor_value_info("X", elem_type, workload.input_shape)],
        [helper.make_tensor_value_info("Y", elem_type, workload.output_shape)],
        initializer=[numpy_helper.from_array(w, "W")],
    )
    opset_imports = [helper.make_opsetid("", opset)]
    model = helper.make_model(graph, opset_imports=opset_imports)
    # onnx stamps its newest IR version, which an older onnxruntime rejects.
    model.ir_version = helper.find_min_ir_version_for(opset_imports)
    onnx.checker.check_model(model)
    return model


def onnxruntime_session(model_bytes: bytes, threads: int | None):
    """An onnxruntime CPU session with N intra-op threads (0: its default) and full optimization."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads or 0
    options.inter_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    return onnxruntime.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])


@functools.cache
def onnxruntime_opset() -> int:
    """PREFERRED_ONNX_OPSET if onnxruntime accepts it, else the highest it accepts."""
    probe = Workload("opset_probe", "float32", 1, 1, 1, (2, 2), 2, 2, 0)
    weight = np.ones(probe.weight_shape, dtype=np.float32)
    first_error = None
    for opset in range(PREFERRED_ONNX_OPSET, 10, -1):
        model = onnx_conv_transpose_model(probe, weight, opset)
        try:
            onnxruntime_session(model.SerializeToString(), threads=1)
            return opset
        except Exception as exc:
            first_error = first_error or exc
    raise EngineUnavailable(
        f"onnxruntime accepts no ConvTranspose opset from 11 to {PREFERRED_ONNX_OPSET}: {first_error}"
    )


def prepare_onnxruntime(workload: Workload, x: np.ndarray, w: np.ndarray, threads: int | None) -> Call:
    """One-node ConvTranspose model in an onnxruntime CPUExecutionProvider session;
    `run` returns a new array each call."""
    import_engine("onnxruntime")
    import_engine("onnx")
    model = onnx_conv_transpose_model(workload, w, onnxruntime_opset())
    session = onnxruntime_session(model.SerializeToString(), threads)
    feeds = {"X": x}
    return lambda: session.run(["Y"], feeds)[0]


def newest_openvino_opset():
    """The newest openvino.opsetK module that has the ConvTranspose ops.

    Recent opset modules only hold the operations new in that opset, so the
    newest module is not always a complete one.
    """
    needed = ("parameter", "constant", "convolution_backprop_data", "group_convolution_backprop_data")
    for version in range(40, 0, -1):
        try:
            module = importlib.import_module(f"openvino.opset{version}")
        except ImportError:
            continue
        if all(hasattr(module, name) for name in needed):
            return module
    raise EngineUnavailable("no openvino.opsetK module has convolution_backprop_data")


def openvino_model(workload: Workload, w: np.ndarray):
    """An OpenVINO model: (Group)ConvolutionBackpropData on a parameter and constant weights."""
    import openvino

    ops = newest_openvino_opset()
    data = ops.parameter(list(workload.input_shape), w.dtype, name="X")
    attributes = dict(
        strides=list(workload.stride),
        pads_begin=list(workload.pad),
        pads_end=list(workload.pad),
        dilations=list(workload.dilation),
        output_padding=list(workload.output_padding),
    )
    if workload.group == 1:
        output = ops.convolution_backprop_data(data, ops.constant(w), **attributes)
    else:
        group_shape = (workload.group, workload.c_in // workload.group, *w.shape[1:])
        weights = ops.constant(w.reshape(group_shape))
        output = ops.group_convolution_backprop_data(data, weights, **attributes)
    return openvino.Model([output], [data], "conv_transpose")


def prepare_openvino(workload: Workload, x: np.ndarray, w: np.ndarray, threads: int | None) -> Call:
    """OpenVINO CPU plugin, N inference threads, f32 inference precision.

    The input is shared with NumPy (no copy). Every call allocates a new
    NumPy output array and sets it as the request's output tensor, so
    OpenVINO writes its result into fresh memory the caller owns, as convt's
    `apply(x, w)` does.
    """
    openvino = import_engine("openvino")
    import openvino.properties as properties
    import openvino.properties.hint as hints

    config = {hints.inference_precision: openvino.Type.f32}
    if threads is not None:
        config[properties.inference_num_threads] = threads
    compiled = openvino.Core().compile_model(openvino_model(workload, w), "CPU", config)
    request = compiled.create_infer_request()

    def call() -> np.ndarray:
        out = np.empty(workload.output_shape, dtype=x.dtype)
        # The request keeps only a raw pointer to `out` once the Python Tensor is gone; it is
        # replaced here before every inference, so freed memory is never written.
        request.set_output_tensor(openvino.Tensor(out, shared_memory=True))
        request.infer({0: x}, share_inputs=True, share_outputs=True)
        return out

    return call


PREPARERS: dict[str, Callable[[Workload, np.ndarray, np.ndarray, int | None], Call]] = {
    "convt": prepare_convt,
    "convt_out": prepare_convt_out,
    "convt_bound": prepare_convt_bound,
    "torch": prepare_torch,
    "onnxruntime": prepare_onnxruntime,
    "openvino": prepare_openvino,
}


def output_errors(output: np.ndarray, reference: np.ndarray | None) -> dict:
    """Max abs error and max abs error relative to max |reference|."""
    if reference is None:
        return {"max_abs_err": None, "max_rel_err": None}
    if output.shape != reference.shape:
        raise ValueError(f"wrong output shape {output.shape}, expected {reference.shape}")
    max_abs_err = float(np.max(np.abs(output.astype(np.float64) - reference)))
    return {"max_abs_err": max_abs_err, "max_rel_err": max_abs_err / float(np.max(np.abs(reference)))}


def time_one_call(call: Call) -> float:
    """Wall time of one call in ms, with the garbage collector paused.

    The output is released after the clock stops: its deallocation is not timed.
    """
    gc.disable()
    try:
        start = time.perf_counter()
        output = call()
        elapsed = time.perf_counter() - start
        del output
        return elapsed * 1e3
    finally:
        gc.enable()


class Prepared:
    """The one call this worker process has ready to time (None before `prepare`)."""

    call: Call | None = None


def prepare(engine: str, workload: Workload, threads: int | None, reference_path: str | None) -> dict:
    """Worker task: build `engine` for `workload`, make one call, return its errors.

    `reference_path` is a .npy file of the float64 reference, or None if
    there is none. The call stays ready for `time_calls`.
    """
    release()
    x, w = make_inputs(workload)
    call = PREPARERS[engine](workload, x, w, threads)
    count_convt_threads()
    reference = np.load(reference_path, mmap_mode="r") if reference_path else None
    errors = output_errors(call(), reference)
    Prepared.call = call
    return errors


def time_calls(count: int, pause_seconds: float = 0.0, prime: bool = True) -> list[float]:
    """Worker task: time the prepared call `count` times, in ms.

    Before each timed call: sleep `pause_seconds` if positive, then, if
    `prime`, make one untimed call so that the engine's threads, caches and
    the VM's idle vCPUs are awake (the call is then timed hot, as in a loop).
    """
    if Prepared.call is None:
        raise RuntimeError("time_calls before prepare")
    times_ms = []
    for _ in range(count):
        if pause_seconds > 0:
            time.sleep(pause_seconds)
        if prime:
            Prepared.call()
        times_ms.append(time_one_call(Prepared.call))
    return times_ms


def release() -> None:
    """Worker task: drop the prepared call and its arrays."""
    Prepared.call = None
    gc.collect()


class ThreadCounts:
    """How many threads convt's calls in this worker resolved to, since the last
    `thread_counts` task: {threads: calls}.  A call resolves its default thread
    count at run time (the pool's contention is part of it), so only counting
    what it resolved says which configuration ran."""

    counts: dict[int, int] = {}
    installed = False


def count_convt_threads() -> None:
    """Record every thread count convt resolves in this worker (once per process)."""
    if ThreadCounts.installed or "convt" not in sys.modules:
        return
    from convt import _dispatch

    resolve = _dispatch.resolve_threads

    def counted(*args, **kwargs):
        threads = resolve(*args, **kwargs)
        ThreadCounts.counts[threads] = ThreadCounts.counts.get(threads, 0) + 1
        return threads

    _dispatch.resolve_threads = counted
    ThreadCounts.installed = True


def thread_counts() -> dict[int, int]:
    """Worker task: {threads: calls} that convt ran since the last time this was asked."""
    counts, ThreadCounts.counts = ThreadCounts.counts, {}
    return counts


def thread_pools() -> list[str]:
    """Worker task: the BLAS/OpenMP pools loaded in this process, as threadpoolctl sees them."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return ["threadpoolctl not installed"]
    return [
        " ".join(filter(None, (pool.get("prefix"), pool.get("version"))))
        + f" ({pool['num_threads']} threads)"
        for pool in threadpool_info()
    ]


def write_reference(workload: Workload, path: str) -> str:
    """Worker task: save the float64 reference of `workload` to `path` (.npy); say how it was made."""
    import_engine("torch")
    x, w = make_inputs(workload)
    np.save(path, reference_output(workload, x, w))
    return "torch float64"


TASKS: dict[str, Callable] = {
    "prepare": prepare,
    "time_calls": time_calls,
    "release": release,
    "thread_pools": thread_pools,
    "thread_counts": thread_counts,
    "write_reference": write_reference,
}
