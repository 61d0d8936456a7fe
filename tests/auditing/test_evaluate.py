"""Tests of rdpest.auditing.evaluate: an audit's verdict on scores the user already has."""

import json
import re

import numpy as np
import pytest

from rdpest import BernoulliTPRFPRBaseline, DVRenyiEstimator
from rdpest.auditing import Auditor, GaussianMechanismScore, evaluate


def _estimators():
    # The default estimators' kinds (two certified, one not), with a short DV fit for speed.
    return {
        "dv": DVRenyiEstimator(alpha=2.0, random_state=0, max_epochs=60),
        "bernoulli": BernoulliTPRFPRBaseline(alpha=2.0, conversion="direct", random_state=0),
        "gdp_route": BernoulliTPRFPRBaseline(alpha=2.0, conversion="gdp", random_state=0),
    }


@pytest.mark.parametrize("bug", [0.25, 1.0])  # a violation and an honest mechanism
def test_evaluate_equals_the_audit_on_its_own_scores(bug):
    mech = GaussianMechanismScore(sensitivity=1.0, noise_std=1.0, noise_scale_bug=bug)
    claim = mech.claimed_epsilon(2.0)
    audit = Auditor(
        mech, claim, alpha=2.0, beta=0.1, n_runs=120, estimators=_estimators(), progress=False
    ).run()
    got = evaluate(
        audit.losses_without_canary,
        audit.losses_with_canary,
        claim,
        alpha=2.0,
        beta=0.1,
        estimators=_estimators(),
    )
    assert got.verdict == audit.verdict == ("violation" if bug < 1 else "not_refuted")
    assert got.estimates == audit.estimates  # estimates, bounds, shares of beta, certified
    assert got.power == audit.power
    assert got.beta == audit.beta and got.rounds == audit.rounds
    assert got.n_runs == audit.n_runs == 120
    assert {k: v for k, v in got.config.items() if k != "pipeline"} == {
        k: v for k, v in audit.config.items() if k != "pipeline"
    }
    assert "given" in got.config["pipeline"]["scores"]
    # beta is shared among the two certified estimators, not given to the uncertified one
    assert got.estimates["dv"]["beta"] == got.estimates["bernoulli"]["beta"] == 0.05
    assert got.estimates["gdp_route"]["beta"] == 0.1


def test_default_estimators_are_the_audits_and_n_runs_is_the_true_size():
    rng = np.random.default_rng(1)
    result = evaluate(rng.normal(0, 1, 90), rng.normal(3, 1, 90), 0.5, alpha=2.0)
    assert set(result.estimates) == {"dv", "bernoulli", "gdp_route"}
    assert result.n_runs == result.config["n_runs"] == 90
    assert result.rounds[0]["n_runs"] == 90
    assert "90 runs per side" in result.verdict_sentence() or result.verdict == "violation"


def test_underpowered_verdict_when_the_claim_is_beyond_reach():
    rng = np.random.default_rng(2)
    result = evaluate(
        rng.normal(0, 1, 40), rng.normal(9, 1, 40), 50.0, alpha=2.0, estimators=_estimators()
    )
    assert result.verdict == "underpowered"


