"""Benchmark workloads: ConvTranspose shapes, their inputs and a float64 reference.

Two sets: TABLE, the workloads of the README's table, and EXTENDED, real
layers beyond it. Kernel, stride, padding, dilation and output padding may
differ per spatial axis; the padding is the same at both ends of an axis, so
that torch (which only has symmetric padding) can run every workload.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np

Axes = int | tuple[int, ...]


def per_axis(value: Axes, ndim: int) -> tuple[int, ...]:
    """`value` repeated on every spatial axis, or the tuple itself if it has one value per axis.

    >>> per_axis(2, 3), per_axis((1, 2, 2), 3)
    ((2, 2, 2), (1, 2, 2))
    """
    if isinstance(value, int):
        return (value,) * ndim
    if len(value) != ndim:
        raise ValueError(f"expected {ndim} values, one per spatial axis, got {value!r}")
    return tuple(value)


def axes_text(values: tuple[int, ...]) -> str:
    """'4' when every axis has the same value, else '1x2x2'."""
    return str(values[0]) if len(set(values)) == 1 else "x".join(map(str, values))


@dataclass(frozen=True)
class Workload:
    """One ConvTranspose problem.

    kernel, stride, pad, output_padding and dilation are one int for every
    spatial axis or a tuple with one value per axis. `pad` is applied at both
    ends of an axis (torch only has symmetric padding). The weight has the
    ONNX layout (C_in, C_out / group, *kernel), which is also the layout of
    torch.nn.functional.conv_transpose{1,2,3}d.

    >>> Workload("w", "float32", 1, 8, 4, (4, 16, 16), (1, 2, 2), (1, 2, 2), 0).output_shape
    (1, 4, 4, 32, 32)
    """

    name: str
    dtype: str
    batch: int
    c_in: int
    c_out: int
    spatial: tuple[int, ...]
    kernel: Axes
    stride: Axes
    pad: Axes
    group: int = 1
    output_padding: Axes = 0
    dilation: Axes = 1

    def __post_init__(self) -> None:
        for field in ("kernel", "stride", "pad", "output_padding", "dilation"):
            object.__setattr__(self, field, per_axis(getattr(self, field), len(self.spatial)))

    @property
    def ndim(self) -> int:
        """Number of spatial axes."""
        return len(self.spatial)

    @property
    def onnx_pads(self) -> list[int]:
        """ONNX `pads`: all begin values, then all end values (the same)."""
        return [*self.pad, *self.pad]

    @property
    def input_shape(self) -> tuple[int, ...]:
        return (self.batch, self.c_in, *self.spatial)

    @property
    def weight_shape(self) -> tuple[int, ...]:
        return (self.c_in, self.c_out // self.group, *self.kernel)

    @property
    def output_shape(self) -> tuple[int, ...]:
        """Output shape from the ONNX ConvTranspose shape formula."""
        spatial = [
            stride * (size - 1) + output_padding + dilation * (kernel - 1) + 1 - 2 * pad
            for size, kernel, stride, pad, output_padding, dilation in zip(
                self.spatial, self.kernel, self.stride, self.pad, self.output_padding, self.dilation
            )
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
            * math.prod(self.kernel)
        )

    def describe(self) -> str:
        """Short human-readable shape, e.g. '1x256->128 64x64 k4 s2 p1'."""
        text = (
            f"{self.batch}x{self.c_in}->{self.c_out} {'x'.join(map(str, self.spatial))} "
            f"k{axes_text(self.kernel)} s{axes_text(self.stride)} p{axes_text(self.pad)}"
        )
        if self.group != 1:
            text += f" g{self.group}"
        if any(self.output_padding):
            text += f" op{axes_text(self.output_padding)}"
        if any(value != 1 for value in self.dilation):
            text += f" d{axes_text(self.dilation)}"
        return text


# "The table": the workloads of the README's table.
TABLE: tuple[Workload, ...] = (
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

# "Extended": layers people run beyond the table; benchmarks/README.md says why each is here.
EXTENDED: tuple[Workload, ...] = (
    Workload("fcn32s_head_k64s32", "float32", 1, 21, 21, (16, 16), 64, 32, 16),
    Workload("fcn8s_head_k16s8", "float32", 1, 21, 21, (64, 64), 16, 8, 4),
    Workload("sr_rgb_k3s3", "float32", 1, 64, 3, (256, 256), 3, 3, 0),
    Workload("fsrcnn_x3_k9s3", "float32", 1, 56, 1, (256, 256), 9, 3, 4, output_padding=2),
    Workload("hifigan_up1_b4", "float32", 4, 512, 256, (32,), 16, 8, 4),
    Workload("hifigan_up2_b4", "float32", 4, 256, 128, (256,), 16, 8, 4),
    Workload("hifigan_up3_b4", "float32", 4, 128, 64, (2048,), 4, 2, 1),
    Workload("nnunet3d_k122", "float32", 2, 128, 64, (16, 32, 32), (1, 2, 2), (1, 2, 2), 0),
    Workload("nnunet3d_k122_deep", "float32", 1, 320, 256, (8, 12, 12), (1, 2, 2), (1, 2, 2), 0),
    Workload("vae_dec_b8_k4s2", "float32", 8, 128, 64, (32, 32), 4, 2, 1),
    Workload("vae_dec_b4_k3s2", "float32", 4, 64, 32, (64, 64), 3, 2, 1, output_padding=1),
    Workload("tiny8x8_k4s2", "float32", 1, 64, 32, (8, 8), 4, 2, 1),
    Workload("dcgan2d_k4s2_4x4", "float32", 1, 1024, 512, (4, 4), 4, 2, 1),
    Workload("dcgan2d_k4s2_8x8", "float32", 1, 512, 256, (8, 8), 4, 2, 1),
    Workload("small32x32_k4s2", "float32", 1, 64, 32, (32, 32), 4, 2, 1),
    Workload("volume3d_f64_k2s2", "float64", 1, 32, 16, (32, 32, 32), 2, 2, 0),
    Workload("volume3d_f16_k2s2", "float16", 1, 64, 32, (32, 32, 32), 2, 2, 0),
    Workload("rgb_bilinear_k4s2", "float32", 1, 3, 3, (1024, 1024), 4, 2, 1, group=3),
)

WORKLOAD_SETS: dict[str, tuple[Workload, ...]] = {"table": TABLE, "extended": EXTENDED}
WORKLOADS: tuple[Workload, ...] = TABLE + EXTENDED
WORKLOADS_BY_NAME: dict[str, Workload] = {workload.name: workload for workload in WORKLOADS}
SET_OF: dict[str, str] = {w.name: set_name for set_name, ws in WORKLOAD_SETS.items() for w in ws}


def make_inputs(workload: Workload) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic input and weight in the workload's dtype.

    Values are drawn in float64 and rounded once to the target dtype, so the
    float64 reference sees exactly the values every engine sees. The weight is
    scaled by 1/sqrt(fan-in) so outputs stay O(1) (no float16 overflow).
    """
    rng = np.random.default_rng(zlib.crc32(workload.name.encode()))
    fan_in = (workload.c_in // workload.group) * math.prod(workload.kernel)
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
