"""What an audit could have seen: the ceiling of its certificates and the divergence it detects.

Every audit result carries ``power``:

- ``max_certifiable``: a ceiling on the bounds the audit's certified estimators can produce
  from its sample sizes at their shares of β, whatever the scores (their best certificates on
  perfectly separated scores; a fit that picks its certificate on training data can stay below
  it: :meth:`rdpest.estimators.base.RenyiEstimatorBase.max_certifiable`). A claim at or above it
  cannot be refuted by this audit: the verdict is then "underpowered".
- ``separated``: whether every score with the canary lies above every score without it, or
  below (set by the audit from its scores). Such scores are the strongest evidence its runs can
  give; if no certified bound exceeds the claim even then, the audit cannot tell the claim from
  a far larger divergence, and the verdict is "underpowered", not "not_refuted".
- ``constant``: whether every score of both arms is one and the same number (set by the audit).
  The score function then varies neither with the run nor with the canary, and no number of
  runs could show a divergence through it: the verdict is "underpowered", with a sentence that
  names the score function, not the number of runs, as the cause.
- ``detectable_epsilon``: the smallest ε_α that the audit flags with probability at least
  ``target_power`` when the scores follow ``reference_model`` (:mod:`rdpest.stats.power`:
  Gaussian location scores, the shape of DP-SGD's privacy loss), predicted from each certified
  estimator's certificates (its threshold test; the DV estimator's variational bracket with the
  exact log-ratio critic) at its share of β, taking the best; None when none can exceed the
  claim. The exact critic makes the model optimistic, so the ε is where it predicts
  ``model_power`` (:data:`MODEL_POWER`, above ``target_power``). Predictions and audits'
  realised power, at that ε among other cells, are in benchmarks/results/auditing/power.md.
  It is a divergence between the laws of the scores with and without the canary, at most the
  pipeline's (data processing) and possibly far below it: a canary that barely moves the
  model, or a score swamped by the randomness of initialisation or sampling, hides a
  violation of any size, and the sentence says so.
- ``unmodelled``: the certified estimators whose power the model does not cover at the audit's
  α, claim and sample sizes (the DV estimator above α = 2, or for a claim above 3/8 of the
  largest bound it can certify: there its learned critic realised less power than the model
  states; :meth:`rdpest.estimators.base.RenyiEstimatorBase._power_modelled`). They still vote
  in the verdict, but ``detectable_epsilon`` and ``runs_needed`` count only the others, and
  are None where no other can exceed the claim.
- ``runs_needed`` (an audit with a power target it did not reach): the fewest runs per side, at
  least the audit's, with which the model detects the target; None where no number can be
  named: beyond ten million runs, constant scores (no number of runs helps), or perfectly
  separated scores below a ceiling above the claim (the model credits the audit's own runs with
  the target, which its scores did not certify: the sentence says to run more, without a
  number); :func:`unsized`.
"""

from __future__ import annotations

import math

from rdpest.stats.power import (
    bracket_power,
    detectable_divergence_of,
    threshold_divergence_floor,
    threshold_power,
)

__all__ = [
    "MODEL_POWER",
    "TARGET_POWER",
    "audit_power",
    "power_sentence",
    "runs_needed",
    "unsized",
    "verdict_of",
    "violation_probability",
]

# runs_needed searches up to this many runs per side.
_MAX_RUNS_SEARCHED = 10_000_000

#: The probability of detection that ``detectable_epsilon`` states.
TARGET_POWER = 0.8
#: The reference model's power at which ``detectable_epsilon`` is computed. The model credits the
#: DV estimator with the exact log-ratio critic; an audit learns its critic, and realised less
#: power than the model predicts near :data:`TARGET_POWER` (the "at detectable" cells of
#: benchmarks/results/auditing/power.md). The ε said to be detected with ``TARGET_POWER``
#: probability is therefore where the model predicts this higher power, at which those audits
#: realised at least ``TARGET_POWER``.
MODEL_POWER = 0.9


def audit_power(estimators: dict, n_with: int, n_without: int, claim: float, alpha: float):
    """The ``power`` record of an audit.

    ``estimators``: name -> estimator, each with its share of β already set (unfitted is fine).
    Their first sample is O′ (with the canary, ``n_with`` runs), their second O.
    """
    certified = {name: e for name, e in estimators.items() if e.will_be_certified()}
    ceilings = {name: e.max_certifiable(n_with, n_without) for name, e in certified.items()}
    ceiling = max(ceilings.values(), default=0.0)
    modelled = {
        name: e
        for name, e in certified.items()
        if e._power_modelled(n_with, n_without, claim, ceiling=ceilings[name])
    }
    unmodelled = sorted(set(certified) - set(modelled))
    detectable = (
        _detectable(list(modelled.values()), n_with, n_without, claim, alpha)
        if ceiling > claim
        else None
    )
    return {
        "max_certifiable": float(ceiling),
        "detectable_epsilon": detectable,
        "target_power": TARGET_POWER,
        "model_power": MODEL_POWER,
        "reference_model": "gaussian_location",
        # certified estimators whose power the model does not cover here: not counted
        "unmodelled": unmodelled,
    }


