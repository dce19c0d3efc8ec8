"""The engines under comparison, each wrapped as a zero-argument call.

`prepare_engine` does all the one-off work (imports, thread settings, model
building, compilation, tensor conversion) and returns a function that runs
exactly one ConvTranspose on the prepared input and returns the output as a
NumPy array. Only that function is timed. Bias is None everywhere.

Weights are given to onnxruntime and OpenVINO as model constants, the way
those engines are deployed, so they may pre-pack them at build time outside
the timing; convt and torch receive the weight on every call.

Outputs: OpenVINO writes into a tensor its infer request owns and reuses, and
onnxruntime allocates from its arena. `convt` is timed the same way, writing
into a reused `out=` array; `convt_new` times the plain `apply(x, w)` that
returns a new array (its extra cost is the operating system mapping fresh
pages), and torch allocates a new tensor every call.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import os
from typing import Callable

import numpy as np

from workloads import Workload, torch_conv_transpose

ENGINE_NAMES: tuple[str, ...] = ("convt", "convt_new", "torch", "onnxruntime", "openvino")
CONVT_ENGINES: tuple[str, ...] = ("convt", "convt_new", "convt@1")  # never "other"

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


class EngineUnavailable(RuntimeError):
    """The engine cannot run here (not installed, or unsupported workload)."""


def usable_cores() -> int:
    """Number of cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def import_engine(module_name: str):
    """Import an optional engine module, or raise EngineUnavailable."""
    try:
        return importlib.import_module(module_name)
    except Exception as exc:  # a half-built extension can raise anything
        raise EngineUnavailable(f"import {module_name} failed: {exc}") from exc


def module_version(module_name: str) -> str | None:
    """Installed version of a module, or None if it cannot be imported."""
    try:
        module = importlib.import_module(module_name)
    except Exception:
        return None
    version = getattr(module, "__version__", None)
    if version is None:
        try:
            version = importlib.metadata.version(module_name)
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
    return str(version)


def convt_operator(workload: Workload, threads: int):
    """convt.ConvTranspose with the workload's attributes."""
    convt = import_engine("convt")
    return convt.ConvTranspose(
        strides=workload.strides,
        pads=workload.onnx_pads,
        dilations=workload.dilations,
        group=workload.group,
        output_padding=workload.output_paddings,
        num_threads=threads,
    )


def prepare_convt(workload: Workload, x: np.ndarray, w: np.ndarray, threads: int) -> Call:
    """convt.ConvTranspose(...).apply(x, w, None, out=y) into a reused output array."""
    operator = convt_operator(workload, threads)
    out = np.empty(operator.output_shape_for(x.shape, w.shape), dtype=x.dtype)
    return lambda: operator.apply(x, w, None, out=out)


def prepare_convt_new(workload: Workload, x: np.ndarray, w: np.ndarray, threads: int) -> Call:
    """convt.ConvTranspose(...).apply(x, w, None), returning a new array each call."""
    operator = convt_operator(workload, threads)
    return lambda: operator.apply(x, w, None)


def prepare_torch(workload: Workload, x: np.ndarray, w: np.ndarray, threads: int) -> Call:
    """torch.nn.functional.conv_transpose{1,2,3}d under no_grad."""
    torch = import_engine("torch")
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
        kernel_shape=workload.kernel_shape,
        strides=workload.strides,
        pads=workload.onnx_pads,
        dilations=workload.dilations,
        group=workload.group,
        output_padding=workload.output_paddings,
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


def onnxruntime_session(model_bytes: bytes, threads: int):
    """An onnxruntime CPU session with N intra-op threads and full optimization."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    return onnxruntime.InferenceSession(
        model_bytes, options, providers=["CPUExecutionProvider"]
    )


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


def prepare_onnxruntime(workload: Workload, x: np.ndarray, w: np.ndarray, threads: int) -> Call:
    """One-node ConvTranspose model in an onnxruntime CPUExecutionProvider session."""
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
        strides=workload.strides,
        pads_begin=[workload.pad] * workload.ndim,
        pads_end=[workload.pad] * workload.ndim,
        dilations=workload.dilations,
        output_padding=workload.output_paddings,
    )
    if workload.group == 1:
        output = ops.convolution_backprop_data(data, ops.constant(w), **attributes)
    else:
        group_shape = (workload.group, workload.c_in // workload.group, *w.shape[1:])
        weights = ops.constant(w.reshape(group_shape))
        output = ops.group_convolution_backprop_data(data, weights, **attributes)
    return openvino.Model([output], [data], "conv_transpose")


def prepare_openvino(workload: Workload, x: np.ndarray, w: np.ndarray, threads: int) -> Call:
    """OpenVINO CPU plugin, N inference threads, f32 inference precision.

    The input and output buffers are shared with NumPy (no copies), and the
    output tensor is owned and reused by the infer request.
    """
    openvino = import_engine("openvino")
    import openvino.properties as properties
    import openvino.properties.hint as hints

    config = {
        properties.inference_num_threads: threads,
        hints.inference_precision: openvino.Type.f32,
    }
    compiled = openvino.Core().compile_model(openvino_model(workload, w), "CPU", config)
    request = compiled.create_infer_request()
    return lambda: request.infer({0: x}, share_inputs=True, share_outputs=True)[0]


PREPARERS: dict[str, Callable[[Workload, np.ndarray, np.ndarray, int], Call]] = {
    "convt": prepare_convt,
    "convt_new": prepare_convt_new,
    "torch": prepare_torch,
    "onnxruntime": prepare_onnxruntime,
    "openvino": prepare_openvino,
}


def prepare_engine(engine: str, workload: Workload, x: np.ndarray, w: np.ndarray, threads: int) -> Call:
    """Build `engine` for `workload` with `threads` threads; return the call to time."""
    return PREPARERS[engine](workload, x, w, threads)


def describe_failure(exc: BaseException, limit: int = 160) -> str:
    """One short line explaining why an engine could not run."""
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    if not isinstance(exc, EngineUnavailable):
        text = f"{type(exc).__name__}: {text}"
    return text if len(text) <= limit else text[: limit - 3] + "..."
