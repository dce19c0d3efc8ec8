"""Sphinx configuration: python -m sphinx -W -b html docs docs/_build/html.

Pages are Markdown (myst-parser) or reStructuredText; the API reference is
generated from the numpydoc docstrings; the gallery (docs/examples/plot_*.py)
is executed at every build by sphinx-gallery.  Nothing is fetched from the
network.
"""

import os
import sys
from pathlib import Path

import convt

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

project = "convt"
author = "the convt developers"
copyright = "2026, the convt developers"
release = convt.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = ["_build", "generated/*.md", "examples", "**.ipynb_checkpoints",
                    "auto_examples/*.ipynb", "auto_examples/*.py", "auto_examples/*.zip",
                    "auto_examples/*.md5", "auto_examples/*.json"]

# Markdown pages: "#heading" links of docs/README.md resolve to their sections.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

autosummary_generate = True
autodoc_typehints = "none"
autodoc_default_options = {"members": True, "inherited-members": False}
numpydoc_show_class_members = False
numpydoc_validation_checks = set()
numpydoc_xref_param_type = False

sphinx_gallery_conf = {
    "examples_dirs": str(HERE / "examples"),
    "gallery_dirs": str(HERE / "auto_examples"),
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "show_memory": False,
    "plot_gallery": os.environ.get("CONVT_DOCS_GALLERY", "True"),
}

html_theme = "alabaster"
html_static_path = []
html_title = f"convt {release}"
html_theme_options = {"description": "Exact ONNX ConvTranspose and upsampling for NumPy arrays",
                      "fixed_sidebar": True}