def _detectable(modelled: list, n_with: int, n_without: int, claim: float, alpha: float):
    """The smallest ε_α that some of the ``modelled`` estimators (certified, their power
    counted at these sizes and claim) detects with :data:`TARGET_POWER` probability, i.e.
    :data:`MODEL_POWER` under the model (None: none), its directions counted as in
    :func:`violation_probability`: each direction needs 1 − (1 − power)^{1/tries}."""
    best = math.inf
    for est in modelled:
        designs = est._power_designs(n_with, n_without)
        per_try = 1.0 - (1.0 - MODEL_POWER) ** (1.0 / designs.pop("tries"))
        best = min(best, detectable_divergence_of(alpha, claim, **designs, power=per_try))
    return best if math.isfinite(best) else None


def violation_probability(
    estimators: dict, n_with: int, n_without: int, divergence: float, claim: float, alpha: float
) -> float:
    """Predicted probability that an audit with these estimators (each at its share of β) says
    "violation" when the scores follow the reference model at D_α = ``divergence``.

    Per estimator: the better of its certificates in one direction (p), and the directions of
    ``direction="max"`` counted as independent tries, 1 − (1 − p)², since each draws its own
    certifying split; over estimators, the largest (they see the same samples). The model's
    other approximations are in :mod:`rdpest.stats.power`; the prediction is checked against
    realised power in benchmarks/results/auditing/power.md."""
    best = 0.0
    for est in estimators.values():
        if not est._power_modelled(n_with, n_without, claim):
            continue  # its power is not counted (audit_power's "unmodelled")
        designs = est._power_designs(n_with, n_without)
        p = 0.0
        if designs["threshold"] is not None:
            n_p, n_q, level_p, level_q, *training = designs["threshold"]
            p = threshold_power(
                divergence, n_p, n_q, alpha, level_p, level_q, claim, training=training or None
            )
        if designs["bracket"] is not None:
            n_p, n_q, level, method, bound = designs["bracket"]
            p = max(p, bracket_power(divergence, n_p, n_q, alpha, level, claim, method, bound))
        best = max(best, 1.0 - (1.0 - p) ** designs["tries"])
    return float(best)


def runs_needed(
    estimators: dict, claim: float, alpha: float, target: float, start: int = 2
) -> int | None:
    """The fewest runs per side (within 5%, at least ``start``) with which the estimators (each
    at its share of β) detect ε_α >= ``target`` with :data:`TARGET_POWER` probability
    (:data:`MODEL_POWER` under the reference model, as ``detectable_epsilon``); None beyond ten
    million, or where the model covers none of them (``power["unmodelled"]``)."""
    certified = [e for e in estimators.values() if e._power_model_covers_order()]
    if not certified:  # no estimator whose power the model covers: nothing to size
        return None
    # Threshold tests alone cannot reach a target below their floor at any size: answer at once
    # instead of searching (and tabulating Clopper–Pearson limits) up to ten million runs.
    large = [e._power_designs(_MAX_RUNS_SEARCHED, _MAX_RUNS_SEARCHED) for e in certified]
    if all(d["bracket"] is None for d in large) and target < threshold_divergence_floor(
        alpha, claim
    ):
        return None

    def enough(n: int) -> bool:
        modelled = [e for e in certified if e._power_modelled(n, n, claim)]
        detectable = _detectable(modelled, n, n, claim, alpha)
        return detectable is not None and detectable <= target

    if enough(start):  # never fewer runs than the audit already had
        return int(start)
    lo, hi = max(1, start // 2), max(2, start)
    while not enough(hi):
        lo, hi = hi, 2 * hi
        if hi > _MAX_RUNS_SEARCHED:
            return None
    while hi - lo > max(1, 0.05 * hi):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return int(hi)


def unsized(power: dict, claim: float) -> bool:
    """Whether no number of runs is named for these scores (``runs_needed`` None): constant
    scores, or perfectly separated ones although the audit's ceiling exceeds the claim (the
    model already credits its runs with the target). Separated scores below the ceiling are
    sized as any: more runs raise the ceiling."""
    separated = power.get("separated", False) and power.get("max_certifiable", 0.0) > claim
    return bool(power.get("constant", False) or separated)


def claim_text(claim: float) -> str:
    """The claim rounded to the bounds' four decimals (so that a bound printed beside it reads as
    above or below it as the verdict says), without trailing zeros; significant digits where
    four decimals show nothing."""
    if claim == 0.0 or claim >= 1e-3:
        return f"{claim:.4f}".rstrip("0").rstrip(".")
    return f"{claim:.4g}"


def dp_claim_text(config: dict) -> str:
    """Where the audited ε_α comes from when the claim was made in (ε, δ) (``config["dp_claim"]``,
    recorded by DPSGDAuditor's ``target_epsilon`` and ``target_delta``); "" otherwise.

    >>> dp_claim_text({"dp_claim": {"epsilon": 8.0, "delta": 1e-5, "noise_multiplier": 2.0166}})
    ' (from the claimed (ε, δ) = (8, 1e-05): Opacus solved noise multiplier 2.017 for it)'
    """
    claim = dp_claim_of(config)
    if claim is None:
        return ""
    return (
        f" (from the claimed (ε, δ) = ({claim['epsilon']:g}, {claim['delta']:g}): Opacus solved "
        f"noise multiplier {claim['noise_multiplier']:.4g} for it)"
    )


def dp_claim_of(config) -> dict | None:
    """``config["dp_claim"]`` where it is a claim's record (finite numbers ε > 0, δ in (0, 1)
    and a noise multiplier), else None: a result file edited by hand must not break its
    summary (diff review: a record without its noise multiplier raised KeyError)."""
    claim = config.get("dp_claim") if isinstance(config, dict) else None
    if not isinstance(claim, dict):
        return None
    numbers = [claim.get(key) for key in ("epsilon", "delta", "noise_multiplier")]
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in numbers):
        return None
    if not (all(math.isfinite(v) for v in numbers) and numbers[0] > 0 and 0 < numbers[1] < 1):
        return None
    return claim


