"""Membership-inference readouts of an audit (rdpest.auditing.membership).

The certified (ε, δ) lower bound is tested like every certificate in rdpest (tests/README.md):
coverage cells whose truth is known exactly, and positive controls (invalid variants that the
same assertion must fail). The truth: scores O ~ N(0, 1) and O′ ~ N(μ, 1) are the outputs of a
Gaussian mechanism, μ-GDP, whose exact (ε, δ) curve is
δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Dong, Roth & Su 2019, Cor. 2.13); the true ε at δ is
its root, found with brentq. Under P = Q (μ = 0) the truth is ε = 0 at every δ > 0.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import optimize, stats

from rdpest import BernoulliTPRFPRBaseline
from rdpest.auditing import AuditResult, evaluate
from rdpest.auditing.membership import (
    MEMBERSHIP_FPRS,
    _certified_epsilon,
    epsilon_from_rates,
    membership_line,
    membership_readouts,
    tpr_ceiling,
)
from rdpest.stats.conversions import rdp_to_dp
from rdpest.stats.divergences import bernoulli_renyi_divergence
from rdpest.stats.threshold_tests import positives
from tests.helpers import (
    COVERAGE_PVALUE,
    assert_coverage,
    coverage_power,
    repetitions_for_power,
)

#: (beta, repetitions, scores per arm) of the coverage cells and controls: R detects a miss rate
#: of 2β with power >= 0.8 (checked below).
BETA = 0.1
REPETITIONS = repetitions_for_power(BETA)
N = 1000

#: (μ, δ) of the coverage cells: the default δ = 1e-5 users run; δ = 0.05, where the optimal
#: test sits in the bulk and the certificate comes closest to the truth; and P = Q, where any
#: positive bound is a miss. At R = 300 and β = 0.1 the assertion rejects from 54 misses on.
CELLS = [(1.0, 1e-5), (1.0, 0.05), (0.0, 1e-5)]


def true_epsilon(mu: float, delta: float) -> float:
    """The ε at which the μ-GDP curve reaches δ (0 if δ already exceeds δ(0) = TV distance)."""
    if mu == 0.0:
        return 0.0

    def excess(eps):
        return (
            stats.norm.cdf(-eps / mu + mu / 2)
            - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
            - delta
        )

    return 0.0 if excess(0.0) <= 0 else optimize.brentq(excess, 0.0, 60.0, xtol=1e-12)


def _scores(rep: int, mu: float, n: int = N):
    rng = np.random.default_rng(7000 + rep)
    return rng.normal(0.0, 1.0, n), rng.normal(mu, 1.0, n)  # O, O′


def test_true_epsilon_matches_the_gdp_conversion():
    """The test's truth agrees with rdpest's own μ-GDP conversion (two independent codes)."""
    from rdpest.stats.conversions import gdp_epsilon

    assert true_epsilon(1.0, 1e-5) == pytest.approx(gdp_epsilon(delta=1e-5, mu=1.0), rel=1e-6)


def test_repetitions_detect_twice_beta_with_power():
    """Bug caught: coverage cells whose R was cut so far that a miss rate of 2β slips through."""
    assert coverage_power(REPETITIONS, BETA, 2 * BETA) >= 0.8


@pytest.mark.parametrize(("mu", "delta"), CELLS)
def test_certified_epsilon_covers_the_truth(mu, delta):
    """The readout an audit reports, in R seeded repetitions: ε_lo > true ε in at most a β
    fraction. Measured misses/R with these seeds: 0/300 (μ = 1, δ = 1e-5, true ε 4.377),
    3/300 (μ = 1, δ = 0.05, true ε 1.569), 1/300 (P = Q, true ε 0)."""
    truth = true_epsilon(mu, delta)
    misses = 0
    for rep in range(REPETITIONS):
        without, with_ = _scores(rep, mu)
        r = membership_readouts(without, with_, delta=delta, beta=BETA, random_state=rep)
        misses += r["epsilon_lower_bound"] > truth
    assert_coverage(misses, REPETITIONS, BETA)


def _plug_in_epsilon(train_p, train_q, test_p, test_q, delta, beta) -> float:
    """INVALID by construction: the threshold from the training part, but the certifying part's
    plug-in rates instead of their Clopper–Pearson limits."""
    chosen = _certified_epsilon(train_p, train_q, test_p, test_q, delta, beta)
    tpr = np.mean(positives(test_p, chosen["threshold"], chosen["side"]))
    fpr = np.mean(positives(test_q, chosen["threshold"], chosen["side"]))
    return float(epsilon_from_rates(tpr, fpr, delta))


def _peeking_epsilon(train_p, train_q, test_p, test_q, delta, beta) -> float:
    """INVALID by construction: threshold and side chosen on the certifying scores themselves."""
    return _certified_epsilon(test_p, test_q, test_p, test_q, delta, beta)["epsilon_lower_bound"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("variant", "mu", "delta"),
    [(_peeking_epsilon, 0.0, 1e-5), (_plug_in_epsilon, 0.0, 1e-5), (_plug_in_epsilon, 1.0, 0.05)],
    ids=["peeking-null", "plug-in-null", "plug-in-gaussian"],
)
def test_invalid_variants_are_caught(variant, mu, delta):
    """Positive controls: the assertion that passes the certificate FAILS each invalid variant on
    the same samples and splits. Measured misses/300 with these seeds (valid vs invalid): P = Q,
    3 vs 97 (peeking) and 3 vs 118 (plug-in); μ = 1, δ = 0.05, 2 vs 117 (plug-in). Peeking at
    μ = 1, δ = 0.05 missed only 27/300, too few to serve as a control there (the
    Clopper–Pearson slack hides most of the selection)."""
    truth = true_epsilon(mu, delta)
    valid = invalid = 0
    for rep in range(REPETITIONS):
        without, with_ = _scores(rep, mu)
        parts = (with_[N // 2 :], without[N // 2 :], with_[: N // 2], without[: N // 2])
        valid += _certified_epsilon(*parts, delta, BETA)["epsilon_lower_bound"] > truth
        invalid += variant(*parts, delta, BETA) > truth
    assert_coverage(valid, REPETITIONS, BETA)  # the certificate passes ...
    with pytest.raises(AssertionError, match="bounds missed the truth"):
        assert_coverage(invalid, REPETITIONS, BETA)  # ... the invalid variant is caught


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["score-rises", "loss-falls"])
def test_auroc_is_near_its_closed_form(sign):
    """AUROC of N(±μ, 1) against N(0, 1) is Φ(μ/√2), whichever way the member's score moves (the
    side is chosen on the training part: "lower" when the member's loss falls).

    Tolerance: the AUROC of m member and n non-member scores has variance at most
    A(1 − A)/min(m, n) (Cortes & Mohri 2004, Birnbaum–Klose bound); it is computed on the
    certifying 500 + 500, so the tolerance z·sqrt(A(1 − A)/500), with z the two-sided normal
    quantile at the suite's per-assertion level 2e-5 (z ≈ 4.3), fails a correct implementation
    with probability about 2e-5."""
    mu = 1.0
    without, with_ = _scores(0, sign * mu)
    r = membership_readouts(without, with_, random_state=0)
    auroc = stats.norm.cdf(mu / math.sqrt(2))
    z = stats.norm.isf(COVERAGE_PVALUE / 2)
    assert abs(r["auroc"] - auroc) <= z * math.sqrt(auroc * (1 - auroc) / 500)
    assert r["side"] == ("upper" if sign > 0 else "lower")
    assert r["n_test"] == [500, 500] and r["certified"] is True


def test_tpr_at_fpr_is_monotone_and_attained():
    """TPR at 0.1% FPR <= TPR at 1% FPR <= 1, each the TPR of a threshold whose FPR is at most the
    target (checked against a direct count on the certifying part's ROC)."""
    without, with_ = _scores(1, 1.5)
    r = membership_readouts(without, with_, random_state=1)
    assert list(r["tpr_at_fpr"]) == list(MEMBERSHIP_FPRS)
    low, high = r["tpr_at_fpr"]["0.001"], r["tpr_at_fpr"]["0.01"]
    assert 0.0 <= low <= high <= 1.0 and high > 0.0
    assert r["auroc"] > 0.5


def test_equal_distributions_give_no_certified_epsilon():
    """P = Q: nothing to certify; the bound is 0 (a positive one happens with probability at most
    β; this seed's is 0) and the AUROC is near 1/2 (same tolerance as above, A = 1/2)."""
    rng = np.random.default_rng(3)
    r = membership_readouts(rng.normal(size=600), rng.normal(size=600), random_state=3)
    assert r["epsilon_lower_bound"] == 0.0
    assert abs(r["auroc"] - 0.5) <= stats.norm.isf(COVERAGE_PVALUE / 2) * math.sqrt(0.25 / 300)


def test_epsilon_from_rates_is_the_hypothesis_testing_bound():
    """Both inequalities of (ε, δ)-DP: TPR <= e^ε FPR + δ and 1 − FPR <= e^ε (1 − TPR) + δ."""
    delta = 1e-3
    assert epsilon_from_rates(0.6, 0.1, delta) == pytest.approx(math.log((0.6 - delta) / 0.1))
    assert epsilon_from_rates(0.99, 0.5, delta) == pytest.approx(math.log((0.5 - delta) / 0.01))
    assert epsilon_from_rates(0.2, 0.4, delta) == 0.0
    assert epsilon_from_rates(delta / 2, 0.0, delta) == 0.0


@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-5, math.nan, "1e-5", True])
def test_bad_delta_is_refused(delta):
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="delta"):
        membership_readouts(rng.normal(size=20), rng.normal(size=20), delta=delta)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="too few"):
        membership_readouts([0.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="losses_with_canary"):
        membership_readouts([0.0, 1.0], [1.0, math.nan])
    with pytest.raises(ValueError, match="beta"):
        membership_readouts([0.0, 1.0], [1.0, 2.0], beta=1.5)


def _result() -> AuditResult:
    """An audit's result through rdpest.auditing.evaluate (the auditor's own evaluation) with two
    certified estimators, cheap ones (no critic to train)."""
    without, with_ = _scores(2, 1.0, 300)
    estimators = {
        "split": BernoulliTPRFPRBaseline(alpha=2.0, random_state=0),
        "bonferroni": BernoulliTPRFPRBaseline(alpha=2.0, threshold="bonferroni"),
    }
    return evaluate(without, with_, 0.1, alpha=2.0, beta=0.05, estimators=estimators)


def test_every_result_carries_the_readouts_without_touching_the_verdicts_beta():
    """The ε bound is a readout at the audit's level β; the two certified estimators keep their
    β/2 each (the readout takes no share)."""
    result = _result()
    m = result.membership
    assert m["beta"] == 0.05 and m["delta"] == 1e-5 and m["epsilon_lower_bound"] >= 0.0
    assert {e["beta"] for e in result.estimates.values()} == {0.025}
    assert m == membership_readouts(
        result.losses_without_canary, result.losses_with_canary, beta=0.05, random_state=0
    )
    line = next(x for x in result.summary().splitlines() if x.startswith("membership"))
    assert "AUROC" in line and "1% FPR" in line and "1e-05" in line


def test_json_round_trip_keeps_the_readouts_and_old_results_still_load():
    result = _result()
    back = AuditResult.from_json(result.to_json())
    assert back.membership == result.membership
    payload = json.loads(result.to_json())
    del payload["membership"]  # a result written before the readouts existed
    old = AuditResult.from_json(json.dumps(payload))
    assert old.membership == {} and "membership" not in old.summary()
    for bad, match in (([1, 2], "must be an object"), ({"auroc": 0.5}, "has no")):
        payload["membership"] = bad
        with pytest.raises(ValueError, match=match):
            AuditResult.from_json(json.dumps(payload))
    payload["membership"] = {**result.membership, "auroc": "high"}
    with pytest.raises(ValueError, match="must be numbers"):
        AuditResult.from_json(json.dumps(payload))


def test_the_plot_adds_an_roc_panel_last(tmp_path):
    """A result with readouts plots a third panel (the ROC, log-log); the ax= protocol counts it,
    and a result without readouts keeps its two panels."""
    from matplotlib.figure import Figure

    result = _result()
    assert result._plot_panel_count == 3
    fig = Figure()
    axes = fig.subplots(1, 3)
    assert result.plot(ax=axes) is axes
    roc = axes[2]
    assert roc.get_xscale() == "log" and "AUROC" in roc.get_title()
    labels = [line.get_label() for line in roc.lines]
    assert labels[:2] == ["ROC (all runs)", "chance"]
    assert any(label.startswith("certified ε") for label in labels)
    with pytest.raises(ValueError, match=r"sequence of 3 Axes .*membership ROC"):
        result.plot(ax=fig.subplots(1, 2))
    saved = result.plot(tmp_path / "audit.png")
    assert len(saved.axes) == 3 and (tmp_path / "audit.png").stat().st_size > 0
    result.membership = {}
    assert result._plot_panel_count == 2


# ----------------------------------------------------------------- the δ of an audit's readouts


def test_the_audits_membership_delta_reaches_the_readouts():
    """``membership_delta`` of evaluate (the auditor's own evaluation) is the readouts' δ: the
    readouts are membership_readouts' at that δ and the summary prints it."""
    result = _result()
    without, with_ = result.losses_without_canary, result.losses_with_canary
    estimators = {"bernoulli": BernoulliTPRFPRBaseline(alpha=2.0, random_state=0)}
    wide = evaluate(without, with_, 0.1, alpha=2.0, estimators=estimators, membership_delta=1e-2)
    m = wide.membership
    assert m["delta"] == 1e-2
    assert m == membership_readouts(without, with_, beta=0.05, delta=1e-2, random_state=0)
    assert "δ = 0.01)" in wide.summary()
    # The readout is not part of the verdict: the estimators' numbers do not move with δ.
    narrow = evaluate(without, with_, 0.1, alpha=2.0, estimators=estimators)
    assert wide.estimates == narrow.estimates and wide.verdict == narrow.verdict


@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-5, 2.0, math.nan, "1e-5", True])
def test_a_bad_membership_delta_is_refused_by_evaluate_and_the_auditor(delta):
    from rdpest.auditing import Auditor, GaussianMechanismScore

    without, with_ = _scores(2, 1.0, 50)
    with pytest.raises(ValueError, match="membership_delta"):
        evaluate(without, with_, 0.1, alpha=2.0, membership_delta=delta)
    mech = GaussianMechanismScore()
    with pytest.raises(ValueError, match="membership_delta"):
        Auditor(mech, 1.0, n_runs=20, progress=False, membership_delta=delta).run()


