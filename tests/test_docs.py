"""The Sphinx documentation builds without a single warning (``sphinx-build -W``).

Sphinx and numpydoc are development dependencies (the ``dev`` and ``docs`` extras), so a missing
Sphinx is an error here, not a skip. The build writes into a temporary directory, never into
``docs/_build``.
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
