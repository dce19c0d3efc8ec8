"""The machine's FMA peak (register-only loops in fma_peak.c) and NumPy's matmul rate.

The FMA peak is what the cores can issue: `fma_peak.c` is compiled at run
time with the system C compiler (`$CC`, else `cc`; -O2 -fopenmp) and loaded
with ctypes. For each x86 kernel set the CPU has (AVX-512 zmm, AVX2 ymm) and
each of float32 and float64, the loop runs on T threads; GFLOP/s =
2 (multiply and add) x lanes x FMAs per iteration x iterations x T / seconds.
The best of FMA_REPEAT runs is kept: a peak is the capability, not the
typical rate of a shared machine.

NumPy's float32/float64 matmul rate (2048 x 2048) is kept for information
only: on CPUs with full-width 512-bit FMAs, sgemm reaches well under the FMA
peak, so it is no roofline.

Run alone: `python benchmarks/peaks.py [--threads N]`.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

from workers import Unavailable

SOURCE = Path(__file__).resolve().parent / "fma_peak.c"
KERNEL_SETS: dict[str, int] = {"avx512": 0, "avx2": 1}  # the enums of fma_peak.c
DTYPES: dict[str, int] = {"float32": 0, "float64": 1}
VECTOR_BITS: dict[str, int] = {"avx512": 512, "avx2": 256}
FMA_SECONDS = 0.1  # length of one timed run of the loop
FMA_REPEAT = 5
MATMUL_SIZE = 2048
MATMUL_REPEAT = 7


@functools.cache
def fma_library() -> ctypes.CDLL:
    """fma_peak.c compiled into a temporary shared library and loaded.

    Raises Unavailable (with the compiler's message) on a non-x86 machine or
    when no C compiler with OpenMP is found.
    """
    if platform.machine().lower() not in ("x86_64", "amd64", "i686", "i386"):
        raise Unavailable(f"the FMA loops are x86 code; this machine is {platform.machine()}")
    compiler = os.environ.get("CC", "cc")
    if shutil.which(compiler) is None:
        raise Unavailable(f"no C compiler {compiler!r} on PATH (set CC)")
    with tempfile.TemporaryDirectory(prefix="convt-fma-", ignore_cleanup_errors=True) as directory:
        library = Path(directory) / "fma_peak.so"
        command = [compiler, "-O2", "-fopenmp", "-shared", "-fPIC", "-o", str(library), str(SOURCE)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise Unavailable(f"{' '.join(command)} failed: {done.stderr.strip()[:300]}")
        handle = ctypes.CDLL(str(library))  # stays mapped once the file is gone
    handle.fma_run_seconds.restype = ctypes.c_double
    handle.fma_run_seconds.argtypes = [
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
        ctypes.POINTER(ctypes.c_double),
    ]
    return handle


def supported_kernel_sets() -> list[str]:
    """The kernel sets of KERNEL_SETS this CPU and OS run, best first."""
    library = fma_library()
    return [name for name, code in KERNEL_SETS.items() if library.fma_kernel_supported(code)]


def fma_seconds(kernel_set: str, dtype: str, threads: int, iterations: int) -> float:
    """Wall seconds of one run of the loop on `threads` threads."""
    checksum = ctypes.c_double()
    seconds = fma_library().fma_run_seconds(
        KERNEL_SETS[kernel_set], DTYPES[dtype], threads, iterations, ctypes.byref(checksum)
    )
    if seconds <= 0:
        raise RuntimeError(f"fma_run_seconds({kernel_set}, {dtype}) returned {seconds}")
    return seconds


def fma_gflops(kernel_set: str, dtype: str, threads: int) -> float:
    """Best GFLOP/s of FMA_REPEAT runs of about FMA_SECONDS each."""
    if kernel_set not in supported_kernel_sets():
        raise Unavailable(f"this CPU has no {kernel_set}")
    iterations = 100_000
    while (seconds := fma_seconds(kernel_set, dtype, threads, iterations)) < FMA_SECONDS / 4:
        iterations *= 4  # also warms the cores up to their sustained clock
    iterations = int(iterations * FMA_SECONDS / seconds)
    best = min(fma_seconds(kernel_set, dtype, threads, iterations) for _ in range(FMA_REPEAT))
    lanes = VECTOR_BITS[kernel_set] // (32 if dtype == "float32" else 64)
    fmas = fma_library().fma_per_iteration() * iterations * threads
    return 2 * lanes * fmas / best / 1e9


def fma_peaks(threads: int) -> dict[str, dict[str, float]]:
    """Worker task: {kernel set: {dtype: GFLOP/s}} on `threads` threads, for every
    kernel set this CPU runs; raises Unavailable if none can be measured."""
    return {
        kernel_set: {dtype: fma_gflops(kernel_set, dtype, threads) for dtype in DTYPES}
        for kernel_set in supported_kernel_sets()
    }


def matmul_gflops(dtype: str, threads: int) -> float:
    """NumPy square matmul GFLOP/s (median of MATMUL_REPEAT), BLAS at `threads`."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    a = rng.standard_normal((MATMUL_SIZE, MATMUL_SIZE)).astype(dtype)
    b = rng.standard_normal((MATMUL_SIZE, MATMUL_SIZE)).astype(dtype)
    with threadpool_limits(limits=threads):
        a @ b  # warm-up
        seconds = []
        for _ in range(MATMUL_REPEAT):
            start = time.perf_counter()
            a @ b
            seconds.append(time.perf_counter() - start)
    return 2 * MATMUL_SIZE**3 / statistics.median(seconds) / 1e9


def matmul_rates(threads: int) -> dict[str, float]:
    """Worker task: {dtype: NumPy matmul GFLOP/s} for float32 and float64 at `threads`."""
    return {dtype: matmul_gflops(dtype, threads) for dtype in DTYPES}


TASKS: dict[str, Callable] = {"fma_peaks": fma_peaks, "matmul_rates": matmul_rates}


def best_peak(peaks: dict[str, dict[str, float]], dtype: str) -> tuple[str, float] | None:
    """(kernel set, GFLOP/s) of the fastest kernel set for `dtype`'s accumulation type.

    float64 is compared with the float64 peak; float32, float16 and bfloat16
    (accumulated in float32) with the float32 peak.
    """
    accumulation = "float64" if dtype == "float64" else "float32"
    rates = [(kernel_set, by_dtype[accumulation]) for kernel_set, by_dtype in peaks.items()]
    return max(rates, key=lambda item: item[1]) if rates else None


def main(argv: list[str] | None = None) -> None:
    """Print the FMA peaks and the matmul rates at N threads and at 1 thread."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args(argv)
    for threads in sorted({args.threads, 1}, reverse=True):
        for kernel_set, rates in fma_peaks(threads).items():
            print(
                f"FMA {kernel_set:<6} {threads} thread(s): "
                + ", ".join(f"{dtype} {gflops:.1f} GFLOP/s" for dtype, gflops in rates.items())
            )
        print(
            f"NumPy matmul {threads} thread(s): "
            + ", ".join(f"{dtype} {gflops:.1f} GFLOP/s" for dtype, gflops in matmul_rates(threads).items())
        )


if __name__ == "__main__":
    main()
