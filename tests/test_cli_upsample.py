"""python -m convt --version, --help and upsample (.npy, TIFF, progress bar, errors)."""

import subprocess
import sys

import numpy as np
import pytest

import convt
from _upsampling import assert_same_bits
from convt import _cli_upsample
from convt.__main__ import COMMANDS, main


def test_version_and_plain_text_help():
    version = subprocess.run([sys.executable, "-m", "convt", "--version"], capture_output=True,
                             text=True, timeout=120)
    assert version.returncode == 0 and version.stdout.strip() == f"convt {convt.__version__}"
    help_text = subprocess.run([sys.executable, "-m", "convt", "--help"], capture_output=True,
                               text=True, timeout=120).stdout
    assert "`" not in help_text
    lines = help_text.splitlines()
    for name, summary in COMMANDS.items():
        # each command on a line of its own, with the start of its one-line summary
        assert any(line.split()[:2] == [name] + summary.split()[:1] for line in lines if
                   line.strip()), (name, help_text)


def test_upsample_npy_equals_the_library_call(tmp_path, capsys):
    image = np.random.default_rng(0).random((30, 20)).astype(np.float32)
    np.save(tmp_path / "in.npy", image)
    status = main(["upsample", str(tmp_path / "in.npy"), str(tmp_path / "out.npy"), "--factor",
                   "3,2", "--kernel", "cubic", "--mode", "reflect"])
    assert status == 0
    result = np.load(tmp_path / "out.npy")
    expected = convt.upsample(image, (3, 2), kernel="cubic", mode="reflect")
    assert_same_bits(result, expected)
    assert "(90, 40)" in capsys.readouterr().out


def test_slabs_and_progress_bar(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(_cli_upsample, "slab_rows_for", lambda shape: 7)
    volume = (np.random.default_rng(1).random((9, 8, 6)) * 1000).astype(np.uint16)
    np.save(tmp_path / "in.npy", volume)
    status = main(["upsample", str(tmp_path / "in.npy"), str(tmp_path / "out.npy"), "--factor",
                   "2", "--progress", "always", "--threads", "1"])
    assert status == 0
    result = np.load(tmp_path / "out.npy")
    assert result.dtype == np.float32
    assert_same_bits(result, convt.upsample(volume, 2))
    bar = capsys.readouterr().err
    assert bar.count("\r") == 3 and "100%" in bar and bar.endswith("\n")  # 18 rows in 3 slabs


def test_upsample_tiff_rgb(tmp_path):
    tifffile = pytest.importorskip("tifffile")
    image = (np.random.default_rng(2).random((16, 12, 3)) * 255).astype(np.uint8)
    tifffile.imwrite(tmp_path / "in.tif", image)
    status = main(["upsample", str(tmp_path / "in.tif"), str(tmp_path / "out.tiff"), "--factor",
                   "2", "--channel-axis", "-1", "--dtype", "float64"])
    assert status == 0
    result = tifffile.imread(tmp_path / "out.tiff")
    expected = convt.upsample(image, 2, channel_axis=-1, dtype=np.float64)
    assert_same_bits(result, expected)


@pytest.mark.parametrize("arguments, message", [
    (["--factor", "2", "--mode", "mirror", "--axes", "0,0"], "must not repeat an axis"),
    (["--factor", "0"], "'factor'.*>= 1"),
    (["--factor", "2", "--threads", "0"], "--threads must be >= 1"),
])
def test_upsample_errors_are_one_line(tmp_path, capsys, arguments, message):
    np.save(tmp_path / "in.npy", np.ones((4, 4)))
    status = main(["upsample", str(tmp_path / "in.npy"), str(tmp_path / "out.npy"), *arguments])
    assert status == 2
    error = capsys.readouterr().err
    assert error.startswith("python -m convt upsample: error:")
    import re
    assert re.search(message, error)


def test_upsample_refuses_to_overwrite_and_unknown_files(tmp_path, capsys):
    np.save(tmp_path / "in.npy", np.ones((4, 4)))
    np.save(tmp_path / "out.npy", np.zeros(1))
    assert main(["upsample", str(tmp_path / "in.npy"), str(tmp_path / "out.npy"), "--factor",
                 "2"]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert np.load(tmp_path / "out.npy").shape == (1,)
    assert main(["upsample", str(tmp_path / "in.npy"), str(tmp_path / "out.png"), "--factor",
                 "2"]) == 2
    assert "use .npy, .tif or .tiff" in capsys.readouterr().err
    assert main(["upsample", str(tmp_path / "missing.npy"), str(tmp_path / "o.npy"),
                 "--factor", "2"]) == 2
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["upsample", str(tmp_path / "in.npy"), str(tmp_path / "o.npy"), "--factor", "x"])
    assert exit_info.value.code == 2
