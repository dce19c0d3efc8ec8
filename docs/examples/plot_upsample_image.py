"""
Upsampling a photograph
=======================

scikit-image ships a few test images; ``camera`` is a 512 x 512 grey-level
photograph (uint8).  :func:`convt.upsample` takes it as it is: no batch or
channel axes, integers computed in float32.
"""

import time

import matplotlib.pyplot as plt
import numpy as np
from skimage import data, transform

import convt

image = data.camera()
print(image.shape, image.dtype)

start = time.perf_counter()
bigger = convt.upsample(image, 4)  # linear (bilinear), mode "edge"
print(f"convt.upsample: {bigger.shape} {bigger.dtype} in {time.perf_counter() - start:.3f} s")

# %%
# Before and after, on a detail (the camera and the photographer's hand).
# The three kernels: 'nearest' repeats pixels, 'linear' is bilinear, 'cubic'
# is Keys' cubic convolution (sharper, with a slight overshoot at edges).

rows, cols = slice(128, 192), slice(256, 320)
detail = image[rows, cols]
results = {kernel: convt.upsample(detail, 4, kernel=kernel) for kernel in convt.kernels.KERNELS}
figure, axes = plt.subplots(1, 4, figsize=(12, 3.4))
axes[0].imshow(detail, cmap="gray", vmin=0, vmax=255)
axes[0].set_title("input detail, 64 x 64")
for axis, (kernel, result) in zip(axes[1:], results.items()):
    axis.imshow(result, cmap="gray", vmin=0, vmax=255)
    axis.set_title(f"kernel={kernel!r}, 256 x 256")
for axis in axes:
    axis.set_axis_off()
figure.tight_layout()

# %%
# The same numbers as scikit-image
# --------------------------------
# ``skimage.transform.rescale(order=1, mode="edge")`` computes the same
# bilinear interpolation on the same grid (``preserve_range=True`` keeps the
# 0-255 values; scikit-image would otherwise scale integers to [0, 1]).

start = time.perf_counter()
expected = transform.rescale(image, 4, order=1, mode="edge", preserve_range=True)
print(f"skimage.transform.rescale: {time.perf_counter() - start:.3f} s")
print("largest difference:", float(np.max(np.abs(bigger - expected))))
