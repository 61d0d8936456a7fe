"""Package metadata: the wheel ships the licence and py.typed, and the citation and changelog parse.

The wheel is built offline from a copy of the files it is made of (pyproject.toml, README.md,
LICENSE and the package), so the build's scratch directories never land in the working tree.
"""

import email
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAPER = "Optimal Guarantees for Auditing Rényi Differentially Private Machine Learning"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Build the wheel without network or build isolation (about 2 s) and return its path."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "rdpest", src / "rdpest", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    out = tmp_path_factory.mktemp("dist")
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    command += ["--no-index", "--quiet", "-w", str(out), str(src)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (found,) = out.glob("rdpest-*.whl")
    return found


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(zf.read(name))


def test_the_wheel_ships_the_licence_and_py_typed(wheel):
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        licences = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert len(licences) == 1, names
        text = zf.read(licences[0]).decode()
        assert "BSD 3-Clause License" in text and "the rdpest developers" in text
        assert "rdpest/py.typed" in names


def test_the_wheel_metadata_has_the_licence_expression_and_classifiers(wheel):
    meta = _metadata(wheel)
    assert meta["License-Expression"] == "BSD-3-Clause"
    assert meta.get_all("License-File") == ["LICENSE"]
    classifiers = meta.get_all("Classifier")
    for expected in (
        "Programming Language :: Python :: 3.11",
        "Operating System :: OS Independent",
        "Intended Audience :: Science/Research",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
        "Topic :: Security",
        "Typing :: Typed",
    ):
        assert expected in classifiers
    # PEP 639: a licence expression replaces the "License ::" classifiers.
    assert not [c for c in classifiers if c.startswith("License ::")]
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert set(urls) == {"Homepage", "Documentation", "Changelog", "Issues"}
    assert all(u.startswith("https://github.com/rdpest/rdpest") for u in urls.values())
    assert meta["Author"] == "The rdpest developers"


def test_the_citation_file_parses_and_names_the_paper():
    yaml = pytest.importorskip("yaml")
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0"
    assert cff["type"] == "software" and cff["license"] == "BSD-3-Clause"
    from rdpest import __version__

    assert str(cff["version"]) == __version__
    (paper,) = [r for r in cff["references"] if r["title"] == PAPER]
    assert [a["family-names"] for a in paper["authors"]] == ["Kim", "Varshney", "Alabi"]
    assert paper["year"] == 2026


def test_the_changelog_has_an_unreleased_section():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## [Unreleased]" in text
    unreleased = text.split("## [Unreleased]", 1)[1].split("\n## ", 1)[0]
    for group in ("### Added", "### Changed", "### Fixed"):
        assert group in unreleased


def test_result_json_records_the_versions_of_rdpest_torch_opacus_and_python(tmp_path):
    import json
    import platform
    from importlib import metadata

    from rdpest import DVRenyiEstimator, __version__
    from rdpest.auditing import Auditor, GaussianMechanismScore

    mech = GaussianMechanismScore(noise_std=1.0)
    estimators = {"dv": DVRenyiEstimator(alpha=2.0, random_state=0, max_epochs=5)}
    Auditor(
        mech,
        mech.claimed_epsilon(2.0),
        alpha=2.0,
        n_runs=60,
        estimators=estimators,
        progress=False,
        store=tmp_path,
    ).run()
    recorded = json.loads((tmp_path / "result.json").read_text())["provenance"]
    assert recorded["rdpest"] == __version__
    assert recorded["python"] == platform.python_version()
    assert recorded["torch"] == metadata.version("torch")
    assert recorded["opacus"] == metadata.version("opacus")
