#!/usr/bin/env bash
# The test suite under AddressSanitizer and UndefinedBehaviorSanitizer.
#
# Copies the tracked files of this checkout to a temporary directory, builds the
# extension there with CONVT_SANITIZE=address,undefined (setup.py adds the
# sanitizer flags, -O1 -g and frame pointers, and does not strip), and runs
# pytest on that copy with the ASan runtime preloaded into the interpreter.
# Any sanitizer report stops the run with a non-zero status.
#
# Usage: tools/sanitize.sh [pytest arguments]
#        default: the kernel, hostile-input, exactness, thread and process tests
#        e.g.     tools/sanitize.sh tests/                 (everything: ~10x slower)
#        CC=clang tools/sanitize.sh                       (clang's runtimes)
#        CONVT_SANITIZE=undefined tools/sanitize.sh       (one sanitizer)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
cc=${CC:-gcc}
sanitizers=${CONVT_SANITIZE:-address,undefined}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

git -C "$root" ls-files -z | (cd "$root" && xargs -0 cp --parents -t "$work")
cd "$work"
echo "sanitize: building with -fsanitize=$sanitizers ($cc)"
CC=$cc CONVT_SANITIZE=$sanitizers "$python" setup.py build_ext --inplace -q 2>&1 | grep -v '^running\|^copying' || true

preload=""
if [[ $sanitizers == *address* ]]; then
    preload=$("$cc" -print-file-name=libasan.so)
    [ -f "$preload" ] || { echo "sanitize: no libasan.so for $cc" >&2; exit 2; }
fi
if [[ $sanitizers == *undefined* ]] && [[ $cc == *clang* ]]; then
    preload="$preload $("$cc" -print-file-name=libclang_rt.ubsan_standalone-x86_64.so)"
fi
# Python's allocator and interned objects live as long as the process: leak
# reports would be about the interpreter, not convt.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:strict_string_checks=1:check_initialization_order=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export PYTHONMALLOC=malloc            # every Python allocation visible to ASan
export CONVT_HYPOTHESIS_EXAMPLES=${CONVT_HYPOTHESIS_EXAMPLES:-60}
# OpenVINO's, onnxruntime's and PyTorch's native code aborts under a preloaded ASan:
# their differential tests skip (tests/conftest.py)
export CONVT_TEST_WITHOUT_RUNTIMES=1
if [ "$#" -eq 0 ]; then
    set -- tests/test_kernels.py tests/test_hostile.py tests/test_exact.py tests/test_pairs.py \
           tests/test_threads.py tests/test_processes.py tests/test_conv.py tests/test_float16.py
fi
echo "sanitize: pytest $*"
# the documentation build runs Sphinx and its extensions, no convt C code of its own
LD_PRELOAD=$preload "$python" -m pytest -q -x -p no:cacheprovider \
    --ignore=tests/test_docs_build.py "$@"
echo "sanitize: no report from $sanitizers"
