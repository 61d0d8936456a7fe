"""The audit's own error rate: an honest pipeline is accused with probability at most beta.

The verdict is "violation" when a CERTIFIED estimator's bound exceeds the claim; the certified
estimators share beta (beta/k each, a union bound) and uncertified ones (the GDP route) are
reported but never decide. These tests check the rule (quick, deterministic) and the resulting
error rate (slow, statistical).
"""

from __future__ import annotations

import numpy as np
import pytest

from rdpest import BernoulliTPRFPRBaseline
from rdpest.auditing import Auditor
from rdpest.auditing.auditor import default_estimators
from tests.helpers import assert_coverage, coverage_power, false_violations, null_score

ALPHA = 2.0
SMALL_DV = {"hidden_layer_sizes": (8,), "max_epochs": 20}


def _estimators(random_state: int) -> dict:
    """The default estimators with a small DV critic (validity does not depend on the critic;
    n_repeats is left at 1 and the point estimate at "split" since neither changes the bound,
    see tests/estimators/test_coverage_of_what_users_run.py and test_dv_point_estimate.py)."""
    estimators = default_estimators(ALPHA, random_state)
    estimators["dv"] = estimators["dv"].set_params(n_repeats=1, point_estimate="split", **SMALL_DV)
    return estimators


class _CertifiesNothing(BernoulliTPRFPRBaseline):
    """A test double: a certified estimator whose bound is always 0."""

    def fit(self, X, Y=None):
        super().fit(X, Y)
        self.lower_bound_ = 0.0
        return self


def test_uncertified_estimators_never_decide_the_verdict():
    """Bug caught: a verdict taken over every estimator's bound. The GDP route assumes a Gaussian
    trade-off curve; here its bound is far above the claim, and the verdict must ignore it."""
    rng = np.random.default_rng(0)
    without, with_ = rng.normal(0.0, 1.0, 300), rng.normal(3.0, 1.0, 300)
    gdp = BernoulliTPRFPRBaseline(alpha=ALPHA, conversion="gdp", random_state=0)
    assert not gdp.will_be_certified()
    # Alone it could never find a violation: the audit is refused, not called "underpowered".
    with pytest.raises(ValueError, match=r"none of the estimators \(gdp_route\) is certified"):
        Auditor(null_score, 0.2, alpha=ALPHA, estimators={"gdp_route": gdp}).evaluate(
            without, with_
        )
    estimators = {"gdp_route": gdp, "weak": _CertifiesNothing(alpha=ALPHA, random_state=0)}
    result = Auditor(null_score, 0.2, alpha=ALPHA, estimators=estimators).evaluate(without, with_)
    assert result.estimates["gdp_route"]["lower_bound"] > 0.2  # it would have decided ...
    assert result.estimates["gdp_route"]["certified"] is False
    assert result.verdict != "violation"  # ... but it must not
    # The same samples with a certified estimator added: that one decides.
    auditor = Auditor(
        null_score,
        0.2,
        alpha=ALPHA,
        estimators={
            "gdp_route": gdp,
            "bernoulli": BernoulliTPRFPRBaseline(alpha=ALPHA, random_state=0),
        },
    )
    assert auditor.evaluate(without, with_).verdict == "violation"


def test_beta_sharing_follows_the_documented_rule():
    """Certified estimators get beta/k each (k = how many are certified), uncertified ones the
    full beta, and each estimator is really fitted at its share: its bound equals a standalone
    fit at that level with direction="max" on (O', O). Bug caught: a share that is recorded but
    not used, or one that counts the uncertified GDP route."""
    rng = np.random.default_rng(1)
    without, with_ = rng.normal(0.0, 1.0, 200), rng.normal(1.0, 1.0, 200)
    estimators = _estimators(3)
    result = Auditor(null_score, 1.0, alpha=ALPHA, beta=0.1, estimators=estimators).evaluate(
        without, with_
    )
    assert {name: e["beta"] for name, e in result.estimates.items()} == {
        "dv": 0.05,
        "bernoulli": 0.05,
        "gdp_route": 0.1,
    }
    for name, template in estimators.items():
        level = result.estimates[name]["beta"]
        alone = template.set_params(beta=level, direction="max").fit(with_, without)
        assert result.estimates[name]["lower_bound"] == alone.lower_bound_


# Honest audits: R = 300 at beta = 0.1 detects a false-violation rate of 2 beta with power >= 0.8
# (tests.helpers.repetitions_for_power).
AUDIT_BETA, AUDITS, RUNS = 0.1, 300, 200


@pytest.mark.slow
@pytest.mark.parametrize("pipeline", ["at_the_claim", "canary_has_no_effect"])
def test_honest_audits_say_violation_at_most_beta_of_the_time(pipeline):
    """Many independent audits of honest pipelines: the Gaussian mechanism whose true epsilon_2
    equals the claim exactly (the hardest honest case), and a pipeline the canary does not
    touch (P = Q) with a claim of 0. Both arms use the audit defaults (dv and bernoulli
    certified at beta/2 each, the GDP route reported only)."""
    assert coverage_power(AUDITS, AUDIT_BETA, 2 * AUDIT_BETA) >= 0.8
    violations = false_violations(
        pipeline, ALPHA, AUDITS, _estimators, beta=AUDIT_BETA, n_runs=RUNS
    )
    assert_coverage(violations, AUDITS, AUDIT_BETA)
