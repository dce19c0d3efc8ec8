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
        # -g0: Python's default CFLAGS carry -g; debug info would triple the wheel
        optimise = ["/O2"] if msvc else ["-O3", "-g0"]
        threads = [] if msvc else ["-pthread"]
        for extension in self.extensions:
            extension.extra_compile_args = optimise + threads + extension.extra_compile_args
            extension.extra_link_args = threads + extension.extra_link_args
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
    cmdclass={"build_ext": BuildExt},
)
