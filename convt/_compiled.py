"""The compiled extension, loaded on first use with an error that says what to do."""

import os

_kernels = None  # the extension once loaded: later calls skip the import machinery


def load():
    """convt._kernels, or an ImportError that tells how to build it.

    Examples
    --------
    >>> from convt._compiled import load
    >>> load().__name__
    'convt._kernels'
    """
    global _kernels
    if _kernels is not None:
        return _kernels
    try:
        from . import _kernels as kernels
    except ImportError as error:
        here = os.path.dirname(os.path.abspath(__file__))
        checkout = os.path.exists(os.path.join(here, "_kernels.pyx"))
        hint = (
            "This is a source checkout: build it in place with `pip install -e .` (or "
            "`python setup.py build_ext --inplace`) from the directory above; a C compiler "
            "is needed (gcc or clang; Xcode's command line tools on macOS; Visual Studio's "
            "Build Tools on Windows). If convt is also installed, run Python from another "
            "directory so that this checkout does not shadow it."
            if checkout else
            "The installation is incomplete: reinstall it with "
            "`pip install --force-reinstall --no-cache-dir convt`.")
        raise ImportError(
            f"convt's compiled kernels (convt._kernels) could not be imported from {here}: "
            f"{error}. {hint}") from error
    _kernels = kernels
    return _kernels
