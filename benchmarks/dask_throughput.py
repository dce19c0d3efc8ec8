"""Throughput of convt.dask.upsample on a dask.distributed LocalCluster with 1 and 2 workers.

A float32 volume is generated on the workers and persisted (not timed), then
``convt.dask.upsample(volume, 2)`` is computed block by block and every output
block is handed to a store that discards it (``da.store`` into a sink): what is
timed is the blocks' gathering (halos), the upsampling and the scheduling, not
disk I/O or a reduction.  Each worker is one process with one thread and runs
convt with one OpenMP thread (``num_threads=1``, the default of convt.dask).
For comparison the in-memory ``convt.upsample`` of the same volume is timed in
this process with 1 thread and with every core.

Usage (needs the 'dask' extra: dask[array,distributed]):
    python benchmarks/dask_throughput.py [--shape 256,512,512] [--chunks 64,256,256]
                                         [--kernel linear] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


class Sink:
    """A da.store target that drops what it is given."""

    def __setitem__(self, key, value):
        pass


def integers(text):
    return tuple(int(part) for part in text.split(","))


def timed(function, repeat):
    function()  # warm-up: plans, imports, worker caches
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", type=integers, default=(256, 512, 512))
    parser.add_argument("--chunks", type=integers, default=(64, 256, 256))
    parser.add_argument("--kernel", default="linear")
    parser.add_argument("--repeat", type=int, default=3)
    arguments = parser.parse_args()

    import dask.array as da
    from dask.distributed import Client, LocalCluster, wait

    import convt
    import convt.dask

    shape, chunks = arguments.shape, arguments.chunks
    output_bytes = 8 * int(np.prod(shape)) * 4
    print(f"volume {shape} float32 ({np.prod(shape) * 4 / 2**20:.0f} MiB), chunks {chunks}, "
          f"x2 {arguments.kernel} -> {output_bytes / 2**30:.1f} GiB")
    rows = []
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, Client(cluster):
            volume = da.random.default_rng(0).random(shape, dtype=np.float32, chunks=chunks)
            volume = volume.persist()
            wait(volume)
            lazy = convt.dask.upsample(volume, 2, kernel=arguments.kernel)
            seconds = timed(lambda: da.store(lazy, Sink(), lock=False), arguments.repeat)
            rows.append((f"dask LocalCluster, {workers} worker(s) x 1 thread", seconds))
    image = np.random.default_rng(0).random(shape, dtype=np.float32)
    for threads in (1, None):
        seconds = timed(lambda: convt.upsample(image, 2, kernel=arguments.kernel,
                                               num_threads=threads), arguments.repeat)
        rows.append((f"in memory, convt.upsample, {threads or 'all'} thread(s)", seconds))
    print()
    print("| run | seconds (median) | input Mvoxel/s | output GiB/s |")
    print("|---|---|---|---|")
    for label, seconds in rows:
        print(f"| {label} | {seconds:.3f} | {np.prod(shape) / seconds / 1e6:.0f} | "
              f"{output_bytes / seconds / 2**30:.2f} |")


if __name__ == "__main__":
    main()
