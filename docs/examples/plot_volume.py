"""
Upsampling a 3-D volume
=======================

A volume, like a stack of microscope slices, is upsampled along every axis in
one call.  Here: scikit-image's 3-D binary blobs, smoothed, upsampled 3 times
with the cubic kernel, and with different factors per axis (anisotropic
voxels: slices twice as far apart as pixels).
"""

import matplotlib.pyplot as plt
import numpy as np
from scipy import ndimage
from skimage import data

import convt

blobs = data.binary_blobs(length=48, n_dim=3, volume_fraction=0.2, rng=1)
volume = ndimage.gaussian_filter(blobs.astype(np.float32), 1.0)
print("volume", volume.shape, volume.dtype)

fine = convt.upsample(volume, 3, kernel="cubic", mode="reflect")
print("upsampled", fine.shape)

# slices 2 voxels apart, pixels 1 apart: upsample the slice axis twice as much
anisotropic = convt.upsample(volume[::2], (4, 2, 2))
print("anisotropic", volume[::2].shape, "->", anisotropic.shape)

# %%
# The middle slice and the maximum-intensity projection, before and after.

figure, axes = plt.subplots(2, 2, figsize=(7, 7))
for row, (label, array) in enumerate((("48^3", volume), ("144^3, cubic", fine))):
    axes[row, 0].imshow(array[array.shape[0] // 2], cmap="magma")
    axes[row, 0].set_title(f"{label}: middle slice")
    axes[row, 1].imshow(array.max(axis=0), cmap="magma")
    axes[row, 1].set_title(f"{label}: max projection")
for axis in axes.ravel():
    axis.set_axis_off()
figure.tight_layout()

# %%
# Every input voxel is reproduced exactly (the cubic kernel interpolates), at
# the centres of the 3 x 3 x 3 output blocks.

print("max |fine[1::3, 1::3, 1::3] - volume| =",
      float(np.max(np.abs(fine[1::3, 1::3, 1::3] - volume))))
