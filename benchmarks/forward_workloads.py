"""Forward Conv benchmark workloads: shapes, seeded inputs and their work.

Every workload uses the same kernel size, stride, dilation and padding on all
spatial axes and the same padding at both ends, so that every engine
(PyTorch's symmetric ``padding`` included) runs it as is.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ForwardWorkload:
    """One Conv problem: x (batch, c_in, *spatial), w (c_out, c_in / group, k, ..., k)."""

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
    dilation: int = 1

    @property
    def ndim(self) -> int:
        return len(self.spatial)

    def per_axis(self, value: int) -> list[int]:
        """``value`` repeated for every spatial axis."""
        return [value] * self.ndim

    @property
    def input_shape(self) -> tuple[int, ...]:
        return (self.batch, self.c_in, *self.spatial)

    @property
    def weight_shape(self) -> tuple[int, ...]:
        return (self.c_out, self.c_in // self.group, *self.per_axis(self.kernel))

    @property
    def output_shape(self) -> tuple[int, ...]:
        """By the Conv text: floor((in + 2 pad - dilation (k - 1) - 1) / stride) + 1."""
        extent = self.dilation * (self.kernel - 1) + 1
        return (self.batch, self.c_out,
                *[(size + 2 * self.pad - extent) // self.stride + 1 for size in self.spatial])

    @property
    def flops(self) -> int:
        """2 per multiply-add of the textbook convolution (padding taps included)."""
        return (2 * math.prod(self.output_shape) * (self.c_in // self.group)
                * self.kernel ** self.ndim)

    def convt_params(self, threads: int) -> dict:
        """Parameters of the equivalent ``convt.Conv``."""
        return dict(strides=self.per_axis(self.stride), pads=self.per_axis(self.pad) * 2,
                    dilations=self.per_axis(self.dilation), group=self.group,
                    num_threads=threads)


def make_inputs(workload: ForwardWorkload) -> tuple[np.ndarray, np.ndarray]:
    """x and w of the workload, standard normal, seeded by its name."""
    rng = np.random.default_rng(zlib.crc32(workload.name.encode()))
    x = rng.standard_normal(workload.input_shape, dtype=np.float32).astype(workload.dtype)
    w = (rng.standard_normal(workload.weight_shape, dtype=np.float32)
         / math.sqrt(math.prod(workload.weight_shape[1:]))).astype(workload.dtype)
    return x, w


FORWARD_WORKLOADS = (
    ForwardWorkload("resnet2d_k3s1", "float32", 1, 64, 64, (56, 56), 3, 1, 1),
    ForwardWorkload("resnet2d_k3s2_down", "float32", 1, 128, 256, (56, 56), 3, 2, 1),
    ForwardWorkload("pointwise2d_k1", "float32", 1, 256, 64, (56, 56), 1, 1, 0),
    ForwardWorkload("depthwise2d_k3", "float32", 1, 128, 128, (112, 112), 3, 1, 1, group=128),
    ForwardWorkload("volume3d_k3", "float32", 1, 32, 32, (64, 64, 64), 3, 1, 1),
    ForwardWorkload("audio1d_k7", "float32", 1, 256, 256, (4096,), 7, 1, 3),
    ForwardWorkload("sci2d_f64_k3", "float64", 1, 16, 16, (256, 256), 3, 1, 1),
    ForwardWorkload("batch2d_k3s1", "float32", 8, 64, 64, (56, 56), 3, 1, 1),
)

# Layers people run beyond the table: network stems on RGB input, small maps with
# many channels (MobileNet's late depthwise layers among them), grouped, dilated and
# strided convolutions, odd kernels and strides,
# batched 1-D signals, strided 3-D encoders, narrow and wide dtypes, a tiny call and
# the few-channel large-kernel layers of super-resolution and image filtering.
EXTENDED_FORWARD_WORKLOADS = (
    ForwardWorkload("stem2d_k7s2_rgb", "float32", 1, 3, 64, (224, 224), 7, 2, 3),
    ForwardWorkload("vgg2d_k3_rgb", "float32", 1, 3, 64, (224, 224), 3, 1, 1),
    ForwardWorkload("late2d_k3_7x7", "float32", 1, 512, 512, (7, 7), 3, 1, 1),
    ForwardWorkload("mid2d_k3_14x14", "float32", 1, 256, 256, (14, 14), 3, 1, 1),
    ForwardWorkload("resnext2d_g32_k3", "float32", 1, 128, 128, (56, 56), 3, 1, 1, group=32),
    ForwardWorkload("deeplab2d_d2_k3", "float32", 1, 256, 256, (33, 33), 3, 1, 2, dilation=2),
    ForwardWorkload("shortcut2d_k1s2", "float32", 1, 256, 512, (56, 56), 1, 2, 0),
    # ResNet-50's stage-3 bottleneck reduction and stage-4 downsampling 3x3
    ForwardWorkload("bottleneck2d_k1_14x14", "float32", 1, 1024, 256, (14, 14), 1, 1, 0),
    ForwardWorkload("down2d_k3s2_28x28", "float32", 1, 256, 512, (28, 28), 3, 2, 1),
    ForwardWorkload("depthwise2d_k3s2", "float32", 1, 96, 96, (112, 112), 3, 2, 1, group=96),
    ForwardWorkload("depthwise2d_k5", "float32", 1, 240, 240, (28, 28), 5, 1, 2, group=240),
    ForwardWorkload("depthwise2d_k3_14x14", "float32", 1, 576, 576, (14, 14), 3, 1, 1, group=576),
    ForwardWorkload("depthwise2d_k3_7x7", "float32", 1, 960, 960, (7, 7), 3, 1, 1, group=960),
    # MobileNet-V2's and EfficientNet's last downsampling depthwise layers (onto 7x7)
    ForwardWorkload("depthwise2d_k3s2_14x14", "float32", 1, 576, 576, (14, 14), 3, 2, 1,
                    group=576),
    ForwardWorkload("depthwise2d_k5s2_14x14", "float32", 1, 672, 672, (14, 14), 5, 2, 2,
                    group=672),
    # MobileNet-V2's pointwise expansions on small maps (many outputs, few positions)
    ForwardWorkload("expand2d_k1_14x14", "float32", 1, 64, 384, (14, 14), 1, 1, 0),
    ForwardWorkload("expand2d_k1_7x7", "float32", 1, 160, 960, (7, 7), 1, 1, 0),
    ForwardWorkload("unet2d_k5", "float32", 1, 32, 32, (128, 128), 5, 1, 2),
    ForwardWorkload("srcnn2d_k9_in", "float32", 1, 1, 64, (128, 128), 9, 1, 4),
    ForwardWorkload("srcnn2d_k5_out", "float32", 1, 32, 1, (128, 128), 5, 1, 2),
    ForwardWorkload("blur2d_rgb_k5", "float32", 1, 3, 3, (512, 512), 5, 1, 2, group=3),
    ForwardWorkload("wav2vec1d_k10s5", "float32", 1, 1, 512, (16000,), 10, 5, 0),
    ForwardWorkload("speech1d_b8_k3", "float32", 8, 80, 256, (1024,), 3, 1, 1),
    ForwardWorkload("encoder3d_k3s2", "float32", 1, 16, 32, (64, 64, 64), 3, 2, 1),
    ForwardWorkload("unet3d_b2_k3", "float32", 2, 8, 16, (32, 32, 32), 3, 1, 1),
    ForwardWorkload("volume3d_f64_k3", "float64", 1, 8, 8, (48, 48, 48), 3, 1, 1),
    ForwardWorkload("resnet2d_f16_k3", "float16", 1, 64, 64, (56, 56), 3, 1, 1),
    ForwardWorkload("tiny2d_k3_8x8", "float32", 1, 8, 8, (8, 8), 3, 1, 1),
)

# Peak memory: 3-D layers on a 96^3 volume (input and stride-1 output 108 MiB each).
MEMORY_WORKLOADS = (
    ForwardWorkload("volume3d_k3s1_96", "float32", 1, 32, 32, (96, 96, 96), 3, 1, 1),
    ForwardWorkload("volume3d_k3s2_96", "float32", 1, 32, 32, (96, 96, 96), 3, 2, 1),
)


SETS = {"table": FORWARD_WORKLOADS, "extended": EXTENDED_FORWARD_WORKLOADS,
        "all": FORWARD_WORKLOADS + EXTENDED_FORWARD_WORKLOADS}


def by_name(names: str | None,
            workloads=FORWARD_WORKLOADS + EXTENDED_FORWARD_WORKLOADS) -> tuple[ForwardWorkload, ...]:
    """The workloads named in a comma-separated list (all of them for None)."""
    if not names:
        return tuple(workloads)
    known = {workload.name: workload for workload in workloads}
    unknown = [name for name in names.split(",") if name not in known]
    if unknown:
        raise SystemExit(f"unknown workload(s) {unknown}; known: {', '.join(known)}")
    return tuple(known[name] for name in names.split(","))
