"""The README's snippets run as written, and the command line behaves as documented."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rdpest.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


def test_readme_python_snippets_run_in_order(capsys):
    namespace: dict = {}
    blocks = _python_blocks()
    assert len(blocks) >= 2
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)
    out = capsys.readouterr().out
    assert "truth 1.000" in out and "certified True" in out


def test_readme_commands_are_the_ci_commands():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "<!-- ci:test-command -->" in readme and "ci:test-command" in ci
    assert 'pip install -e ".[dev]" && pytest' in readme
    assert "pip install -e . && rdpest audit" in readme


def test_quickstart_json(capsys):
    assert main(["quickstart", "--n", "400", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["true_divergence"] == pytest.approx(1.0)
    assert report["certified"] is True
    assert report["lower_bound"] <= report["true_divergence"]


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".csv", ".txt"])
def test_estimate_reads_every_format(tmp_path, suffix, capsys):
    rng = np.random.default_rng(0)
    paths = []
    for name, mean in (("o", 1.0), ("o_prime", 0.0)):
        data = rng.normal(mean, 1.0, 300)
        path = tmp_path / f"{name}{suffix}"
        if suffix == ".npy":
            np.save(path, data)
        elif suffix == ".npz":
            np.savez(path, losses=data)
        else:
            np.savetxt(path, data, delimiter="," if suffix == ".csv" else " ")
        paths.append(str(path))
    assert main(["estimate", *paths, "--alpha", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["estimator"] == "DVRenyiEstimator" and np.isfinite(report["divergence"])


@pytest.mark.parametrize("name", ["markov", "bernoulli", "hoeffding"])
def test_estimate_with_each_estimator(tmp_path, name, capsys):
    rng = np.random.default_rng(1)
    np.save(tmp_path / "p.npy", rng.normal(0.5, 1.0, 300))
    np.save(tmp_path / "q.npy", rng.normal(0.0, 1.0, 300))
    extra = ["--privacy-loss-bound", "50"] if name == "hoeffding" else []
    argv = ["estimate", str(tmp_path / "p.npy"), str(tmp_path / "q.npy"), "--json"]
    assert main([*argv, "--estimator", name, *extra]) == 0
    report = json.loads(capsys.readouterr().out)
    # Without an exact log ratio, Markov and Hoeffding are plug-in estimates: not certified.
    assert report["certified"] is (name == "bernoulli")
    if name == "hoeffding":
        assert main([*argv, "--estimator", name]) == 1
        assert "privacy-loss-bound" in capsys.readouterr().err


def test_estimate_errors(tmp_path, capsys):
    assert main(["estimate", str(tmp_path / "missing.npy"), str(tmp_path / "x.npy")]) == 1
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["estimate", str(bad), str(bad)]) == 1
    assert "unsupported format" in capsys.readouterr().err
    garbage = tmp_path / "garbage.csv"
    garbage.write_text("a,b\nc,d\n")
    assert main(["estimate", str(garbage), str(garbage)]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_audit_command_writes_results_and_resumes(tmp_path, capsys):
    argv = ["audit", "--runs", "12", "--steps", "3", "--n-jobs", "1", "--out", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "verdict:" in out
    for name in ("result.json", "O.npy", "O_prime.npy", "audit.png", "runs.jsonl"):
        assert (tmp_path / name).exists(), name
    first = np.load(tmp_path / "O_prime.npy")
    assert main([*argv, "--json"]) == 0  # resumes: same runs, printed as JSON
    report = json.loads(capsys.readouterr().out)
    np.testing.assert_array_equal(report["losses_with_canary"], first)
    assert main([*argv, "--noise-multiplier", "3"]) == 1  # another configuration: refused
    assert "different audit configuration" in capsys.readouterr().err


def test_bench_quick(tmp_path, capsys):
    assert main(["bench", "--quick", "--repetitions", "2", "--out", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "| dv | gaussian_shift |" in table and "| hoeffding | laplace_shift |" in table
    assert (tmp_path / "results.csv").exists() and (tmp_path / "results.md").exists()


def test_usage_errors_exit_2():
    result = subprocess.run(
        [sys.executable, "-m", "rdpest", "estimate"], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "usage" in result.stderr
    help_ = subprocess.run(
        [sys.executable, "-m", "rdpest", "--help"], capture_output=True, text=True
    )
    assert help_.returncode == 0 and "quickstart" in help_.stdout