def test_the_membership_delta_flag_of_evaluate_and_audit(tmp_path, capsys, monkeypatch):
    from rdpest.cli import main

    without, with_ = _scores(2, 1.0, 100)
    np.save(tmp_path / "O.npy", without)
    np.save(tmp_path / "O_prime.npy", with_)
    files = [str(tmp_path / "O.npy"), str(tmp_path / "O_prime.npy")]
    command = ["evaluate", *files, "--claim", "0.1", "--alpha", "2", "--estimators", "bernoulli"]
    assert main([*command, "--json", "--membership-delta", "0.001"]) == 0
    assert json.loads(capsys.readouterr().out)["membership"]["delta"] == 0.001
    assert main([*command, "--json"]) == 0  # the default
    assert json.loads(capsys.readouterr().out)["membership"]["delta"] == 1e-5
    assert main([*command, "--membership-delta", "1.5"]) == 2  # a usage error naming the flag
    assert "--membership-delta must lie strictly between 0 and 1" in capsys.readouterr().err

    # rdpest audit hands the flag to DPSGDAuditor (stopped there: no training in this test).
    seen = {}

    class Stop(Exception):
        pass

    class FakeAuditor:
        def __init__(self, **kwargs):
            seen.update(kwargs)

        def _checked_settings(self):
            pass

        def run(self):
            raise Stop

    # Where rdpest.auditing's lazy attribute finds it (patching rdpest.auditing itself would
    # leave a concrete attribute behind once undone, hiding later patches of the same kind).
    monkeypatch.setattr("rdpest.auditing.dpsgd.DPSGDAuditor", FakeAuditor)
    audit = ["audit", "--runs", "10", "--steps", "2", "--n-jobs", "1", "--out", str(tmp_path / "a")]
    with pytest.raises(Stop):
        main(["--traceback", *audit, "--membership-delta", "0.02"])
    assert seen["membership_delta"] == 0.02
    with pytest.raises(Stop):
        main(["--traceback", *audit])
    assert seen["membership_delta"] == 1e-5


