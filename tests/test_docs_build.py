"""The documentation builds with no warning (python -m sphinx -W), gallery included.

Skipped unless the 'docs' extra is installed (Sphinx is not in the 'test' extra).
The build runs on a copy of docs/, so the source tree gets no generated files.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GENERATED = ("_build", "generated", "auto_examples", "sg_execution_times.rst")


def test_sphinx_build_has_no_warnings(tmp_path):
    for module in ("sphinx", "numpydoc", "sphinx_gallery", "myst_parser", "matplotlib",
                   "skimage", "dask", "onnx"):
        pytest.importorskip(module)
    shutil.copytree(ROOT / "docs", tmp_path / "docs", ignore=shutil.ignore_patterns(*GENERATED))
    shutil.copy(ROOT / "CITATION.cff", tmp_path / "CITATION.cff")
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         str(tmp_path / "docs"), str(tmp_path / "html")],
        capture_output=True, text=True, timeout=600, env={**os.environ, "MPLBACKEND": "Agg"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for page in ("index", "api", "upsampling", "translation", "changelog", "README",
                 "generated/convt.upsample", "generated/convt.kernels", "generated/convt.dask",
                 "auto_examples/plot_upsample_image"):
        assert (tmp_path / "html" / f"{page}.html").exists(), page
