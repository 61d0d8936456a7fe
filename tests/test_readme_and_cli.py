"""The README's snippets run as written, and the command line behaves as documented."""

import ast
import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rdpest import (
    BernoulliTPRFPRBaseline,
    DVRenyiEstimator,
    HoeffdingRenyiBound,
    MarkovRenyiBound,
)
from rdpest.cli import main
from rdpest.datasets import make_renyi_pair

ROOT = Path(__file__).resolve().parents[1]


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


def test_readme_python_snippets_run_in_order(capsys):
    """Catches a Quick start whose printed numbers are wrong: an estimate far from the known
    truth, a "certified" bound above it or at 0 (a broken certificate), printed values that are
    not the estimator's, or a grid search whose reported best is not one of its candidates."""
    namespace: dict = {}
    blocks = _python_blocks()
    assert len(blocks) >= 2
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)
    out = capsys.readouterr().out
    printed = re.search(r"truth (\S+)  estimate (\S+)  95% lower bound (\S+)  certified (\S+)", out)
    assert printed, out
    truth, estimate, bound = (float(v) for v in printed.groups()[:3])
    est = namespace["est"]
    assert (estimate, bound) == (round(est.divergence_, 3), round(est.lower_bound_, 3))
    assert printed.group(4) == str(est.certified_) == "True"
    assert truth == pytest.approx(namespace["truth"], abs=5e-4) and truth == 1.0
    # The benchmark's DV point estimate at α = 2, D = 1 has sd 0.331 at n = 500 and 0.119 at
    # n = 5000 per side (benchmarks/results/estimators/results.md), about 0.19 at n = 2000
    # (n^-1/2 from either): three sd is 0.57.
    assert abs(estimate - truth) < 0.6
    # The bound is certified below the truth (a seeded run; β = 0.05), and at n = 2000 it is far
    # from 0: the benchmark's mean bound is 0.42 at n = 500 and 0.74 at n = 5000.
    assert 0.1 < bound <= truth
    best = ast.literal_eval(out.strip().splitlines()[-1])
    grid = namespace["grid"]
    assert best == grid.best_params_
    assert best["hidden_layer_sizes"] in [(32,), (100, 100)]
    assert best["learning_rate"] in [1e-4, 1e-3]
    # The search is scored by neg_critic_loss: minus a held-out logistic loss. In population no
    # critic's loss is below that of the exact log ratio, 0.5817 for this pair (E log(1 + e^-Z),
    # Z ~ N(1/2, 1), by quadrature), so the best mean over the 3 folds cannot be much above
    # -0.5817: the per-row losses have sd 0.42, the mean over all 2000 + 2000 held-out rows a
    # standard error of 0.0067, and the margin 0.03 is about 4.5 of them (the best of 4
    # candidates gains about one). A critic that learned nothing scores -log 2 = -0.693.
    assert -0.65 < grid.best_score_ < -0.5817 + 0.03


def test_readme_commands_are_the_ci_commands():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "<!-- ci:test-command -->" in readme and "ci:test-command" in ci
    assert 'pip install -e ".[dev]" && pytest -n 2' in readme
    assert "pip install -e . && rdpest audit" in readme