def test_perfectly_separated_scores_that_certify_no_violation_are_underpowered():
    """Reviewer's finding: 20 scores per side 100 standard deviations apart certified at most
    0.17 (the threshold test's own ceiling from 10 certifying runs), below a claim of 0.3 that
    lies under the estimators' largest possible bound (0.60), and the verdict read "not
    refuted" although such scores fit any divergence above the claim as well as below it."""
    rng = np.random.default_rng(1)
    without, with_ = rng.normal(0, 1, 20), rng.normal(100, 1, 20)
    # DV now certifies such scores by the threshold test at its full level, up to the ceiling,
    # and the audit decides: a violation.
    decided = evaluate(without, with_, 0.3, alpha=2.0, estimators=_estimators())
    assert decided.verdict == "violation"
    assert decided.estimates["dv"]["lower_bound"] == pytest.approx(
        decided.power["max_certifiable"], rel=1e-9
    )
    # With a DV that certifies by its bracket only, the bound stays below the ceiling (the case
    # the reviewer found with the default DV): the verdict says the audit could not decide.
    bracket_only = {
        **_estimators(),
        "dv": DVRenyiEstimator(alpha=2.0, random_state=0, max_epochs=60, certificate="bracket"),
    }
    result = evaluate(without, with_, 0.3, alpha=2.0, estimators=bracket_only)
    best = max(e["lower_bound"] for e in result.estimates.values() if e["certified"])
    assert best <= 0.3 < result.power["max_certifiable"]  # the case the ceiling alone misses
    assert result.power["separated"] is True and result.verdict == "underpowered"
    assert "perfect separation" in result.summary() and "run more" in result.summary()
    again = type(result).from_json(result.to_json())
    assert again.verdict == "underpowered" and again.power["separated"] is True
    # Separated the other way round (the canary lowers the score) counts too; one overlapping
    # pair of scores does not, and the verdict is then "not_refuted" with its power sentence.
    assert evaluate(with_, without, 0.3, alpha=2.0, estimators=bracket_only).verdict == (
        "underpowered"
    )
    overlapping = np.r_[with_[:-1], without.max() - 0.5]
    result = evaluate(without, overlapping, 0.3, alpha=2.0, estimators=bracket_only)
    assert result.power["separated"] is False and result.verdict == "not_refuted"


GOOD = np.linspace(0.0, 1.0, 50)


@pytest.mark.parametrize(
    "without, with_, kwargs, message",
    [
        (np.r_[GOOD[:-1], np.nan], GOOD, {}, "losses_without_canary holds 1 non-finite"),
        (GOOD, np.r_[np.inf, GOOD[1:]], {}, "losses_with_canary holds 1 non-finite"),
        ([], GOOD, {}, "losses_without_canary is empty"),
        (
            GOOD.reshape(5, 10),
            GOOD,
            {},
            "1-D array of scores (or a single column), got shape (5, 10)",
        ),
        ([[1.0, 2.0], [3.0]], GOOD, {}, "ragged"),
        (GOOD, ["a"] * 50, {}, "must hold real numbers"),
        (GOOD, None, {}, "losses_with_canary must be a 1-D array"),
        (GOOD, GOOD[:40], {}, "has 50 scores but losses_with_canary has 40"),
        (GOOD, GOOD, {"alpha": 1.0}, "alpha"),
        (GOOD, GOOD, {"beta": 1.5}, "beta"),
        (GOOD, GOOD, {"beta": 0.0}, "beta"),
        (GOOD[:4], GOOD[:4], {}, "too few scores: 4 per side; estimator 'dv' needs at least 5"),
        (GOOD, GOOD, {"claimed_epsilon": -1.0}, "claimed_epsilon must be >= 0"),
        (GOOD, GOOD, {"membership_delta": 0.0}, "membership_delta must lie strictly between"),
        (GOOD, GOOD, {"membership_delta": 1.0}, "membership_delta must lie strictly between"),
    ],
)
def test_clear_errors(without, with_, kwargs, message):
    options = {"claimed_epsilon": 1.0, "alpha": 2.0, **kwargs}
    claim = options.pop("claimed_epsilon")
    with pytest.raises(ValueError) as info:
        evaluate(without, with_, claim, **options)
    assert message in str(info.value)


def test_a_column_of_scores_is_read_as_one_score_per_run():
    """Bug: `rdpest evaluate` read a one-column file as one score per run, while
    rdpest.auditing.evaluate refused the same (n, 1) array (a torch or pandas column)."""
    rng = np.random.default_rng(5)
    without, with_ = rng.normal(0, 1, 60), rng.normal(1.5, 1, 60)
    flat = evaluate(without, with_, 0.1, alpha=2.0, estimators=_estimators())
    column = evaluate(without[:, None], with_[:, None], 0.1, alpha=2.0, estimators=_estimators())
    assert column.verdict == flat.verdict and column.n_runs == 60
    assert column.estimates == flat.estimates


