"""Sphinx configuration of the rdpest documentation.

Build with ``sphinx-build -W -b html docs docs/_build/html`` (``pip install -e ".[docs]"``).
The package is imported, not mocked: the API pages are generated from the installed docstrings.
"""

from __future__ import annotations

import re
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
]

# The DP-SGD auditor's page is built whenever its package exists (it always does in a checkout);
# an import failure is then a build error (under -W) rather than a silently missing page.
_DPSGD_PACKAGE = Path(__file__).resolve().parent.parent / "rdpest" / "auditing" / "dpsgd"
exclude_patterns = ["_build"]
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
