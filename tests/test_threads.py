"""Results are bitwise identical for every num_threads; BLAS threads are restored."""

import os

import numpy as np
import pytest

from _helpers import DTYPES, ENGINE_CASES, ENGINES, engine_case, run_engine, wrap_engine_runs
from convt import ConvTranspose, _blas, _dispatch, _kernels

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(ENGINE_CASES))
def test_bitwise_identical_across_thread_counts(name, engine, dtype, small_tiles):
    # small_tiles: hundreds of GEMM work items, so threads really share the work.
    x, w, b, spec = engine_case(name, dtype, seed=1)
    results = [run_engine(engine, x, w, b, num_threads=n, **spec) for n in (1, 2, 3, 7)]
    for other in results[1:]:
        assert np.array_equal(results[0].view(np.uint8), other.view(np.uint8))


def test_default_threads_are_the_cores_this_process_may_use(monkeypatch):
    for name in _dispatch.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert _dispatch.default_threads() == expected


@pytest.mark.parametrize("name", ["CONVT_NUM_THREADS", "OMP_NUM_THREADS"])
def test_default_threads_follow_the_environment(monkeypatch, name):
    for other in _dispatch.THREAD_VARIABLES:
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(name, "3,2")  # OMP's nested list: the first level counts
    assert _dispatch.default_threads() == 3
    monkeypatch.setenv(name, "zero")  # not a count: ignored
    assert _dispatch.default_threads() >= 1


def test_the_pool_shares_a_large_call_between_its_threads(monkeypatch):
    x = np.ones((1, 32, 64, 64), np.float32)
    w = np.ones((32, 32, 4, 4), np.float32)
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1), num_threads=2)
    used = []

    def count(run, *arguments):
        used.append(run(*arguments))
        return used[-1]

    wrap_engine_runs(monkeypatch, count)
    expected = layer.apply(x, w)
    assert used and 1 <= used[0] <= 2
    np.testing.assert_array_equal(expected, ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1),
                                                          num_threads=1).apply(x, w))


def test_blas_threads_are_restored_after_a_call():
    blas = _blas.controller()
    if blas.vendor is None:
        pytest.skip("no controllable BLAS found")
    before = blas.num_threads()
    x = np.ones((1, 64, 16, 16), np.float32)
    w = np.ones((64, 64, 2, 2), np.float32)
    ConvTranspose(strides=(2, 2)).apply(x, w)
    assert blas.num_threads() == before


def test_single_threaded_guard_is_reentrant():
    blas = _blas.controller()
    if blas.vendor is None:
        pytest.skip("no controllable BLAS found")
    before = blas.num_threads()
    with blas.single_threaded():
        with blas.single_threaded():
            assert blas.num_threads() == 1
        assert blas.num_threads() == 1
    assert blas.num_threads() == before


def test_preferred_kernel_set_runs_here():
    assert _dispatch.preferred_kernel_set() in _dispatch.available_kernel_sets()


@pytest.mark.parametrize("backend", _dispatch.available_kernel_sets() + ["no-such-kernel"])
def test_backend_override_by_environment(backend):
    import subprocess
    import sys

    code = (
        "import numpy as np\n"
        "from convt import ConvTranspose, explain\n"
        "layer = ConvTranspose(strides=(2, 2))\n"
        "x, w = np.ones((1, 16, 3, 3), np.float32), np.ones((16, 8, 2, 2), np.float32)\n"
        "y = layer.apply(x, w)\n"
        "print(explain(layer, x.shape, w.shape, x.dtype).decision.kernel_set, float(y.sum()))\n"
    )
    env = dict(__import__("os").environ, CONVT_GEMM_BACKEND=backend)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if backend == "no-such-kernel":
        assert result.returncode != 0
        assert "CONVT_GEMM_BACKEND='no-such-kernel' cannot be used here" in result.stderr
    else:
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == [backend, str(float(16 * 4 * 9 * 8))]


def test_calls_from_many_python_threads_at_once_are_right():
    # the pool serves one job at a time; the others run on their callers
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 16, 24, 24)).astype(np.float32)
    w = rng.standard_normal((16, 8, 4, 4)).astype(np.float32)
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1), num_threads=2)
    expected = layer.apply(x, w)
    with ThreadPoolExecutor(6) as executor:
        results = list(executor.map(lambda _: layer.apply(x, w), range(60)))
    for result in results:
        np.testing.assert_array_equal(result, expected)


@pytest.mark.skipif(
    not {"avx2", "avx512"} <= set(_dispatch.available_kernel_sets()), reason="needs AVX2 and AVX-512"
)
def test_shallow_reductions_run_avx2_unless_avx512_is_requested(monkeypatch):
    from convt import _engine

    def kernel_set(cg, environ):
        x = np.empty((1, cg, 8, 8), np.float32)
        w = np.empty((cg, 1, 4, 4), np.float32)  # k4 s2: a stack of 4 taps per input channel
        layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1))
        geometry = layer._geometry_for(x.shape, w.shape)
        problem = _engine.problem_of(x, w, np.empty((1, 1, 16, 16), np.float32), geometry, 1)
        return _dispatch.decide(problem, engine="gemm", environ=environ).kernel_set

    monkeypatch.setattr(_dispatch, "preferred_kernel_set", lambda: "avx512")
    assert kernel_set(1, {}) == "avx2"       # depth 4
    assert kernel_set(15, {}) == "avx2"      # depth 60
    assert kernel_set(16, {}) == "avx512"    # depth 64
    assert kernel_set(1, {_dispatch.KERNEL_SET_VARIABLE: "avx512"}) == "avx512"


def test_a_worker_stalled_in_an_item_marks_the_cores_contended():
    # the caller runs out of items after about 7 ms and waits ~25 ms for the worker
    used = _kernels._run_stalled_job(8, 1e-3, 30e-3)
    if used < 2:
        pytest.skip("the worker did not start within the job (machine too busy to stage it)")
    assert _kernels.pool_contended(2)
    if _dispatch.default_threads() > 1:
        assert _dispatch.resolve_threads(None, 8, 1000 * _dispatch.MIN_MULTIPLY_ADDS_PER_THREAD) > 1
    assert _dispatch.resolve_threads(None, 8, _dispatch.CONTENDED_MAX_MULTIPLY_ADDS - 1) == 1


@pytest.mark.skipif(not os.path.exists("/proc/loadavg"), reason="reads /proc/loadavg (Linux)")
def test_other_runnable_threads_on_every_core_mark_the_cores_contended():
    import multiprocessing
    import time

    context = multiprocessing.get_context("spawn")
    spinners = [context.Process(target=_spin, daemon=True) for _ in range(os.cpu_count())]
    for spinner in spinners:
        spinner.start()
    try:
        # spawned interpreters take 0.1-1 s to start spinning on a busy host: read
        # until they show, for at most 10 s
        deadline = time.monotonic() + 10
        contended = False
        while not contended and time.monotonic() < deadline:
            time.sleep(0.03)  # the pool reads the runnable threads at most every 20 ms
            contended = _kernels.pool_contended(2)
        assert contended
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.join()


def _spin():
    while True:
        pass