@pytest.mark.parametrize(
    "alpha, claim",
    [(2.0, 1.0), (2.0, 0.5), (1.5, 0.5), (2.0, 0.1), (8.0, 2.0), (1.01, 0.05), (64.0, 4.0)],
)
def test_the_tpr_ceiling_is_attained_by_a_pair_that_meets_the_claim(alpha, claim):
    """The ceiling printed beside the measured TPR at 1% FPR is the largest any pair of laws
    within the claim allows: the Bernoulli pair at it meets the claim in both directions (to
    the solver's tolerance) and a TPR 1e-6 above it does not. Mironov's bound, printed before,
    was above it: 0.165 against 0.140 at ε_2 = 1, 0.105 against 0.042 at ε_2 = 0.1, so a
    measured TPR between the two refuted the claim while the line said it was allowed."""
    ceiling = tpr_ceiling(alpha, claim, 0.01)
    divergences = [
        bernoulli_renyi_divergence(alpha, ceiling, 0.01),
        bernoulli_renyi_divergence(alpha, 0.01, ceiling),
    ]
    assert max(divergences) == pytest.approx(claim, rel=1e-9)
    above = ceiling + 1e-6
    assert (
        max(
            bernoulli_renyi_divergence(alpha, above, 0.01),
            bernoulli_renyi_divergence(alpha, 0.01, above),
        )
        > claim
    )
    mironov = min((math.exp(claim) * 0.01) ** ((alpha - 1) / alpha), 1.0)
    assert ceiling <= mironov + 1e-12  # never looser than the bound it replaced
    assert tpr_ceiling(alpha, 0.0, 0.01) == 0.01  # no divergence: no test beats chance


