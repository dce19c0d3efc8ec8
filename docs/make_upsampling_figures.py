"""Draw the upsampling figures of docs/: python docs/make_upsampling_figures.py.

Needs matplotlib and scikit-image (for its bundled camera image).  Every curve
and picture is computed by convt itself: the kernels' taps by convt.kernels,
the images by convt.upsample and convt.conv_transpose.

- kernels.png: each kernel's taps and frequency response, for factors 2 and 4;
- upsample_camera.png: a crop of scikit-image's camera image upsampled x4.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import convt  # noqa: E402
from convt import kernels  # noqa: E402

HERE = Path(__file__).resolve().parent
COLOURS = {"nearest": "tab:green", "linear": "tab:blue", "cubic": "tab:red"}


def frequency_response(taps, factor, points=512):
    """|H(f)| of the taps divided by the factor (1 at DC), on [0, 1/2] cycles per output sample."""
    frequencies = np.linspace(0, 0.5, points)
    positions = np.arange(len(taps)) - (len(taps) - 1) / 2
    response = np.abs(np.exp(-2j * np.pi * np.outer(frequencies, positions)) @ taps) / factor
    return frequencies, response


def kernels_figure(path):
    figure, axes = plt.subplots(2, 3, figsize=(12, 6.2))
    for column, kernel in enumerate(kernels.KERNELS):
        top, bottom = axes[0, column], axes[1, column]
        dense = kernels.taps(kernel, 64)  # the continuous kernel, sampled finely
        dense_t = (np.arange(len(dense)) - (len(dense) - 1) / 2) / 64
        top.plot(dense_t, dense, color="0.6", lw=1, label="h(t)")
        for factor, marker in ((2, "o"), (4, "s")):
            taps = kernels.taps(kernel, factor)
            t = (np.arange(len(taps)) - (len(taps) - 1) / 2) / factor
            pads = kernels.pads(kernel, factor, ndim=1)[0]
            top.plot(t, taps, marker, ms=5, ls="none", color=COLOURS[kernel],
                     alpha=1.0 if factor == 2 else 0.5,
                     label=f"taps, factor {factor} ({len(taps)}, pads {pads})")
            frequencies, response = frequency_response(taps, factor)
            bottom.plot(frequencies * factor, response, color=COLOURS[kernel],
                        ls="-" if factor == 2 else "--", label=f"factor {factor}")
        top.axhline(0, color="0.8", lw=0.8)
        top.set_title(f"{kernel}", fontsize=12)
        top.set_xlabel("distance t from the output, in input samples")
        top.legend(fontsize=8, loc="lower center")
        top.set_ylim(-0.2, 1.15)
        bottom.axvline(0.5, color="0.5", lw=0.8, ls=":")
        bottom.text(0.52, 0.92, "input Nyquist", fontsize=8, color="0.4")
        bottom.set_xlim(0, 2)
        bottom.set_ylim(0, 1.1)
        bottom.set_xlabel("frequency, cycles per input sample")
        bottom.set_ylabel("|H| / factor")
        bottom.legend(fontsize=8, loc="upper right")
    figure.suptitle("convt.kernels: taps (top) and frequency response (bottom). Above the input's "
                    "Nyquist frequency the response passes images (aliases) of the input.",
                    fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def camera_figure(path):
    from skimage import data

    crop = data.camera()[40:80, 190:230].astype(np.float32)  # 40 x 40: hair and sky
    factor = 4
    naive = convt.conv_transpose(crop[None, None], kernels.linear(factor, dtype=np.float32),
                                 strides=(factor, factor),
                                 pads=kernels.pads("linear", factor))[0, 0]
    panels = [
        ("input, 40 x 40\n(pixels drawn as squares)", np.kron(crop, np.ones((factor, factor)))),
        ("conv_transpose with the linear kernel:\nzero padding darkens the border", naive),
        ("convt.upsample(crop, 4): linear,\nmode 'edge' (exact borders)",
         convt.upsample(crop, factor)),
        ("convt.upsample(crop, 4, kernel='cubic')", convt.upsample(crop, factor, kernel="cubic")),
    ]
    figure, axes = plt.subplots(1, 4, figsize=(14, 4.3))
    for axis, (title, image) in zip(axes, panels):
        axis.imshow(image, cmap="gray", vmin=0, vmax=255, interpolation="nearest")
        axis.set_title(title, fontsize=10)
        axis.set_xticks([])
        axis.set_yticks([])
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


if __name__ == "__main__":
    kernels_figure(HERE / "kernels.png")
    camera_figure(HERE / "upsample_camera.png")
    print("wrote", HERE / "kernels.png", "and", HERE / "upsample_camera.png")
