"""The Sphinx documentation builds without a single warning (``sphinx-build -W``).

Sphinx, numpydoc and Sphinx-Gallery are development dependencies (the ``dev`` and ``docs``
extras), so a missing one is an error here, not a skip. The build writes into a temporary
directory, never into ``docs/_build`` (Sphinx-Gallery writes its generated pages under
``docs/auto_examples``, which git ignores). It executes the four examples in their quick mode
(about a minute), so the gallery's pages and figures are checked too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_docs_build_without_warnings(tmp_path):
    out = tmp_path / "html"
    command = [
        sys.executable,
        "-m",
        "sphinx",
        "-W",  # every warning is an error
        "--keep-going",  # ...but report all of them, not just the first
        "-b",
        "html",
        "-d",
        str(tmp_path / "doctrees"),
        str(DOCS),
        str(out),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, (
        f"sphinx-build -W failed (exit {done.returncode}):\n"
        f"{done.stderr[-6000:]}\n{done.stdout[-2000:]}"
    )
    api = (out / "api.html").read_text(encoding="utf-8")
    for name in ("DVRenyiEstimator", "certify_critic", "dpsgd_epsilon_alpha", "Auditor"):
        assert name in api, f"{name} is missing from the API reference"
    for page in (
        "auditing",
        "alpha_beta",
        "reading_results",
        "own_model",
        "scaling",
        "cuda",
        "resuming",
        "cli",
        "own_opacus",
    ):
        assert (out / "guide" / f"{page}.html").is_file(), f"guide page {page} was not built"
    dpsgd = (out / "api_auditing_dpsgd.html").read_text(encoding="utf-8")
    for name in ("DPSGDAuditor", "StackedConv2d", "OpacusTraining", "load_mnist"):
        assert name in dpsgd, f"{name} is missing from the DP-SGD API reference"
    _assert_the_gallery_is_built(out)


EXAMPLES = ("01_quickstart", "02_model_selection", "03_audit_dpsgd", "04_catch_a_bug")


def _assert_the_gallery_is_built(out: Path) -> None:
    """The examples' gallery: linked from the index, a page per example with its output and its
    figure (a PNG that the page shows and the build copied)."""
    index = (out / "index.html").read_text(encoding="utf-8")
    assert 'href="auto_examples/index.html"' in index, "the index does not link the examples"
    gallery = (out / "auto_examples" / "index.html").read_text(encoding="utf-8")
    for name in EXAMPLES:
        assert f"{name}.html" in gallery, f"{name} is missing from the gallery"
        page = (out / "auto_examples" / f"{name}.html").read_text(encoding="utf-8")
        assert "sphx-glr-script-out" in page, f"{name}'s page shows no output (not executed?)"
        figure = f"sphx_glr_{name}_001.png"
        assert f"../_images/{figure}" in page, f"{name}'s page shows no figure"
        assert (out / "_images" / figure).stat().st_size > 1000, f"{figure} is empty"
    quickstart = (out / "auto_examples" / "01_quickstart.html").read_text(encoding="utf-8")
    assert "over 3 seeds" in quickstart, "the quick start's output (quick mode) is missing"