def test_estimates_at_orders_beyond_the_benchmarks_carry_a_note(tmp_path, capsys):
    """CLI review: quickstart's D_α = 1 was estimated 5.29 at α = 100 (48408 at α = 1e6) and
    printed as a plain result; beyond α = 32 the output says how little the point estimate
    is worth there, and that the bound stays valid. At α = 32 and below there is no note."""
    assert main(["quickstart", "--alpha", "100", "--n", "300", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "at α = 100 the point estimate rests on rare values" in report["note"]
    assert "the certified lower bound stays valid" in report["note"]
    assert main(["quickstart", "--alpha", "32", "--n", "300", "--json"]) == 0
    assert "note" not in json.loads(capsys.readouterr().out)
    # diff review: an estimator without a certified bound is not told its bound "stays valid"
    samples = tmp_path / "p.npy", tmp_path / "q.npy"
    rng = np.random.default_rng(0)
    np.save(samples[0], rng.normal(0.1, 1, 200)), np.save(samples[1], rng.normal(0, 1, 200))
    command = ["estimate", *map(str, samples), "--alpha", "100", "--estimator", "markov", "--json"]
    assert main(command) == 0
    note = json.loads(capsys.readouterr().out)["note"]
    assert "at α = 100 the point estimate" in note and "stays valid" not in note


def test_quickstart_json(capsys):
    """Catches a quickstart that does not pass its options (n, seed, alpha) to the estimator or
    the generator: its numbers must be those of the library call it stands for."""
    assert main(["quickstart", "--n", "400", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    X, Y, truth = make_renyi_pair("gaussian_shift", 2.0, 1.0, 400, random_state=0)
    library = DVRenyiEstimator(alpha=2.0, random_state=0).fit(X, Y)
    assert report["divergence"] == library.divergence_
    assert report["lower_bound"] == library.lower_bound_
    assert report["true_divergence"] == truth == pytest.approx(1.0)
    assert report["certified"] is True
    assert 0.0 <= report["lower_bound"] <= report["true_divergence"]


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
    assert report["estimator"] == "DVRenyiEstimator"
    # Catches a reader that loses precision, reorders or drops values: every format must give
    # the library's result on the original arrays, bit for bit (np.savetxt writes 18 digits).
    rng = np.random.default_rng(0)
    o, o_prime = rng.normal(1.0, 1.0, 300), rng.normal(0.0, 1.0, 300)
    library = DVRenyiEstimator(alpha=2.0, random_state=0).fit(o, o_prime)
    assert report["divergence"] == library.divergence_
    assert report["lower_bound"] == library.lower_bound_


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
    # Catches --estimator building another estimator or dropping an option: the numbers are the
    # library's with the CLI's defaults (alpha 2, beta 0.05, forward, seed 0).
    rng = np.random.default_rng(1)
    p, q = rng.normal(0.5, 1.0, 300), rng.normal(0.0, 1.0, 300)
    options = {"privacy_loss_bound": 50.0} if name == "hoeffding" else {}
    cls = {"markov": MarkovRenyiBound, "bernoulli": BernoulliTPRFPRBaseline}.get(
        name, HoeffdingRenyiBound
    )
    library = cls(alpha=2.0, beta=0.05, direction="forward", random_state=0, **options)
    library.fit(p, q)
    assert report["estimator"] == cls.__name__
    assert (report["divergence"], report["lower_bound"]) == (
        library.divergence_,
        library.lower_bound_,
    )
    truth = 2.0 * 0.5**2 / 2  # D_2(N(0.5, 1) ‖ N(0, 1)) = α μ² / 2
    assert 0.0 <= report["lower_bound"] <= truth
    if name != "bernoulli":
        # The Gaussian-fit plug-in on 150 certifying rows: the mean of e^{2L} has relative sd
        # sqrt(e^{3 D_3} − e^{2 D_2}) / e^{D_2} / sqrt(150) = 0.08, so 3 sd is 0.24.
        assert abs(report["divergence"] - truth) < 0.25
    if name == "hoeffding":
        # A missing required flag is a usage error, status 2 (cli.rst); it exited with 1.
        assert main([*argv, "--estimator", name]) == 2
        assert "needs --privacy-loss-bound" in capsys.readouterr().err


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
    _check_audit_result(tmp_path)
    assert main([*argv, "--json"]) == 0  # resumes: same runs, printed as JSON
    report = json.loads(capsys.readouterr().out)
    # the compact JSON names the loss files instead of printing the arrays
    assert "losses_with_canary" not in report
    np.testing.assert_array_equal(np.load(report["samples"]["with_canary"]), first)
    assert report["n_runs"] == 12
    assert main([*argv, "--noise-multiplier", "3"]) == 1  # another configuration: refused
    assert "different audit configuration" in capsys.readouterr().err


def _check_audit_result(out: Path) -> None:
    """The values of an audit's result.json (12 runs of 3 full-batch steps, claimed ε_2 = 1).

    Catches a CLI that solves the wrong noise for its claim, writes samples that are not the
    result's, fits the estimators to other samples or at another level, or gives a verdict
    that does not follow from its bounds."""
    result = json.loads((out / "result.json").read_text())
    np.testing.assert_array_equal(result["losses_without_canary"], np.load(out / "O.npy"))
    np.testing.assert_array_equal(result["losses_with_canary"], np.load(out / "O_prime.npy"))
    assert len(result["losses_with_canary"]) == len(result["losses_without_canary"]) == 12
    # Full-batch DP-SGD is the Gaussian mechanism composed: ε_α = T α / (2 σ²) (Mironov 2017,
    # "Rényi Differential Privacy", Prop. 7 and Prop. 1), so the claim 1 at T = 3 needs σ = √3.
    pipeline = result["config"]["pipeline"]
    assert pipeline["sample_rate"] == 1.0 and pipeline["steps"] == 3
    assert pipeline["noise_multiplier"] == pytest.approx(np.sqrt(3 * 2.0 / (2 * 1.0)), rel=1e-6)
    estimates = result["estimates"]
    certified = [e for e in estimates.values() if e["certified"]]
    assert sum(e["beta"] for e in certified) == pytest.approx(result["beta"])
    # The Bernoulli baseline refitted by hand on the written samples: P with the canary (O′).
    bernoulli = BernoulliTPRFPRBaseline(
        alpha=2.0, beta=estimates["bernoulli"]["beta"], direction="max", random_state=0
    ).fit(np.load(out / "O_prime.npy"), np.load(out / "O.npy"))
    assert estimates["bernoulli"]["divergence"] == bernoulli.divergence_
    assert estimates["bernoulli"]["lower_bound"] == bernoulli.lower_bound_
    violation = any(e["lower_bound"] > result["claimed_epsilon"] for e in certified)
    if violation:
        assert result["verdict"] == "violation"
    else:  # underpowered exactly when no certified bound could have exceeded the claim
        ceiling = result["power"]["max_certifiable"]
        expected = "underpowered" if ceiling <= result["claimed_epsilon"] else "not_refuted"
        assert result["verdict"] == expected


def test_bench_quick(tmp_path, capsys):
    """Catches a benchmark whose table is not its data or whose estimators go wrong on the
    quick cells: at P = Q (Laplace, D = 0) the exact log ratio is 0, so Markov's and Hoeffding's
    estimates are exactly 0; on the Gaussian shift (D_2 = 1) Markov with the exact ratio is
    within 0.3 of the truth (sd 0.069 at n = 500 in benchmarks/results/estimators/results.md)."""
    assert main(["bench", "--quick", "--repetitions", "2", "--out", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "| dv | gaussian_shift |" in table and "| hoeffding | laplace_shift |" in table
    assert (tmp_path / "results.md").read_text() == table.removesuffix("\n")  # print adds one
    with open(tmp_path / "results.csv", newline="") as handle:
        rows = {(r["estimator"], r["family"]): r for r in csv.DictReader(handle)}
    # Two cells: four estimators on the Laplace pair, three on the Gaussian (no Hoeffding).
    assert len(rows) == 7 and ("hoeffding", "gaussian_shift") not in rows
    for (estimator, family), row in rows.items():
        truth, bound = float(row["truth"]), float(row["bound_mean"])
        assert truth == (1.0 if family == "gaussian_shift" else 0.0)
        assert int(row["repetitions"]) == 2
        assert 0.0 <= bound <= truth  # certified bounds (β = 0.05, seeded)
        assert f"| {estimator} | {family} | 2 | 500 | {truth:.3g} |" in table
    for estimator in ("markov", "hoeffding"):
        assert float(rows[estimator, "laplace_shift"]["point_mean"]) == 0.0
    assert abs(float(rows["markov", "gaussian_shift"]["point_mean"]) - 1.0) < 0.3

    def refuse(token):
        raise AssertionError(f"results.json is not strict JSON: it holds {token}")

    # Strict JSON: the relative error at D = 0 is undefined, and was written as a NaN token.
    records = json.loads((tmp_path / "results.json").read_text(), parse_constant=refuse)
    assert any(r["point_median_rel_error"] is None for r in records if r["truth"] == 0.0)


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


@pytest.mark.parametrize(("verdict", "status"), [("violation", 3), ("not_refuted", 0)])
def test_fail_on_violation_exit_status(tmp_path, monkeypatch, capsys, verdict, status):
    """``--fail-on-violation`` exits with 3 on a violation and 0 otherwise (CI pipelines tell a
    refuted claim from an error, 1, and bad arguments, 2). The audit itself is replaced by a
    fixed result: the status must follow the verdict, whatever the training gave."""
    from rdpest.auditing import AuditResult
    from rdpest.auditing.dpsgd.auditor import DPSGDAuditor
    from rdpest.cli import EXIT_VIOLATION

    estimates = {"dv": {"divergence": 2.0, "lower_bound": 1.5, "certified": True, "beta": 0.05}}
    fixed = AuditResult(np.zeros(4), np.ones(4), 1.0, 2.0, 0.05, estimates, verdict, {})
    monkeypatch.setattr(DPSGDAuditor, "run", lambda self: fixed)
    argv = ["audit", "--runs", "12", "--steps", "3", "--n-jobs", "1", "--out"]
    assert main([*argv, str(tmp_path / "a"), "--fail-on-violation"]) == status
    assert EXIT_VIOLATION == 3 not in (0, 1, 2)
    assert f"verdict: {verdict.upper().replace('_', ' ')}" in capsys.readouterr().out
    # without the flag a violation is a finding, not a failure (another folder: the fixed
    # result leaves no run store, and result.json without one is refused as the user's own)
    assert main([*argv, str(tmp_path / "b")]) == 0


def test_audit_command_runs_a_sequential_audit(tmp_path, capsys):
    """``--max-runs`` trains in rounds from ``--runs``: result.json records each round at level
    beta/K, the runs used, and a verdict; the summary says it. Bug caught: the flag not reaching
    the auditor (one round of --runs), or rounds recorded at the full beta."""
    argv = ["audit", "--runs", "12", "--max-runs", "40", "--steps", "2", "--n-jobs", "1"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    assert "sequential: runs per side 12" in capsys.readouterr().out
    result = json.loads((tmp_path / "result.json").read_text())
    planned = result["config"]["rounds_planned"]
    assert planned[0] == 12 and planned[-1] == 40 and len(planned) >= 2
    assert [r["n_runs"] for r in result["rounds"]] == planned[: len(result["rounds"])]
    assert all(r["beta"] == pytest.approx(0.05 / len(planned)) for r in result["rounds"])
    assert len(result["losses_with_canary"]) == result["rounds"][-1]["n_runs"]
    assert result["verdict"] in {"violation", "not_refuted", "underpowered"}
