"""Every example runs as a script in its quick mode, writes the figure whose path it prints, and
prints numbers that agree with what it computes (bounds below known truths, verdicts that follow
from the bounds)."""

import ast
import math
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
    CHECKS[script.stem](done.stdout)


# What each example prints, checked against what it should compute. Each catches an example
# that runs but reports wrong numbers (a certified bound above the truth, an estimate far from
# it, a verdict that contradicts the bounds or misses the injected bug).


def _check_quickstart(out: str) -> None:
    lines = re.findall(
        r"n = +(\d+) per side: estimate (\S+), 95% certified lower bound (\S+) "
        r"\(truth (\S+)\); over (\d+) seeds: estimate (\S+) to (\S+), bound (\S+) to (\S+)$",
        out,
        flags=re.M,
    )
    assert [int(n) for n, *_ in lines] == [200, 500], out
    for _, estimate, bound, truth, seeds, *ranges in lines:
        estimate, bound, truth = float(estimate), float(bound), float(truth)
        low_estimate, high_estimate, low_bound, high_bound = (float(v) for v in ranges)
        assert truth == 1.0 and int(seeds) == 3
        # Medians inside their ranges over the seeds (the figure's band).
        assert low_estimate <= estimate <= high_estimate and low_bound <= bound <= high_bound
        # Certified below the truth at every seed (seeded, β = 0.05 each) and not 0: D_2 = 1 is
        # detectable at n = 200.
        assert 0.0 < low_bound and high_bound <= truth
        # The benchmark's DV estimates at D = 1 stayed below 3·truth + 1 in every repetition.
        assert 0.0 < low_estimate and high_estimate < 3 * truth + 1


def _check_model_selection(out: str) -> None:
    best = re.search(r"best parameters: (\{.*\}) \(held-out score (\S+)\)", out)
    assert best, out
    params = ast.literal_eval(best.group(1))
    assert params["hidden_layer_sizes"] in [(32,), (100, 100)]
    assert params["learning_rate"] in [1e-4, 1e-3]
    refit = re.search(r"estimate (\S+), certified bound (\S+), truth (\S+)", out)
    assert refit, out
    estimate, bound, truth = (float(v) for v in refit.groups())
    assert truth == 1.0
    reference = re.search(r"the exact log ratio's score: (\S+); a constant critic's: (\S+)", out)
    assert reference, out
    exact, constant = (float(v) for v in reference.groups())
    assert abs(constant + math.log(2)) < 1e-3
    # The search is scored by neg_critic_loss, minus a held-out logistic loss (a proper scoring
    # rule): in population no critic scores above the exact log ratio, whose score on all 1200
    # rows the example prints (-0.562). The folds' mean has a standard error of at most 0.015
    # (per-row losses have sd 0.51 over 1200 rows; less for its difference from the exact
    # ratio's loss on the same rows), and the best of 4 settings gains about one; 0.05 is more
    # than 3 of them. A critic that learned nothing scores -log 2 = -0.693 in expectation; the
    # exact ratio is 0.13 above it, so the best setting must be clearly above it too.
    assert constant + 0.03 < float(best.group(2)) < exact + 0.05
    # Laplace, D_2 = 1, n = 600: the benchmark's DV sd at n = 500 is 0.45; 3 sd is 1.4.
    assert 0.0 < bound <= truth and abs(estimate - truth) < 1.4


def _audit_rows(out: str) -> dict[str, tuple[float, float, bool]]:
    rows = re.findall(r"^(\w+) +(\S+) +(\S+) +(\S+)  (yes|no \(assumption\))$", out, re.M)
    return {name: (float(est), float(bound), yes == "yes") for name, est, bound, _, yes in rows}


def _check_audit_dpsgd(out: str) -> None:
    rows = _audit_rows(out)
    assert set(rows) == {"dv", "bernoulli", "gdp_route"}, out
    assert "claimed epsilon_alpha = 1," in out
    # Honest DP-SGD: the true D_2 is at most the claim 1, so a certified bound above it would be
    # a false alarm (probability at most β; the run is seeded).
    assert all(bound <= 1.0 for _, bound, certified in rows.values() if certified)
    assert rows["dv"][2] and rows["bernoulli"][2] and not rows["gdp_route"][2]
    # 40 + 40 runs cannot see a claim of 1 being broken by a little: not refuted, and the
    # power sentence says what would have been seen.
    assert "verdict: NOT REFUTED" in out and "this audit detects ε_2 >=" in out


def _check_catch_a_bug(out: str) -> None:
    lines = re.findall(
        r"^(.+?) +claim (\S+)  DV bound (\S+) \(median; (\S+) to (\S+) over (\d+) seeds\)  "
        r"verdicts (\S+)$",
        out,
        re.M,
    )
    assert len(lines) == 4, out
    for name, claim, median, low, high, seeds, verdicts in lines:
        median, low, high = float(median), float(low), float(high)
        assert float(claim) == 1.0 and int(seeds) == 3 and low <= median <= high
        if name.endswith("x1"):
            # Honest: the true D_2 is the claim, 1; a certified bound above it is a false alarm
            # (probability at most β per audit; the audits are seeded).
            assert verdicts == "not_refuted" and high <= 1.0, name
        else:
            # Noise 4x smaller than claimed: the true D_2 is 16 times the claim, and the example
            # exists to show that the audit catches it, at every seed.
            assert name.endswith("x0.25") and verdicts == "violation" and low > 1.0, name


CHECKS = {
    "01_quickstart": _check_quickstart,
    "02_model_selection": _check_model_selection,
    "03_audit_dpsgd": _check_audit_dpsgd,
    "04_catch_a_bug": _check_catch_a_bug,
}
