"""Build script for convt's compiled kernels.

OpenMP is detected by compiling a probe program with the flags each compiler
family uses. Without OpenMP the extension is still built, serially, with a
warning: a missing OpenMP must never fail an install.
"""

import glob
import os
import shutil
import sys
import tempfile
import textwrap
import warnings

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

OPENMP_PROBE = textwrap.dedent(
    """
    #include <omp.h>
    int main(void) {
        int n = 0;
        #pragma omp parallel reduction(+:n)
        n += 1;
        return omp_get_max_threads() > 0 && n > 0 ? 0 : 1;
    }
    """
)


def openmp_flag_candidates(compiler_type):
    """Compile and link flags to try, in order, for this compiler family."""
    if compiler_type == "msvc":
        return [(["/openmp"], [])]
    candidates = [(["-fopenmp"], ["-fopenmp"])]
    if sys.platform == "darwin":
        # Apple clang needs the preprocessor flag and Homebrew's libomp.
        for prefix in ("/opt/homebrew/opt/libomp", "/usr/local/opt/libomp"):
            candidates.append(
                (
                    ["-Xpreprocessor", "-fopenmp", f"-I{prefix}/include"],
                    [f"-L{prefix}/lib", "-lomp"],
                )
            )
    return candidates


def probe_openmp(compiler):
    """Return (compile_args, link_args) that build an OpenMP program, or None."""
    if os.environ.get("CONVT_DISABLE_OPENMP"):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "probe.c")
        with open(source, "w") as handle:
            handle.write(OPENMP_PROBE)
        for compile_args, link_args in openmp_flag_candidates(compiler.compiler_type):
            try:
                objects = compiler.compile([source], output_dir=tmp, extra_postargs=compile_args)
                compiler.link_executable(
                    objects, "probe", output_dir=tmp, extra_postargs=link_args
                )
            except Exception:  # any compiler or linker failure means "not this flag"
                continue
            return compile_args, link_args
    return None


class BuildExtWithOpenMP(build_ext):
    """build_ext that adds OpenMP and optimisation flags the compiler accepts."""

    def build_extensions(self):
        compiler_type = self.compiler.compiler_type
        # -g0: Python's default CFLAGS carry -g; debug info would triple the wheel
        optimise = ["/O2"] if compiler_type == "msvc" else ["-O3", "-g0"]
        openmp = probe_openmp(self.compiler)
        if openmp is None:
            warnings.warn(
                "convt: no working OpenMP found for this compiler; building the "
                "kernels serially (results are identical, only slower). Install "
                "an OpenMP runtime (libgomp, libomp) and rebuild to use every core.",
                stacklevel=1,
            )
            compile_args, link_args = [], []
        else:
            compile_args, link_args = openmp
        for extension in self.extensions:
            extension.extra_compile_args = optimise + compile_args + extension.extra_compile_args
            extension.extra_link_args = link_args + extension.extra_link_args
        super().build_extensions()
        self._copy_into_source_tree()

    def _copy_into_source_tree(self):
        """Also place built extensions next to their sources.

        `python -m convt demo` run from the repository root imports ./convt
        before the installed copy; with the extension beside the sources, the
        README's `pip install . && python -m convt demo` works from there too.
        """
        if self.inplace:
            return
        build_py = self.get_finalized_command("build_py")
        for extension in self.extensions:
            built = self.get_ext_fullpath(extension.name)
            package = ".".join(extension.name.split(".")[:-1])
            target_dir = build_py.get_package_dir(package)
            target = os.path.join(target_dir, os.path.basename(built))
            if os.path.isdir(target_dir) and os.path.exists(built):
                shutil.copyfile(built, target)


extensions = [
    Extension(
        "convt._kernels",
        # the Cython drivers (convt/_kernels.pyx includes its .pxi parts) and
        # the C kernel families, one file per CPU family (convt/src)
        sources=["convt/_kernels.pyx"] + sorted(glob.glob("convt/src/*.c")),
        include_dirs=[numpy.get_include(), "convt", "convt/src"],
        depends=sorted(glob.glob("convt/src/*.h") + glob.glob("convt/*.pxi")
                       + glob.glob("convt/*.pxd")),
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_9_API_VERSION")],
        # fmaf/fma of the scalar references
        libraries=[] if sys.platform == "win32" else ["m"],
    )
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
            "embedsignature": True,
        },
    ),
    cmdclass={"build_ext": BuildExtWithOpenMP},
)
