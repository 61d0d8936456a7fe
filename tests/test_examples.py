"""Every example runs as a script in its quick mode and writes the figure whose path it prints."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("[0-9][0-9]_*.py"))


def test_the_four_examples_exist():
    assert [p.name[:2] for p in EXAMPLES] == ["01", "02", "03", "04"]


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs_in_quick_mode(script, tmp_path):
    done = subprocess.run(
        [sys.executable, str(script), "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figure = re.search(r"^figure: (.+\.png)$", done.stdout, flags=re.M)
    assert figure, done.stdout
    assert Path(figure.group(1)).stat().st_size > 1000
