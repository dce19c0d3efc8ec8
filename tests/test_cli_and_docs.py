"""The command line (python -m convt) and every docstring example."""

import doctest
import subprocess
import sys
from pathlib import Path

import pytest

import convt


def _run(*arguments):
    return subprocess.run([sys.executable, "-m", "convt", *arguments], capture_output=True,
                          text=True, timeout=300)


def test_demo_reports_shapes_time_and_error():
    result = _run("demo")
    assert result.returncode == 0, result.stderr
    assert "(1, 1, 512, 512)" in result.stdout and "(1, 1, 1024, 1024)" in result.stdout
    assert " ms " in result.stdout
    error = float(result.stdout.rsplit(":", 1)[1])
    assert error < 1e-5


def test_info_reports_version_dtypes_threads_kernel_sets_and_a_decision():
    from convt import _dispatch

    result = _run("info")
    assert result.returncode == 0, result.stderr
    assert f"convt {convt.__version__}" in result.stdout
    assert "float16, bfloat16, float32, float64" in result.stdout
    assert "threads:" in result.stdout and "BLAS:" in result.stdout
    for family in _dispatch.families():
        assert f"{family.name}: {'available' if family.available else 'not on this CPU'}" \
            in result.stdout
    assert f"preferred kernel set: {_dispatch.preferred_kernel_set()}" in result.stdout
    assert "sample call:" in result.stdout and "engine gemm" in result.stdout


def test_unknown_command_is_a_usage_error():
    result = _run("nonsense")
    assert result.returncode == 2 and "invalid choice" in result.stderr


@pytest.mark.parametrize("name", ["convt", "convt._estimator", "convt._conv", "convt._geometry",
                                  "convt._frontend", "convt.onnx",
                                  "convt.openvino", "convt.onednn"])
def test_docstring_examples(name):
    import importlib

    if name == "convt.onnx":
        pytest.importorskip("onnx")
    module = importlib.import_module(name)
    failures, tried = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert tried > 0 and failures == 0


ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("page", ["README.md", "docs/README.md"])
def test_documentation_examples(page):
    # every `>>>` example of the README and of the documentation runs as shown
    failures, tried = doctest.testfile(str(ROOT / page), module_relative=False,
                                       optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert tried > 0 and failures == 0
