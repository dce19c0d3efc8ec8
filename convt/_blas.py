"""The BLAS behind ``scipy.linalg.cython_blas`` and control of its threads.

convt's GEMM engine calls BLAS from inside its own threads, one GEMM
per tile.  A BLAS that also starts threads would oversubscribe the cores, so
while convt computes, the BLAS is held at one thread and then restored.  The
library is found the way threadpoolctl finds it (by the loaded library's
exported symbols), without depending on threadpoolctl.  When no known BLAS is
found (Accelerate, for instance, manages its own threads), nothing is changed.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import sys

from ._locks import ForkSafeLock

# (vendor, setter, getter, config) symbol names, most specific first.
_VENDORS = (
    ("OpenBLAS", "scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_",
     "scipy_openblas_get_config64_"),
    ("OpenBLAS", "scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads",
     "scipy_openblas_get_config"),
    ("OpenBLAS", "openblas_set_num_threads64_", "openblas_get_num_threads64_",
     "openblas_get_config64_"),
    ("OpenBLAS", "openblas_set_num_threads", "openblas_get_num_threads", "openblas_get_config"),
    ("MKL", "MKL_Set_Num_Threads", "MKL_Get_Max_Threads", None),
    ("BLIS", "bli_thread_set_num_threads", "bli_thread_get_num_threads", None),
)


def _loaded_library_paths():
    """Shared libraries mapped into this process that may be a BLAS (Linux)."""
    try:
        with open("/proc/self/maps") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return []
    paths = []
    for line in lines:
        fields = line.split(None, 5)
        path = fields[5].strip() if len(fields) == 6 else ""
        name = os.path.basename(path).lower()
        if any(key in name for key in ("blas", "mkl", "blis")) and path not in paths:
            paths.append(path)
    return paths


def _bundled_library_paths():
    """BLAS libraries shipped inside scipy's wheels (macOS, Windows, Linux)."""
    import scipy

    root = os.path.dirname(scipy.__file__)
    patterns = [
        os.path.join(root, os.pardir, "scipy.libs", "*blas*"),
        os.path.join(root, ".dylibs", "*blas*"),
        os.path.join(root, os.pardir, "scipy_openblas*", "lib", "*blas*"),
    ]
    found = []
    for pattern in patterns:
        found.extend(sorted(glob.glob(pattern)))
    return found


class BlasThreads:
    """Finds the BLAS in use and limits its threads while convt computes."""

    def __init__(self):
        self.vendor = None
        self.path = None
        self._set = self._get = self._config = None
        self._lock = ForkSafeLock()
        self._users = 0
        self._saved = None
        self._locate()

    def _locate(self):
        import scipy.linalg.cython_blas  # noqa: F401  (make sure the BLAS is loaded)

        # the BLAS library itself first: a module linked to it also resolves its symbols
        candidates = sorted(_loaded_library_paths() + _bundled_library_paths(),
                            key=lambda path: "openblas" not in os.path.basename(path).lower())
        for path in candidates:
            if path.lower().endswith((".a", ".lib", ".h")):
                continue
            try:
                library = ctypes.CDLL(path)
            except OSError:
                continue
            for vendor, setter, getter, config in _VENDORS:
                if hasattr(library, setter) and hasattr(library, getter):
                    self.vendor, self.path = vendor, path
                    self._set = getattr(library, setter)
                    self._set.argtypes = [ctypes.c_int]
                    self._set.restype = None
                    self._get = getattr(library, getter)
                    self._get.restype = ctypes.c_int
                    if config and hasattr(library, config):
                        self._config = getattr(library, config)
                        self._config.restype = ctypes.c_char_p
                    return

    def num_threads(self):
        """Threads the BLAS uses now, or None if unknown."""
        return None if self._get is None else int(self._get())

    def config(self):
        """The BLAS's own description of its build, when it gives one."""
        if self._config is None:
            return None
        return self._config().decode("ascii", "replace").strip()

    def reset_in_child(self):
        """After fork(): the BLAS's own thread count back if a parent thread's call
        had lowered it (the child has no such call to restore it; the lock renews
        itself)."""
        if self._users and self._saved not in (None, 1) and self._set is not None:
            self._set(self._saved)
        self._users = 0

    @contextlib.contextmanager
    def single_threaded(self):
        """Hold the BLAS at one thread for the duration (re-entrant, thread-safe)."""
        if self._set is None:
            yield
            return
        with self._lock:
            if self._users == 0:
                self._saved = int(self._get())
                if self._saved != 1:
                    self._set(1)
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0 and self._saved not in (None, 1):
                    self._set(self._saved)


_CONTROLLER = None


def controller():
    """The process-wide BlasThreads instance (created on first use)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        _CONTROLLER = BlasThreads()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_CONTROLLER.reset_in_child)
    return _CONTROLLER


def describe():
    """One line naming the BLAS, its threads and its build, for ``python -m convt info``."""
    blas = controller()
    if blas.vendor is None:
        return f"unknown (scipy.linalg.cython_blas on {sys.platform}; thread count not controlled)"
    parts = [blas.vendor, f"{blas.num_threads()} threads"]
    if blas.config():
        parts.append(blas.config())
    parts.append(os.path.basename(blas.path))
    return ", ".join(parts)