@pytest.mark.parametrize(
    "claim, shown", [(1.0, "0.1405"), (1e-9, "0.01001"), (0.0, "0.01000"), (1e6, "1.000")]
)
def test_the_printed_tpr_ceiling_is_rounded_up_to_four_digits(claim, shown):
    """Diff reviewer's finding: three decimals printed 0.011 for a ceiling of 0.0100001 (claim
    1e-9), 10% above it; four significant digits, rounded up, stay within 0.1%."""
    readouts = {"auroc": 0.5, "tpr_at_fpr": {"0.01": 0.01}, "epsilon_lower_bound": 0.0}
    line = membership_line({**readouts, "delta": 1e-5, "beta": 0.05}, 2.0, claim)
    assert f"the claim allows a true TPR of at most {shown})" in line


@pytest.mark.parametrize("claim", [0.506265664160401, 1.0, 1e-9, 3.7, 40.0])
def test_the_printed_implied_epsilon_is_never_below_what_the_claim_implies(claim):
    """The (ε, δ) the claim implies is a ceiling, printed rounded to nearest (".4g") it read
    10.63 for 10.6329 (claim 0.5063): below the claim's own ε. Now four significant digits,
    rounded up; the value shown is at least the exact one and within 0.1% of it."""
    readouts = {"auroc": 0.5, "tpr_at_fpr": {"0.01": 0.01}, "epsilon_lower_bound": 0.0}
    line = membership_line({**readouts, "delta": 1e-5, "beta": 0.05}, 2.0, claim)
    shown = float(line.split("at this one order implies ε <= ")[1].split(" ")[0])
    exact = rdp_to_dp(claim, 2.0, 1e-5)
    assert exact <= shown <= exact * (1 + 1e-3)