@pytest.mark.parametrize(
    "without, with_, message",
    [
        (GOOD, GOOD[:20], "without has 50 scores but with_ has 20"),
        (GOOD, np.array(["0.5"] * 50), "with_ must hold real numbers"),
        (GOOD > 0.5, GOOD, "without must hold real numbers, got an array of dtype bool"),
        (np.r_[GOOD[:-1], np.nan], GOOD, "without holds 1 non-finite"),
        (GOOD, GOOD.reshape(25, 2), "with_ must be a 1-D array of scores"),
    ],
)
def test_auditor_evaluate_checks_its_scores_as_evaluate_does(without, with_, message):
    """Bug: Auditor.evaluate, offered for samples collected elsewhere, took 200 scores without
    and 20 with the canary and reported "200 runs per side" (a result whose own JSON
    AuditResult.from_json then refused), turned strings and booleans into numbers, and named no
    side for a NaN."""
    auditor = Auditor(None, 1.0, alpha=2.0, n_runs=50, progress=False)
    with pytest.raises(ValueError, match=re.escape(message)):
        auditor.evaluate(without, with_, {"bernoulli": BernoulliTPRFPRBaseline(alpha=2.0)})


@pytest.mark.parametrize(
    "estimators, message",
    [
        ({"bernoulli": BernoulliTPRFPRBaseline(alpha=8.0)}, "has alpha=8.0, but the audit's alpha"),
        (
            {"gdp": BernoulliTPRFPRBaseline(alpha=2.0, conversion="gdp")},
            "none of the estimators (gdp) is certified",
        ),
        (
            {"dv": DVRenyiEstimator(alpha=2.0)},
            "too few scores: 4 per side; estimator 'dv' needs at least 5",
        ),
        ({"x": object()}, "estimator 'x' is not an rdpest estimator"),
    ],
)
def test_auditor_evaluate_checks_the_estimators_it_is_given(estimators, message):
    """Reviewer's finding: Auditor.evaluate fitted the estimators it was given unchecked, so a
    Bernoulli baseline at α = 8 (a bound on D_8, 1.29) "refuted" an exact claim of D_2 = 1.0
    of N(1, 1) against N(0, 1), under a result saying α = 2; the constructor refused it."""
    auditor = Auditor(None, 1.0, alpha=2.0, n_runs=50, progress=False)
    rng = np.random.default_rng(0)
    n = 4 if "too few" in message else 50  # the splits need room in the samples given
    with pytest.raises(ValueError, match=re.escape(message)):
        auditor.evaluate(rng.normal(0, 1, n), rng.normal(1, 1, n), estimators)


