"""Worker processes: each engine runs alone in its own process, driven over a pipe.

A `Worker` spawns a fresh interpreter (multiprocessing's "spawn" context,
never fork, so no thread pool or library state is inherited) that imports a
tasks module and answers `(task, args)` messages with the result of
`module.TASKS[task](*args)`. The process stays alive across calls, so an
engine is imported and its thread pools are created once per run.

The thread-count environment variables (OMP_NUM_THREADS and the BLAS ones)
are set for the worker before it starts, so every runtime in it sizes its
pools for that count; `threads=None` leaves the environment as it is (the
engine's defaults).

A task that raises is reported back as `TaskFailed` with a one-line reason;
a worker that dies or stops answering raises `WorkerFailed` and is started
again on the next call.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
from contextlib import contextmanager

THREAD_ENVIRONMENT = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
CALL_TIMEOUT_SECONDS = 600.0
STOP_TIMEOUT_SECONDS = 10.0


class Unavailable(RuntimeError):
    """An expected reason why something cannot run here; its message is shown as is."""


class TaskFailed(RuntimeError):
    """A task raised in the worker; the message is the one-line reason."""


class WorkerFailed(RuntimeError):
    """The worker process died or stopped answering."""


def describe_failure(exc: BaseException, limit: int = 160) -> str:
    """One short line explaining why something could not run."""
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    if not isinstance(exc, (Unavailable, TaskFailed, WorkerFailed)):
        text = f"{type(exc).__name__}: {text}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


@contextmanager
def thread_environment(threads: int | None):
    """Set THREAD_ENVIRONMENT to `threads` in this process while the block runs."""
    if threads is None:
        yield
        return
    saved = {name: os.environ.get(name) for name in THREAD_ENVIRONMENT}
    os.environ.update({name: str(threads) for name in THREAD_ENVIRONMENT})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def serve(connection, tasks_module: str) -> None:
    """The worker's main loop: answer (task, args) messages until None or EOF."""
    tasks = importlib.import_module(tasks_module).TASKS
    while True:
        try:
            message = connection.recv()
        except EOFError:
            return
        if message is None:
            return
        task, args = message
        try:
            reply = ("ok", tasks[task](*args))
        except Exception as exc:  # report every failure, keep serving
            reply = ("error", describe_failure(exc))
        connection.send(reply)


class Worker:
    """One worker process running the TASKS of `tasks_module` with `threads` threads.

    >>> worker = Worker("peaks", "peaks", threads=1)   # doctest: +SKIP
    >>> worker.call("matmul_rates", 1)                 # doctest: +SKIP
    {'float32': 95.9, 'float64': 48.2}
    """

    def __init__(self, label: str, tasks_module: str, threads: int | None) -> None:
        self.label = label
        self.tasks_module = tasks_module
        self.threads = threads
        self._process = None
        self._connection = None

    def start(self) -> None:
        """Spawn the process (a no-op if it is running)."""
        if self.alive:
            return
        context = multiprocessing.get_context("spawn")
        parent_end, child_end = context.Pipe()
        process = context.Process(
            target=serve, args=(child_end, self.tasks_module), name=self.label, daemon=True
        )
        with thread_environment(self.threads):
            process.start()
        child_end.close()
        self._process, self._connection = process, parent_end

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self.alive else None

    def call(self, task: str, *args, timeout: float = CALL_TIMEOUT_SECONDS):
        """Run `task(*args)` in the worker and return its result.

        Raises TaskFailed if the task raised, WorkerFailed if the process
        died or gave no answer within `timeout` seconds (it is then killed).
        """
        self.start()
        try:
            self._connection.send((task, args))
            if not self._connection.poll(timeout):
                self.kill()
                raise WorkerFailed(f"{self.label}: no answer after {timeout:.0f} s (killed)")
            status, value = self._connection.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError) as exc:
            code = self._reap()
            raise WorkerFailed(f"{self.label}: worker process died (exit code {code})") from exc
        if status == "error":
            raise TaskFailed(value)
        return value

    def stop(self) -> None:
        """Ask the process to exit, kill it if it does not, and reap it."""
        if self._process is None:
            return
        try:
            self._connection.send(None)
        except (BrokenPipeError, OSError):
            pass
        self._process.join(STOP_TIMEOUT_SECONDS)
        if self._process.is_alive():
            self.kill()
        self._reap()

    def kill(self) -> None:
        """Kill this worker's process (and only it)."""
        if self._process is not None and self._process.is_alive():
            self._process.kill()
        self._reap()

    def _reap(self) -> int | None:
        """Wait for the dead process, close the pipe, return its exit code."""
        if self._process is None:
            return None
        self._process.join(STOP_TIMEOUT_SECONDS)
        code = self._process.exitcode
        self._connection.close()
        self._process, self._connection = None, None
        return code