def test_the_summary_says_what_the_claim_allows_and_how_fine_the_fpr_is():
    """Bug: the summary printed "claimed epsilon_alpha = 1", then "certified (ε, δ = 1e-05) lower
    bound ε >= 1.564", then "no certified lower bound exceeds the claimed ε_2 = 1", which read as
    a contradiction: the 1.564 is an (ε, δ)-DP ε, and ε_2 = 1 implies ε <= 11.13 at that δ
    (Balle et al. 2020, Thm 21) and TPR <= 0.1404 at 1% FPR (tpr_ceiling; the line once gave
    Mironov's looser 0.165). And with 5 certifying runs without the canary, "TPR at 1% FPR" was
    the TPR at zero false positives, unsaid."""
    rng = np.random.default_rng(0)
    fast = {"bernoulli": BernoulliTPRFPRBaseline(alpha=2.0, direction="max", random_state=0)}
    result = evaluate(rng.normal(0, 1, 400), rng.normal(1, 1, 400), 1.0, alpha=2.0, estimators=fast)
    line = next(x for x in result.summary().splitlines() if x.startswith("membership"))
    # at the FPR the 200 certifying runs without the canary resolve: 3/201 on average
    shown = f"{math.ceil(tpr_ceiling(2.0, 1.0, 3 / 201) * 1e4) / 1e4:.4f}"
    assert f"the claim allows a true TPR of at most {shown} at that threshold's FPR" in line
    assert "(ε_2 = 1 at this one order implies ε <= 11.13 at this δ)" in line
    assert "no false positive" not in line  # 200 certifying runs resolve 1%
    few = evaluate(rng.normal(0, 1, 10), rng.normal(1, 1, 10), 1.0, alpha=2.0, estimators=fast)
    assert "no false positive among the 5 certifying runs without the canary" in few.summary()
    # DP-SGD review: the ceiling was the one at 1% FPR, where that threshold's true FPR is
    # Beta(1, 5), 1/6 on average: an honest pipeline's TPR read as beating the claim.
    shown = f"{math.ceil(tpr_ceiling(2.0, 1.0, 1 / 6) * 1e4) / 1e4:.4f}"
    assert f"at most {shown} at that threshold's FPR (1/6 on average))" in few.summary()