def test_an_evaluation_of_a_stores_runs_is_on_the_stores_record(tmp_path, capsys):
    """Reviewer's finding: the re-analysis the README suggests (`rdpest evaluate` on an audit's
    O.npy and O_prime.npy) was recorded nowhere, so four evaluations at four levels warned of
    nothing and a later audit of the store counted only its first analysis."""
    from rdpest.cli import main

    mech = GaussianMechanismScore(noise_std=1.0)
    claim = mech.claimed_epsilon(2.0)
    fast = {"bernoulli": BernoulliTPRFPRBaseline(alpha=2.0, direction="max", random_state=0)}
    options = {"alpha": 2.0, "n_runs": 60, "progress": False, "estimators": fast}
    audit = Auditor(mech, claim, store=tmp_path, **options).run()
    written = (tmp_path / "result.json").read_text()
    scores = (audit.losses_without_canary, audit.losses_with_canary)
    # The same settings again: not another test of the claim.
    again = evaluate(*scores, claim, alpha=2.0, estimators=fast, store=tmp_path)
    assert "earlier_analyses" not in again.config
    with pytest.warns(UserWarning, match=r"at most 0\.15, not 0\.1"):
        other = evaluate(*scores, claim, alpha=2.0, beta=0.1, estimators=fast, store=tmp_path)
    assert [e["beta"] for e in other.config["earlier_analyses"]] == [0.05]
    # From the command line, on the files an audit writes into its store.
    np.save(tmp_path / "O.npy", scores[0])
    np.save(tmp_path / "O_prime.npy", scores[1])
    argv = ["evaluate", str(tmp_path / "O.npy"), str(tmp_path / "O_prime.npy"), "--alpha", "2"]
    flags = ["--claim", str(claim), "--beta", "0.2", "--estimators", "bernoulli"]
    with pytest.warns(UserWarning, match=r"at most 0\.35, not 0\.2"):
        assert main([*argv, *flags]) == 0
    assert "this analysis is recorded in" in capsys.readouterr().out
    lines = (tmp_path / "analyses.jsonl").read_text().splitlines()
    assert [json.loads(line)["beta"] for line in lines] == [0.05, 0.05, 0.1, 0.2]
    assert (tmp_path / "result.json").read_text() == written  # the audit's result is left alone
    # Diff reviewer's finding: with the store held by a running audit, the evaluation fitted
    # everything and then failed, losing the verdict. Python refuses before fitting; the command
    # line gives its verdict and says the analysis is not recorded.
    from rdpest.auditing.evaluate import _opened_store

    with _opened_store(tmp_path):  # as a running audit holds it
        with pytest.raises(ValueError, match="in use by another audit"):
            evaluate(*scores, claim, alpha=2.0, estimators=fast, store=tmp_path)
        assert main([*argv, *flags]) == 0
    captured = capsys.readouterr()
    assert "verdict:" in captured.out and "recorded in" not in captured.out
    assert "warning: this analysis is not recorded in" in captured.err
    assert len((tmp_path / "analyses.jsonl").read_text().splitlines()) == 4
    with pytest.raises(ValueError, match="not an audit store"):
        evaluate(*scores, claim, alpha=2.0, estimators=fast, store=tmp_path / "elsewhere")


def test_only_a_stores_own_runs_are_recorded_as_an_analysis_of_them(tmp_path, capsys):
    """Auditor review: evaluate(..., store=DIR) recorded any scores as an analysis of the
    store's runs: the runs of an honest pipeline repeated ten times gave a "violation" (bound
    1.003 > claim 1) written into its analyses.jsonl, and other scores under the audit's
    settings passed for a repeat of its analysis, with no warning and no level spent."""
    from rdpest.cli import main

    mech = GaussianMechanismScore(noise_std=1.0)
    fast = {"bernoulli": BernoulliTPRFPRBaseline(alpha=2.0, direction="max", random_state=0)}
    audit = Auditor(
        mech, 1.0, alpha=2.0, n_runs=60, progress=False, estimators=fast, store=tmp_path
    ).run()
    o_without, o_with = audit.losses_without_canary, audit.losses_with_canary
    record = tmp_path / "analyses.jsonl"
    before = record.read_text()
    cases = [
        ((np.tile(o_without, 10), np.tile(o_with, 10)), "holds only 60 finished runs of each arm"),
        ((o_without, o_with + 3.0), r"losses_with_canary\[0\] is .* where its run 0 scored"),
        ((o_with, o_without), "with the arms swapped"),
        ((o_without[::-1], o_with[::-1]), r"losses_without_canary\[0\]"),
        ((o_without[20:], o_with[20:]), "first 40 runs of each arm"),
    ]
    for scores, said in cases:
        with pytest.raises(ValueError, match=said):
            evaluate(*scores, 1.0, alpha=2.0, estimators=fast, store=tmp_path)
    assert record.read_text() == before
    # The first 40 runs are what an audit of 40 runs per side analyses: recorded, as another
    # test of the claim on (some of) the same runs.
    with pytest.warns(UserWarning, match="already analysed for this claim"):
        evaluate(o_without[:40], o_with[:40], 1.0, alpha=2.0, estimators=fast, store=tmp_path)
    assert len(record.read_text().splitlines()) == len(before.splitlines()) + 1
    # From the command line, files beside a store that are not its runs: the verdict, and a
    # warning that it is not recorded.
    np.save(tmp_path / "O.npy", o_without + 1.0)
    np.save(tmp_path / "O_prime.npy", o_with)
    argv = ["evaluate", str(tmp_path / "O.npy"), str(tmp_path / "O_prime.npy"), "--alpha", "2"]
    assert main([*argv, "--claim", "1", "--estimators", "bernoulli"]) == 0
    captured = capsys.readouterr()
    assert "verdict:" in captured.out and "recorded in" not in captured.out
    assert "warning: this analysis is not recorded in" in captured.err
    assert "the scores are not the runs in the store" in captured.err
    # the files named, not the Python arguments, and no advice to leave out a store argument
    assert f"{tmp_path / 'O.npy'}[0] is" in captured.err and "losses_" not in captured.err
    assert "leave store out" not in captured.err
    assert len(record.read_text().splitlines()) == len(before.splitlines()) + 1


