"""Benchmark workloads: ConvTranspose shapes, their inputs and a float64 reference.

Every workload uses the same stride, padding, dilation and output padding on
all spatial axes and the same padding at the beginning and end of each axis,
so that torch (which only has symmetric padding) can run it too.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Workload:
    """One ConvTranspose problem.

    The weight has the ONNX layout (C_in, C_out / group, *kernel), which is
    also the layout of torch.nn.functional.conv_transpose{1,2,3}d.
    """

    name: str
    dtype: str
    batch: int
    c_in: int
    c_out: int
    spatial: tuple[int, ...]
    kernel: int
    stride: int
    pad: int
    group: int = 1
    output_padding: int = 0
    dilation: int = 1

    @property
    def ndim(self) -> int:
        """Number of spatial axes."""
        return len(self.spatial)

    @property
    def kernel_shape(self) -> list[int]:
        return [self.kernel] * self.ndim

    @property
    def strides(self) -> list[int]:
        return [self.stride] * self.ndim

    @property
    def dilations(self) -> list[int]:
        return [self.dilation] * self.ndim

    @property
    def output_paddings(self) -> list[int]:
        return [self.output_padding] * self.ndim

    @property
    def onnx_pads(self) -> list[int]:
        """ONNX `pads`: all begin values, then all end values."""
        return [self.pad] * (2 * self.ndim)

    @property
    def input_shape(self) -> tuple[int, ...]:
        return (self.batch, self.c_in, *self.spatial)

    @property
    def weight_shape(self) -> tuple[int, ...]:
        return (self.c_in, self.c_out // self.group, *self.kernel_shape)

    @property
    def output_shape(self) -> tuple[int, ...]:
        """Output shape from the ONNX ConvTranspose shape formula."""
        extent = self.dilation * (self.kernel - 1) + 1
        spatial = [
            self.stride * (size - 1) + self.output_padding + extent - 2 * self.pad
            for size in self.spatial
        ]
        return (self.batch, self.c_out, *spatial)

    @property
    def flops(self) -> int:
        """Multiply-adds counted as 2 FLOPs: 2 N C_in (C_out/g) prod(in) prod(k)."""
        return (
            2
            * self.batch
            * self.c_in
            * (self.c_out // self.group)
            * math.prod(self.spatial)
            * math.prod(self.kernel_shape)
        )

    def describe(self) -> str:
        """Short human-readable shape, e.g. '1x256->128 64x64 k4 s2 p1'."""
        text = (
            f"{self.batch}x{self.c_in}->{self.c_out} "
            f"{'x'.join(map(str, self.spatial))} k{self.kernel} s{self.stride} p{self.pad}"
        )
        if self.group != 1:
            text += f" g{self.group}"
        if self.output_padding:
            text += f" op{self.output_padding}"
        if self.dilation != 1:
            text += f" d{self.dilation}"
        return text


WORKLOADS: tuple[Workload, ...] = (
    Workload("dcgan2d_k4s2", "float32", 1, 256, 128, (64, 64), 4, 2, 1),
    Workload("unet2d_k2s2", "float32", 1, 128, 64, (128, 128), 2, 2, 0),
    Workload("unet3d_k2s2", "float32", 1, 64, 32, (32, 32, 32), 2, 2, 0),
    Workload("vnet3d_k3s2", "float32", 1, 32, 16, (32, 32, 32), 3, 2, 1, output_padding=1),
    Workload("audio1d_k16s8", "float32", 1, 512, 256, (1024,), 16, 8, 4),
    Workload("depthwise2d_k4s2", "float32", 1, 64, 64, (128, 128), 4, 2, 1, group=64),
    Workload("grouped2d_g8", "float32", 1, 256, 256, (32, 32), 3, 2, 1, group=8, output_padding=1),
    Workload("batch2d_k3s1", "float32", 8, 64, 64, (56, 56), 3, 1, 1),
    Workload("sci2d_f64_k4s2", "float64", 1, 16, 16, (256, 256), 4, 2, 1),
    Workload("big_image_f32_c1", "float32", 1, 1, 1, (2048, 2048), 4, 2, 1),
    Workload("dcgan2d_f16", "float16", 1, 256, 128, (64, 64), 4, 2, 1),
)

WORKLOADS_BY_NAME: dict[str, Workload] = {workload.name: workload for workload in WORKLOADS}


def make_inputs(workload: Workload) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic input and weight in the workload's dtype.

    Values are drawn in float64 and rounded once to the target dtype, so the
    float64 reference sees exactly the values every engine sees. The weight is
    scaled by 1/sqrt(fan-in) so outputs stay O(1) (no float16 overflow).
    """
    rng = np.random.default_rng(zlib.crc32(workload.name.encode()))
    fan_in = (workload.c_in // workload.group) * math.prod(workload.kernel_shape)
    x = rng.standard_normal(workload.input_shape)
    w = rng.standard_normal(workload.weight_shape) / math.sqrt(fan_in)
    return x.astype(workload.dtype), w.astype(workload.dtype)


def torch_conv_transpose(workload: Workload, x, w):
    """torch.nn.functional.conv_transpose{1,2,3}d on torch tensors, bias None."""
    import torch.nn.functional as functional

    conv = getattr(functional, f"conv_transpose{workload.ndim}d")
    return conv(
        x,
        w,
        None,
        stride=workload.stride,
        padding=workload.pad,
        output_padding=workload.output_padding,
        groups=workload.group,
        dilation=workload.dilation,
    )


def reference_output(workload: Workload, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """float64 result computed by torch in float64: the yardstick for errors."""
    import torch

    with torch.no_grad():
        result = torch_conv_transpose(
            workload,
            torch.from_numpy(x.astype(np.float64)),
            torch.from_numpy(w.astype(np.float64)),
        )
    return result.numpy()
