"""Build script for convt's compiled kernels.

One extension, convt._kernels: the Cython drivers (convt/_kernels.pyx and the
.pxi files it includes) and the C kernel families, one file per CPU family
(convt/src/*.c).  Threads come from convt's own pool (POSIX or Windows
threads, convt/src/pool.c), so no OpenMP runtime is needed, probed or shipped.
"""

import glob
import os
import shutil
import sys

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class BuildExt(build_ext):
    """build_ext with optimisation and thread flags for the compiler in use."""

    def build_extensions(self):
        msvc = self.compiler.compiler_type == "msvc"
        if not msvc:
            _check_compiler(self.compiler.compiler_so[0])
            # an interpreter linked with -rpath (pyenv, some distributions) would pass
            # its library directory to the extension: wheels must not carry it
            self.compiler.linker_so = [flag for flag in self.compiler.linker_so
                                       if not flag.startswith(("-Wl,-rpath", "-Wl,-R"))]
        # -g0: Python's default CFLAGS carry -g; debug info would triple the wheel
        optimise = ["/O2"] if msvc else ["-O3", "-g0"]
        threads = [] if msvc else ["-pthread"]
        strip = [] if msvc else (["-Wl,-x"] if sys.platform == "darwin" else ["-s"])
        if os.environ.get("CONVT_KEEP_SYMBOLS"):  # profiling: function names for perf
            strip = []
        for extension in self.extensions:
            extension.extra_compile_args = (optimise + threads + _sanitizers()
                                            + extension.extra_compile_args)
            extension.extra_link_args = (threads + _sanitizers()
                                         + ([] if _sanitizers() else strip)
                                         + extension.extra_link_args)
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


def _check_compiler(command):
    """Stop with a message that says what to install when there is no C compiler."""
    if shutil.which(command) is None:
        sys.exit(
            f"convt: no C compiler found (looked for {command!r}). convt's kernels are C and "
            "Cython code compiled at install time: install gcc or clang (Debian/Ubuntu: "
            "`apt install gcc python3-dev`; Fedora: `dnf install gcc python3-devel`; macOS: "
            "`xcode-select --install`), or set CC to your compiler; or install a prebuilt "
            "wheel (`pip install --only-binary convt convt`).")


def _sanitizers():
    """CONVT_SANITIZE=address,undefined builds with those sanitizers (gcc/clang), for
    tools/sanitize.sh: frame pointers kept, no stripping, -O1 so reports point at lines."""
    names = os.environ.get("CONVT_SANITIZE", "").strip()
    if not names:
        return []
    return [f"-fsanitize={names}", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all",
            "-O1", "-g"]


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
    cmdclass={"build_ext": BuildExt},
)