def test_the_command_line_prints_warnings_on_one_line_in_its_own_voice(tmp_path):
    """Reviewer's finding: `rdpest evaluate`'s retest warning came out as Python prints warnings,
    "/.../rdpest/cli.py:237: UserWarning: ..." followed by the source line `result = evaluate(`.
    Run as a user runs it (pytest records warnings instead of printing them)."""
    import subprocess
    import sys

    mech = GaussianMechanismScore(noise_std=1.0)
    fast = {"bernoulli": BernoulliTPRFPRBaseline(alpha=2.0, direction="max", random_state=0)}
    audit = Auditor(
        mech, 1.0, alpha=2.0, n_runs=30, progress=False, estimators=fast, store=tmp_path
    ).run()
    np.save(tmp_path / "O.npy", audit.losses_without_canary)
    np.save(tmp_path / "O_prime.npy", audit.losses_with_canary)
    argv = [sys.executable, "-m", "rdpest", "evaluate", "O.npy", "O_prime.npy", "--alpha", "2"]
    flags = ["--claim", "1", "--beta", "0.2", "--estimators", "bernoulli"]
    done = subprocess.run([*argv, *flags], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "rdpest evaluate: warning: " in done.stderr and "at most 0.25, not 0.2" in done.stderr
    assert "UserWarning" not in done.stderr and "cli.py" not in done.stderr


def test_a_warning_from_another_package_says_where_it_came_from():
    """Diff reviewer's finding: Opacus's and torch's warnings were printed as rdpest's own."""
    import rdpest.cli as cli

    ours = cli._one_line_warning("audit", "retest", UserWarning, cli.__file__, 3)
    assert ours == "rdpest audit: warning: retest\n"
    theirs = cli._one_line_warning(
        "audit", "secure RNG off", DeprecationWarning, "/env/site-packages/opacus/engine.py", 7
    )
    assert theirs == (
        "rdpest audit: warning (DeprecationWarning, from opacus/engine.py:7): secure RNG off\n"
    )


def test_an_unseeded_estimator_is_named_where_its_verdict_could_change():
    """Reviewer's finding: evaluate(..., random_state=0) with a user's BernoulliTPRFPRBaseline
    left unseeded gave lower bounds 0.0324 and 0.0188 on the same scores in two calls, without
    a word: its splits are drawn afresh at each fit, so a report could not be repeated (and a
    verdict could be re-drawn). Seeded or split-free estimators, and the defaults, say nothing."""
    import warnings

    rng = np.random.default_rng(0)
    without, with_ = rng.normal(0, 1, 60), rng.normal(1, 1, 60)
    with pytest.warns(UserWarning, match=r"'bernoulli' have random_state=None.*seed them"):
        evaluate(
            without, with_, 1.0, alpha=2.0, estimators={"bernoulli": BernoulliTPRFPRBaseline()}
        )
    quiet = [
        {"bernoulli": BernoulliTPRFPRBaseline(random_state=0)},
        {"bernoulli": BernoulliTPRFPRBaseline(threshold="bonferroni")},  # no split to draw
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for estimators in quiet:
            evaluate(without, with_, 1.0, alpha=2.0, estimators=estimators)
