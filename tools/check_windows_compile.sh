#!/usr/bin/env bash
# Windows readiness of convt's C code, checked with clang on any OS:
#
#  1. every convt/src/*.c compiles for clang-cl's targets, x86_64- and
#     aarch64-pc-windows-msvc (MSVC mode: _MSC_VER defined, MS extensions);
#  2. the same with __clang__ undefined: the branches MSVC's cl.exe takes
#     (no target attributes: the x86 extensions are enabled for the whole file
#     instead, as cl.exe accepts intrinsics anywhere; no vector extensions);
#  3. the headers the Cython drivers include (records.h, pool.h);
#  4. no OpenMP in the C that Cython generates from the drivers (convt's
#     threads come from its own pool, convt/src/pool.c, Win32 threads on
#     Windows), when Cython is installed.
#
# The MSVC C runtime and Windows SDK headers are not needed:
# tools/msvc_stand_ins declares the few functions the sources and clang's own
# headers use.  What this cannot check: cl.exe's own front end and headers
# (its arm_neon.h types are unions, for instance) and linking.
#
# Usage: tools/check_windows_compile.sh     (CLANG=clang-19 PYTHON=python3.12 to choose)
# Exit status 0 when everything compiles; warnings are shown, errors fail.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/convt/src
stand_ins=$root/tools/msvc_stand_ins
clang=${CLANG:-$(command -v clang || ls /usr/bin/clang-[0-9]* 2>/dev/null | sort -V | tail -1)}
python=${PYTHON:-$(command -v python3 || command -v python)}
if [ -z "$clang" ] || ! "$clang" --version >/dev/null 2>&1; then
    echo "check_windows_compile: no clang found (set CLANG=...)" >&2
    exit 2
fi
echo "$("$clang" --version | head -1)"

common=(-fsyntax-only -fms-extensions -fms-compatibility -nostdlibinc -isystem "$stand_ins"
        -I"$src" -Wall -Wextra -Werror=implicit-function-declaration
        -Werror=incompatible-pointer-types -Werror=int-conversion)
# cl.exe's view: not clang, features for the whole file instead of target attributes
as_cl=(-U__clang__ -Wno-builtin-macro-redefined)
x86_features=(-mavx2 -mfma -mf16c -mavx512f -mavx512vl -mxsave)
failures=0

check() {  # description, then the compiler arguments
    local what=$1; shift
    local output
    if output=$("$clang" "${common[@]}" "$@" 2>&1); then
        echo "ok    $what${output:+ (warnings below)}"
    else
        echo "FAIL  $what"
        failures=$((failures + 1))
    fi
    [ -n "$output" ] && echo "$output" | sed 's/^/      /'
}

for target in x86_64-pc-windows-msvc aarch64-pc-windows-msvc; do
    features=()
    [ "$target" = x86_64-pc-windows-msvc ] && features=("${x86_features[@]}")
    for file in "$src"/*.c; do
        name=${file#"$root"/}
        check "$(printf '%-8s %-23s %s' clang-cl "$target" "$name")" --target="$target" "$file"
        check "$(printf '%-8s %-23s %s' cl.exe "$target" "$name")" --target="$target" \
            "${as_cl[@]}" "${features[@]}" "$file"
    done
    for mode in clang-cl cl.exe; do
        extra=()
        [ "$mode" = cl.exe ] && extra=("${as_cl[@]}")
        check "$(printf '%-8s %-23s %s' "$mode" "$target" "convt/src/records.h, pool.h")" \
            --target="$target" "${extra[@]}" -x c - \
            <<<$'#include "records.h"\n#include "pool.h"\nint probe(void) { return (int)convt_seconds(); }'
    done
done

if "$python" -c "import Cython" 2>/dev/null; then
    generated=$(mktemp -d)/_kernels.c
    if ! "$python" -m cython -3 -I "$root/convt" "$root/convt/_kernels.pyx" -o "$generated" >/dev/null; then
        echo "FAIL  cython could not translate convt/_kernels.pyx"
        failures=$((failures + 1))
    elif grep -n -E '#pragma omp|omp_[a-z_]+\(' "$generated" | head -5 | grep .; then
        echo "FAIL  the Cython drivers use OpenMP (lines above); threads come from convt/src/pool.c"
        failures=$((failures + 1))
    else
        echo "ok    the Cython drivers use no OpenMP"
    fi
    rm -rf "$(dirname "$generated")"
else
    echo "skip  the Cython drivers: Cython is not installed for $python"
fi

if [ "$failures" -gt 0 ]; then
    echo "check_windows_compile: $failures check(s) failed"
    exit 1
fi
echo "check_windows_compile: all checks passed"
