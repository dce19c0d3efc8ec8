"""What an installation needs: the error when the extension is missing, the licence."""

import pathlib
import sys

import pytest

import convt
from convt import _compiled

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_a_missing_extension_says_how_to_build_it(monkeypatch):
    # None in sys.modules makes the import fail as an unbuilt checkout's does (and the
    # package attribute and load()'s own reference, set by an earlier import, must go too)
    monkeypatch.setitem(sys.modules, "convt._kernels", None)
    monkeypatch.delattr(convt, "_kernels", raising=False)
    monkeypatch.setattr(_compiled, "_kernels", None)
    with pytest.raises(ImportError) as error:
        _compiled.load()
    message = str(error.value)
    assert "convt._kernels" in message
    if (ROOT / "convt" / "_kernels.pyx").exists() and _compiled.__file__.startswith(str(ROOT)):
        assert "pip install -e ." in message and "C compiler" in message
    else:
        assert "pip install --force-reinstall" in message


def test_the_extension_loads():
    assert hasattr(_compiled.load(), "GemmEngine")


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(), reason="needs the source tree")
def test_the_licence_the_metadata_names_is_there():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'license = "BSD-3-Clause"' in text and 'license-files = ["LICENSE"]' in text
    assert (ROOT / "LICENSE").read_text().startswith("BSD 3-Clause License")
