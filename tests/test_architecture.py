"""The package's architecture, held by tests: layering, a stand-alone repository, small modules."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# "About 600 lines" per module; a module that grows past this should be split by responsibility.
MAX_MODULE_LINES = 650


@pytest.mark.parametrize(
    "module", ["rdpest", "rdpest.auditing", "rdpest.stats", "rdpest.estimators", "rdpest.datasets"]
)
def test_only_the_dpsgd_package_imports_opacus(module):
    """Bug caught: `from rdpest.auditing import Auditor` imported Opacus through DPSGDAuditor."""
    code = f"import sys, {module}; assert 'opacus' not in sys.modules, 'opacus was imported'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_generic_auditor_needs_no_opacus():
    code = (
        "import sys\nfrom rdpest.auditing import Auditor, AuditResult, GaussianMechanismScore\n"
        "mech = GaussianMechanismScore(noise_std=1.0)\n"
        "Auditor(mech, mech.claimed_epsilon(2.0), n_runs=20, progress=False,\n"
        "        estimators={}).n_runs\n"
        "assert 'opacus' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


def test_code_and_docs_never_point_outside_the_repository():
    """Docstrings once cited design notes by file name that users do not have."""
    pattern = re.compile(r"DESIGN\.md|PAPER_NOTES|\.\./shared")
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("rdpest", "docs", "examples", "benchmarks")
        for path in (ROOT / folder).rglob("*")
        if path.suffix in {".py", ".rst", ".md"} and "results" not in path.parts
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    offenders += [
        f"README.md:{n}"
        for n, line in enumerate((ROOT / "README.md").read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not offenders, offenders


def test_modules_stay_small():
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in (ROOT / "rdpest").rglob("*.py")
    }
    too_long = {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not too_long, f"split these modules by responsibility: {too_long}"
