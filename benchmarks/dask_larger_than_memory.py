"""A volume larger than a worker's memory, upsampled from one zarr store into another.

A dask.distributed LocalCluster runs ``--workers`` worker processes, each with
one thread and a memory limit (``--memory-limit``, 512 MiB by default).  The
input zarr store (float32, ``--shape``, written by the cluster itself from a
smooth synthetic volume) and the output store (8 times larger) are both larger
than that limit.  ``convt.dask.upsample`` reads the input store, and
``to_zarr`` writes the result block by block.

Reported: wall time, sizes, and each worker's peak resident memory (the
operating system's ``ru_maxrss`` of the worker process, which includes the
Python interpreter, numpy, dask, zarr and convt: about 150 MiB before any
work), then a bitwise check of random output boxes against the in-memory
computation of the same boxes.

Not part of the test suite (it writes several GiB); run it by hand:
    python benchmarks/dask_larger_than_memory.py [--shape 512,640,640]
        [--chunks 64,128,128] [--workers 2] [--memory-limit 512MiB] [--dir /tmp/convt-zarr]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import time
from pathlib import Path

import numpy as np


def integers(text):
    return tuple(int(part) for part in text.split(","))


def peak_rss():
    """This process's peak resident set size in bytes (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def current_rss():
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize()


def synthetic_block(block, block_info=None):
    """Gaussian blobs on a ramp plus 5% noise (as in microscopy: barely compressible)."""
    location = block_info[None]["array-location"]
    shape = block_info[None]["shape"]
    axes = [np.arange(start, stop, dtype=np.float32) / size
            for (start, stop), size in zip(location, shape)]
    z, y, x = np.meshgrid(*axes, indexing="ij", sparse=True)
    values = 0.2 * (x + y + z)
    for cz, cy, cx, radius in ((0.3, 0.4, 0.5, 0.1), (0.7, 0.6, 0.3, 0.15), (0.5, 0.2, 0.8, 0.05)):
        values = values + np.exp(-((z - cz) ** 2 + (y - cy) ** 2 + (x - cx) ** 2) / radius**2)
    seed = [start for start, _ in location]
    noise = np.random.default_rng(seed).standard_normal(values.shape, dtype=np.float32)
    return (values + 0.05 * noise).astype(np.float32)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", type=integers, default=(512, 640, 640))
    parser.add_argument("--chunks", type=integers, default=(64, 128, 128))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="512MiB")
    parser.add_argument("--kernel", default="linear")
    parser.add_argument("--dir", default="/tmp/convt-larger-than-memory")
    parser.add_argument("--keep", action="store_true", help="keep the zarr stores")
    arguments = parser.parse_args()

    import dask
    import dask.array as da
    import zarr
    from dask.distributed import Client, LocalCluster

    import convt
    import convt.dask
    from convt._upsample import Window, resolve, upsample_box

    directory = Path(arguments.dir)
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    source, target = str(directory / "in.zarr"), str(directory / "out.zarr")
    shape, chunks = arguments.shape, arguments.chunks
    in_bytes = int(np.prod(shape)) * 4
    limit = dask.utils.parse_bytes(arguments.memory_limit)
    print(f"input {shape} float32 {in_bytes / 2**20:.0f} MiB in chunks {chunks}, output "
          f"{8 * in_bytes / 2**30:.2f} GiB; {arguments.workers} workers x 1 thread, memory "
          f"limit {limit / 2**20:.0f} MiB each")
    with LocalCluster(n_workers=arguments.workers, threads_per_worker=1, processes=True,
                      memory_limit=arguments.memory_limit, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        baseline = client.run(current_rss)
        start = time.perf_counter()
        volume = da.zeros(shape, dtype=np.float32, chunks=chunks).map_blocks(
            synthetic_block, dtype=np.float32)
        volume.to_zarr(source)
        written = time.perf_counter() - start
        client.run(lambda: None)
        start = time.perf_counter()
        lazy = convt.dask.upsample(da.from_zarr(source), 2, kernel=arguments.kernel)
        lazy.to_zarr(target)
        seconds = time.perf_counter() - start
        peaks = client.run(peak_rss)
        # a worker killed for exceeding its limit comes back under a new address
        survived = set(peaks) == set(baseline)
    print(f"input store written in {written:.1f} s; upsampled store to store in {seconds:.1f} s "
          f"({8 * in_bytes / seconds / 2**20:.0f} MiB/s of output)")
    for (address, peak), before in zip(sorted(peaks.items()), [baseline[a] for a in
                                                               sorted(peaks)]):
        print(f"  worker {address}: peak RSS {peak / 2**20:.0f} MiB (limit "
              f"{limit / 2**20:.0f} MiB; {before / 2**20:.0f} MiB after start-up)")
    print(f"  every worker ran to the end without being restarted: {survived}")
    sizes = {name: sum(f.stat().st_size for f in (directory / name).rglob("*") if f.is_file())
             for name in ("in.zarr", "out.zarr")}
    print(f"  on disk: in.zarr {sizes['in.zarr'] / 2**20:.0f} MiB, out.zarr "
          f"{sizes['out.zarr'] / 2**20:.0f} MiB (compressed)")

    # bitwise check of random boxes against the in-memory computation of the same boxes
    inputs, outputs = zarr.open_array(source, mode="r"), zarr.open_array(target, mode="r")
    spec = resolve(shape, np.float32, 2, arguments.kernel, None, "edge", 0.0, None, None)
    rng = np.random.default_rng(0)
    out_shape = spec.output_shape(shape)
    checked = 0
    for _ in range(6):
        box = []
        for size in out_shape:
            start = int(rng.integers(0, size - 32))
            box.append((start, start + 32))
        box[0] = (0, 16) if checked == 0 else box[0]  # include a border strip
        expected = upsample_box(Window(inputs), spec, shape, tuple(box),
                                np.empty([b - a for a, b in box], np.float32))
        stored = np.asarray(outputs[tuple(slice(a, b) for a, b in box)])
        assert stored.tobytes() == expected.tobytes(), box
        checked += 1
    print(f"  {checked} random output boxes equal the in-memory computation bit for bit")
    if not arguments.keep:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