def verdict_of(violation: bool, power: dict, claim: float) -> str:
    """ "violation", else "underpowered" when the claim is at or above every certificate's
    ceiling, the scores are perfectly separated (``power["separated"]``: the strongest
    evidence the runs can give, and still no bound above the claim) or all one number
    (``power["constant"]``), else "not_refuted"."""
    if violation:
        return "violation"
    if power.get("constant", False) or power.get("separated", False):
        return "underpowered"
    if power.get("max_certifiable", math.inf) <= claim:
        return "underpowered"
    return "not_refuted"


def power_sentence(verdict: str, power: dict, n_runs: int, alpha: float, claim: float) -> str:
    """The verdict in words, with what the audit could have seen."""
    eps = f"ε_{alpha:g}"
    ceiling = power.get("max_certifiable")
    detectable = power.get("detectable_epsilon")
    target = power.get("target_power", TARGET_POWER)
    claimed = claim_text(claim)
    if verdict == "violation":
        return f"violation: a certified lower bound exceeds the claimed {eps} = {claimed}"
    shortfall = ""
    if "runs_needed" in power:
        # results written before the power target was renamed call it "target_epsilon"
        target_epsilon = power.get("power_target", power.get("target_epsilon"))
        goal = f"{eps} >= {target_epsilon:.3g}"
        needed = power["runs_needed"]
        shortfall = (
            f"; to detect {goal} with {target:.0%} probability it would need about {needed} runs "
            "per side"
            if needed is not None
            else f"; no audit below ten million runs per side detects {goal}"
        )
    if verdict == "underpowered" and power.get("constant", False):
        return (
            f"underpowered: all {2 * n_runs} scores are the same number, with the canary and "
            "without: the score function varies neither with the run nor with the canary, so no "
            "number of runs could show a divergence through it; check that it returns the "
            "canary's loss after a training run seeded by its seed"
        )
    if verdict == "underpowered" and power.get("separated", False) and ceiling > claim:
        return (
            f"underpowered: every score with the canary lies on one side of every score without "
            f"it (perfect separation, the strongest evidence {n_runs} runs per side can give), "
            f"yet no certified bound exceeds the claimed {eps} = {claimed}: such "
            "scores fit a divergence far above the claim as well as one below it; run more"
            + (shortfall if power.get("runs_needed") is not None else "")
        )
    if verdict == "underpowered":
        return (
            f"underpowered: with {n_runs} runs per side no certified bound can exceed "
            f"{ceiling:.3g} (even perfectly separated scores), at or below the claimed "
            f"{eps} = {claimed}; this audit could not have refuted the claim" + shortfall
        )
    # Certified estimators the power model does not cover at this α, claim and number of runs
    # (results written before the record had the key counted all of theirs).
    unmodelled = power.get("unmodelled") or []
    uncounted = (
        f"; the power of {' and '.join(unmodelled)} is not counted (the model overstates it "
        f"at α = {alpha:g} for this claim and number of runs)"
        if unmodelled
        else ""
    )
    if detectable is None:
        # Review: "not refuted" alone (a Markov bound, or DV at α = 4) read as a clean bill;
        # without a stated power, nothing says how large a violation could have gone unseen.
        return (
            f"not refuted: no certified lower bound exceeds the claimed {eps} = {claimed}; this "
            f"audit states no ε_{alpha:g} it detects with {target:.0%} probability, so a "
            "violation of any size may have gone unseen" + uncounted + shortfall
        )
    return (
        f"not refuted: with {n_runs} runs per side this audit detects {eps} >= {detectable:.3g} "
        f"between the scores with and without the canary with {target:.0%} probability "
        "(reference: Gaussian location scores; a violation the canary's score does not show "
        f"goes unseen at any size); no certified lower bound exceeds the claimed {eps} = "
        f"{claimed}" + uncounted + shortfall
    )
