"""What an audit could have seen: the ceiling of its certificates and the divergence it detects.

Every audit result carries ``power``:

- ``max_certifiable``: the largest bound the audit's certified estimators can produce from its
  sample sizes at their shares of β, whatever the scores (perfectly separated scores reach it;
  :meth:`rdpest.estimators.base.RenyiEstimatorBase.max_certifiable`). A claim at or above it
  cannot be refuted by this audit: the verdict is then "underpowered".
- ``detectable_epsilon``: the smallest ε_α that the audit flags with probability at least
  ``target_power`` when the scores follow ``reference_model`` (:mod:`rdpest.stats.power`: Gaussian
  location scores, the shape of DP-SGD's privacy loss), predicted from each certified
  estimator's threshold test at its share of β and taking the best; None when no estimator's
  test can exceed the claim.
"""

from __future__ import annotations

import math

from rdpest.stats.power import detectable_divergence

__all__ = ["TARGET_POWER", "audit_power", "power_sentence", "verdict_of"]

#: The probability of detection that ``detectable_epsilon`` is computed for.
TARGET_POWER = 0.8


def audit_power(estimators: dict, n_with: int, n_without: int, claim: float, alpha: float):
    """The ``power`` record of an audit.

    ``estimators``: name -> estimator, each with its share of β already set (unfitted is fine).
    Their first sample is O′ (with the canary, ``n_with`` runs), their second O.
    """
    certified = [e for e in estimators.values() if e.will_be_certified()]
    ceiling = max((e.max_certifiable(n_with, n_without) for e in certified), default=0.0)
    detectable = math.inf
    if ceiling > claim:
        for est in certified:
            design = est._threshold_design(n_with, n_without)
            if design is not None:
                n_p, n_q, level_p, level_q = design
                detectable = min(
                    detectable,
                    detectable_divergence(
                        n_p, n_q, alpha, level_p, level_q, claim, TARGET_POWER, random_state=0
                    ),
                )
    return {
        "max_certifiable": float(ceiling),
        "detectable_epsilon": detectable if math.isfinite(detectable) else None,
        "target_power": TARGET_POWER,
        "reference_model": "gaussian_location",
    }


def verdict_of(violation: bool, power: dict, claim: float) -> str:
    """ "violation", else "underpowered" when the claim is at or above every certificate's
    ceiling, else "not_refuted"."""
    if violation:
        return "violation"
    if power.get("max_certifiable", math.inf) <= claim:
        return "underpowered"
    return "not_refuted"


def power_sentence(verdict: str, power: dict, n_runs: int, alpha: float, claim: float) -> str:
    """The verdict in words, with what the audit could have seen."""
    eps = f"ε_{alpha:g}"
    ceiling = power.get("max_certifiable")
    detectable = power.get("detectable_epsilon")
    target = power.get("target_power", TARGET_POWER)
    if verdict == "violation":
        return f"violation: a certified lower bound exceeds the claimed {eps} = {claim:.4g}"
    if verdict == "underpowered":
        return (
            f"underpowered: with {n_runs} runs per side no certified bound can exceed "
            f"{ceiling:.3g} (even perfectly separated scores), at or below the claimed "
            f"{eps} = {claim:.4g}; this audit could not have refuted the claim"
        )
    if detectable is None:
        return f"not refuted: no certified lower bound exceeds the claimed {eps} = {claim:.4g}"
    return (
        f"not refuted: with {n_runs} runs per side this audit detects {eps} >= {detectable:.3g} "
        f"with {target:.0%} probability (reference: Gaussian location scores); no certified "
        f"lower bound exceeds the claimed {eps} = {claim:.4g}"
    )