def test_a_claim_made_in_epsilon_delta_is_named_beside_the_membership_bound():
    """DP-SGD review: with target (ε, δ) = (8, 1e-5), the summary named only the ε_2 = 2.459 that
    Opacus's σ gives, and the membership line "(the claim implies ε <= 12.59 at this δ)": a
    membership bound between 8 and 12.59 would refute the user's claim and read as within it."""
    readouts = {"auroc": 0.5, "tpr_at_fpr": {"0.01": 0.01}, "epsilon_lower_bound": 0.0}
    dp = {"dp_claim": {"epsilon": 8.0, "delta": 1e-5, "noise_multiplier": 2.0166}}
    line = membership_line({**readouts, "delta": 1e-5, "beta": 0.05}, 2.0, 2.459, dp)
    assert "(the claim: ε <= 8 at this δ; ε_2 = 2.459 at this one order implies ε <= 12.5" in line
    # an (8, 1e-5) claim says nothing at δ = 1e-6; an (8, 1e-6) claim implies (8, 1e-5)
    other = membership_line({**readouts, "delta": 1e-6, "beta": 0.05}, 2.0, 2.459, dp)
    assert "the claim: ε <=" not in other
    dp["dp_claim"]["delta"] = 1e-6
    line = membership_line({**readouts, "delta": 1e-5, "beta": 0.05}, 2.0, 2.459, dp)
    assert "(the claim: ε <= 8 at this δ;" in line


@pytest.mark.parametrize("m, k", [(50, 0), (99, 0), (100, 1), (150, 1), (200, 2), (400, 4)])
def test_the_tpr_ceiling_is_read_at_the_readouts_expected_fpr_for_every_size(m, k):
    """Diff review: the ceiling was read at 1% from m = 100 certifying runs without the canary
    on, where the readout's threshold admits k = floor(m/100) false positives and its true FPR
    is (k + 1)/(m + 1) on average (above 1% for every m): an honest mechanism at its claim
    printed a TPR above the ceiling in 44% of audits at m = 100, against 20% at m = 99."""
    readouts = {"auroc": 0.5, "tpr_at_fpr": {"0.01": 0.01}, "epsilon_lower_bound": 0.0}
    line = membership_line({**readouts, "delta": 1e-5, "beta": 0.05, "n_test": [m, m]}, 2.0, 1.0)
    ceiling = tpr_ceiling(2.0, 1.0, (k + 1) / (m + 1))
    shown = f"{math.ceil(ceiling * 1e4) / 1e4:.4f}"
    assert f"at most {shown} at that threshold's FPR ({k + 1}/{m + 1} on average)" in line
    assert ("no false positive among" in line) == (k == 0)


def test_the_roc_panel_shows_its_markers_and_the_table_its_levels():
    """Verdict reviewer's findings: with 40 runs without the canary the ROC's x axis began at
    0.5/40 = 0.0125, so the markers at FPR 0.01 and 0.001 were drawn outside it (the legend
    still listed them); and at beta = 0.001 (0.0005 per estimator) the level column printed
    1.000, which reads as certainty."""
    from matplotlib.figure import Figure

    without, with_ = _scores(2, 1.0, 40)
    estimators = {
        "split": BernoulliTPRFPRBaseline(alpha=2.0, random_state=0),
        "bonferroni": BernoulliTPRFPRBaseline(alpha=2.0, threshold="bonferroni"),
    }
    result = evaluate(without, with_, 0.1, alpha=2.0, beta=0.001, estimators=estimators)
    axes = Figure().subplots(1, 3)
    result.plot(ax=axes)
    low, high = axes[2].get_xlim()
    assert low <= 0.001 and high == 1.0
    rows = [line for line in result.summary().splitlines() if line.startswith("split")]
    assert rows and "0.9995" in rows[0] and "1.000" not in rows[0]
    # Diff reviewer's finding: below 5e-16 the level printed 1.000 again, and from 1e-6 down
    # it overflowed the 8-character column.
    from rdpest.auditing.result import _level_text

    for beta, text in ((1e-9, "1-1e-09"), (4e-16, "1-4e-16"), (1e-100, "1-1e-100")):
        assert _level_text(beta) == text and len(text) <= 8
