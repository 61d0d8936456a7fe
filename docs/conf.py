"""Sphinx configuration of the rdpest documentation.

Build with ``sphinx-build -W -b html docs docs/_build/html`` (``pip install -e ".[docs]"``).
The package is imported, not mocked: the API pages are generated from the installed docstrings.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import rdpest

project = "rdpest"
author = "the rdpest developers"
copyright = "2026, the rdpest developers"
release = rdpest.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

# Sphinx-Gallery: the scripts in examples/ become the "Examples" pages (auto_examples/, written at
# each build and ignored by git), each executed with its output and figures. They run in quick
# mode (docs/_gallery.py gives them ``--quick --out TMPDIR``): about a minute and a half for the
# four, against far longer for their full sizes. Its hooks are named as strings so that the
# configuration stays picklable (Sphinx caches it; a function here would be a warning, an error
# under -W).
sys.path.insert(0, str(Path(__file__).resolve().parent))
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/\d\d_",  # execute every numbered example, not only plot_*.py
    "within_subsection_order": "FileNameSortKey",
    "reset_argv": "_gallery.quick_argv",
    "download_all_examples": False,
    "write_computation_times": False,
    "remove_config_comments": True,
}

# The DP-SGD auditor's page is built whenever its package exists (it always does in a checkout);
# an import failure is then a build error (under -W) rather than a silently missing page.
_DPSGD_PACKAGE = Path(__file__).resolve().parent.parent / "rdpest" / "auditing" / "dpsgd"
exclude_patterns = ["_build", "_gallery.py"]
if not (_DPSGD_PACKAGE / "__init__.py").exists():
    exclude_patterns.append("api_auditing_dpsgd.rst")

root_doc = "index"
language = "en"
pygments_style = "sphinx"

# autodoc: members are listed explicitly in api.rst; signatures keep their type hints.
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
# Keep numpy's ArrayLike short in signatures instead of expanding its private union.
autodoc_type_aliases = {"ArrayLike": "ArrayLike"}

# numpydoc: the class pages list their methods through autodoc, not a second members table.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True

html_theme = "alabaster"
html_title = f"rdpest {release}"
html_static_path: list[str] = []


def _tidy_alias_in_signature(app, what, name, obj, options, signature, return_annotation):
    """Show ``ArrayLike`` for the alias inside unions (some Sphinx versions print its repr)."""
    if signature:
        signature = re.sub(r"TypeAliasForwardRef\('([\w.]+)'\)", r"\1", signature)
    return signature, return_annotation


def setup(app):
    app.connect("autodoc-process-signature", _tidy_alias_in_signature)
