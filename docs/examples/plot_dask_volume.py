"""
A chunked volume with dask
==========================

:mod:`convt.dask` upsamples a dask array block by block: each output block is
computed from its input block plus the few neighbouring samples the kernel
reaches, so a volume far larger than memory (a zarr or HDF5 store) streams
through.  The result is the same, bit for bit, as the in-memory call.
"""

import dask
import dask.array as da
import matplotlib.pyplot as plt
import numpy as np

import convt
import convt.dask

rng = np.random.default_rng(0)
z, y, x = np.meshgrid(*(np.linspace(-1, 1, 64),) * 3, indexing="ij")
volume = (np.cos(6 * np.hypot(z, np.hypot(y, x))) + 0.1 * rng.standard_normal(z.shape))
volume = volume.astype(np.float32)
chunked = da.from_array(volume, chunks=(16, 32, 32))

lazy = convt.dask.upsample(chunked, 2, kernel="cubic", mode="mirror")
print(lazy)
print("blocks:", lazy.numblocks, "output chunks:", lazy.chunksize)

# %%
# Nothing has been computed yet.  Computing it (with dask's threads here; with
# a ``dask.distributed`` cluster for real data, and ``lazy.to_zarr(path)`` to
# write a store) gives the in-memory result exactly.

with dask.config.set(scheduler="threads"):
    result = lazy.compute()
same = convt.upsample(volume, 2, kernel="cubic", mode="mirror")
print("identical to convt.upsample:", result.tobytes() == same.tobytes())

# %%
# The block structure: every output block (lines) is one task reading one
# input block and halos of its neighbours.

figure, axis = plt.subplots(figsize=(5, 5))
axis.imshow(result[64], cmap="twilight")
for boundary in np.cumsum(lazy.chunks[2])[:-1]:
    axis.axvline(boundary - 0.5, color="white", lw=0.8)
for boundary in np.cumsum(lazy.chunks[1])[:-1]:
    axis.axhline(boundary - 0.5, color="white", lw=0.8)
axis.set_title("slice 64 of the 128^3 result, with its blocks")
axis.set_axis_off()
figure.tight_layout()
