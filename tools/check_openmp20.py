"""Check that C files use OpenMP 2.0 only (MSVC's ``/openmp``).

Usage: ``python tools/check_openmp20.py FILE.c ...`` (the Cython-generated
drivers, convt's headers).  Every ``#pragma omp`` must consist of OpenMP 2.0
directives and clauses (for C; schedule kinds and reduction operators of 2.0),
and every ``omp_*`` function called must belong to OpenMP 2.0's run-time API.
Prints one line per violation and exits 1 if there is any.
"""

import re
import sys

DIRECTIVES = {"parallel", "for", "sections", "section", "single", "master", "critical",
              "barrier", "atomic", "flush", "ordered", "threadprivate"}
CLAUSES = {"private", "firstprivate", "lastprivate", "shared", "default", "reduction",
           "copyin", "copyprivate", "schedule", "nowait", "num_threads", "if", "ordered"}
SCHEDULES = {"static", "dynamic", "guided", "runtime"}
REDUCTIONS = {"+", "*", "-", "&", "|", "^", "&&", "||"}
FUNCTIONS = {
    "omp_set_num_threads", "omp_get_num_threads", "omp_get_max_threads",
    "omp_get_thread_num", "omp_get_num_procs", "omp_in_parallel", "omp_set_dynamic",
    "omp_get_dynamic", "omp_set_nested", "omp_get_nested", "omp_init_lock",
    "omp_destroy_lock", "omp_set_lock", "omp_unset_lock", "omp_test_lock",
    "omp_init_nest_lock", "omp_destroy_nest_lock", "omp_set_nest_lock",
    "omp_unset_nest_lock", "omp_test_nest_lock", "omp_get_wtime", "omp_get_wtick",
}


def pragmas(text):
    """The text after ``#pragma omp`` of every OpenMP pragma, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", text)
    return re.findall(r"^[ \t]*#[ \t]*pragma[ \t]+omp[ \t]+(.*)$", joined, re.MULTILINE)


def items(pragma):
    """(name, argument or None) of each directive word and clause of a pragma."""
    found, at = [], 0
    while at < len(pragma):
        match = re.compile(r"\s*,?\s*(\w+)\s*").match(pragma, at)
        if not match:
            raise ValueError(f"cannot read {pragma[at:]!r}")
        name, at = match.group(1), match.end()
        argument = None
        if at < len(pragma) and pragma[at] == "(":
            depth, start = 0, at
            for at in range(start, len(pragma)):
                depth += {"(": 1, ")": -1}.get(pragma[at], 0)
                if depth == 0:
                    break
            argument, at = pragma[start + 1:at], at + 1
        found.append((name, argument))
    return found


def problems(pragma):
    """What in one pragma is not OpenMP 2.0."""
    found = []
    for name, argument in items(pragma):
        if name not in DIRECTIVES | CLAUSES:
            found.append(f"'{name}' is not an OpenMP 2.0 directive or clause")
        elif name == "schedule":
            kind = argument.split(",")[0].strip()
            if kind not in SCHEDULES:
                found.append(f"schedule({kind}) is not OpenMP 2.0")
        elif name == "reduction":
            operator = argument.split(":")[0].strip()
            if operator not in REDUCTIONS:
                found.append(f"reduction({operator}:...) is not OpenMP 2.0 (min/max are 3.1)")
        elif name == "default" and argument.strip() not in ("shared", "none"):
            found.append(f"default({argument.strip()}) is not OpenMP 2.0")
    return found


def main(paths):
    failures = 0
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
        found = pragmas(text)
        wrong = [f"#pragma omp {pragma.strip()}: {problem}"
                 for pragma in found for problem in problems(pragma)]
        called = set(re.findall(r"\b(omp_\w+)\s*\(", text))
        wrong += [f"{function}() is not in OpenMP 2.0's run-time API"
                  for function in sorted(called - FUNCTIONS)]
        for problem in wrong:
            print(f"{path}: {problem}")
        print(f"{path}: {len(found)} OpenMP pragmas, run-time functions "
              f"{', '.join(sorted(called)) or 'none'}: "
              f"{'NOT OpenMP 2.0' if wrong else 'OpenMP 2.0 only'}")
        failures += len(wrong)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
