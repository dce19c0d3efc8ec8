"""The C sources compile for Windows: clang-cl's targets (x86_64 and ARM64),
cl.exe's branches, the thread pool's Win32 branch, no OpenMP
(tools/check_windows_compile.sh).

Needs clang and a source checkout (the script and convt/src); skipped otherwise.
"""

import glob
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "check_windows_compile.sh"


def _clang():
    versioned = sorted(glob.glob("/usr/bin/clang-[0-9]*"))
    return shutil.which("clang") or (versioned[-1] if versioned else None)


@pytest.mark.skipif(not SCRIPT.exists() or not (ROOT / "convt" / "src").is_dir(),
                    reason="needs a source checkout (tools/, convt/src/)")
@pytest.mark.skipif(shutil.which("bash") is None, reason="the check is a bash script")
@pytest.mark.skipif(_clang() is None, reason="clang is not installed")
def test_c_sources_compile_for_windows():
    result = subprocess.run(
        ["bash", str(SCRIPT)], capture_output=True, text=True, timeout=600,
        env={**os.environ, "CLANG": _clang(), "PYTHON": sys.executable})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all checks passed" in result.stdout
