"""Audit power: predicted against realised, and fixed-size against sequential audits.

1. ``--validate``: for Gaussian location scores (the reference model of rdpest.stats.power) at
   several (runs per side, D_α, α), R independent audits with the default estimators (the DV
   point estimate's extra partitions left out: ``n_repeats=1``, which does not change the bound)
   give the realised probability of a "violation" verdict; beside it, the probability the power
   model predicts (rdpest.auditing.power.violation_probability) and the difference. Cells
   above the order up to which the DV estimator's power is counted get their own table, with
   what the model predicted when it was counted there too.
3. ``--dpsgd``: the DP-SGD audit on scikit-learn's digits (logistic regression, 100 full-batch
   steps, noise multiplier 10: claimed ε₂ = 1): ten independent sequential audits (500 up to
   5,000 runs per side, no power target) of the trainer that adds 0.7× the claimed noise (true
   ε_α about 2× the claim) and ten of the honest trainer, at α = 2 and at α = 1.25: how many say
   violation and the median runs per side used. The audits' run stores go to
   benchmarks/results/auditing/power/stores/ (not committed; a re-run resumes from them, and the
   α = 1.25 audits reuse the α = 2 audits' models).
2. ``--synthetic``: Gaussian-mechanism audits whose true ε_α is 1.25, 1.5, 2 and 4 times the
   claim: the probability of a violation verdict and the median runs per side used, by a
   fixed-size audit of ``max_runs`` runs and by a sequential audit from ``max_runs / 8`` up to
   the same ``max_runs``.
4. ``--bernoulli-only``: audits with the Bernoulli baseline as their only estimator (``rdpest
   evaluate --estimators bernoulli``), at the detectable ε such an audit reports: the realised
   power against the stated 80% and the model's prediction, and each direction's realised power
   against the model's (which credits the threshold with its best placement; the fit chooses it
   on a training split).

Each finished audit is appended to a JSON-lines file under benchmarks/results/auditing/power/,
so an interrupted run resumes; the tables (power.md, power.json) are rewritten from all finished
audits at the end. Run: ``python benchmarks/bench_power.py --validate --synthetic``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from harness import check_flags, output_folder
from sklearn.base import clone
from tqdm.auto import tqdm

from rdpest import DVRenyiEstimator
from rdpest.auditing import Auditor, GaussianMechanismScore
from rdpest.auditing.auditor import default_estimators
from rdpest.auditing.power import (
    MODEL_POWER,
    TARGET_POWER,
    audit_power,
    violation_probability,
)
from rdpest.stats.conversions import dpsgd_epsilon_alpha, rdp_of_gaussian_mechanism
from rdpest.stats.power import threshold_power
from rdpest.utils.io import atomic_write_text

OUT = Path(__file__).resolve().parent / "results" / "auditing"
RECORDS = OUT / "power"
BETA = 0.05

# (alpha, claim, runs per side, true D_alpha): the validation cells.
VALIDATION_CELLS = [
    (2.0, 1.0, 500, 2.0),
    (2.0, 1.0, 500, 4.0),
    (2.0, 1.0, 1000, 2.0),
    (2.0, 1.0, 1000, 3.0),
    (2.0, 1.0, 2000, 1.5),
    (2.0, 1.0, 2000, 2.0),
    (1.25, 0.5, 1000, 1.0),
    (1.25, 0.5, 1000, 1.5),
]
# Cells added after the model was last changed (its two directions counted as independent
# tries, chosen by comparing with the cells above): an out-of-sample check.
HELD_OUT_CELLS = [
    (2.0, 1.0, 750, 2.5),
    (2.0, 1.0, 3000, 1.5),
    (1.25, 0.5, 500, 1.5),
    (4.0, 2.0, 1000, 4.0),
]
# (alpha, claim, runs per side): cells at the detectable epsilon such an audit reports ("detects
# epsilon_alpha >= X with 80% probability", computed by rdpest.auditing.power.audit_power), the
# point where the verdict's sentence states a power; the model predicts MODEL_POWER there.
AT_DETECTABLE_CELLS = [
    (2.0, 1.0, 200),
    (2.0, 1.0, 500),
    (2.0, 1.0, 1000),
    (1.25, 0.5, 500),
    (1.25, 0.5, 1000),
]
# The α = 2 cells where the model predicts 0.8, i.e. the detectable epsilon as it was computed
# before MODEL_POWER: audits realised less than 0.8 there, which is why it was introduced.
MODEL_080_CELLS = [(2.0, 1.0, 200, 3.6338), (2.0, 1.0, 500, 2.54), (2.0, 1.0, 1000, 2.0664)]
# Cells at the detectable epsilon where the DV estimator's power is not counted: above
# DV_MODEL_MAX_ALPHA (DVRenyiEstimator._power_model_max_alpha), or for a claim above
# DV_MAX_CLAIM_SHARE of its ceiling (small samples, claims near what they can certify).
HIGH_ORDER_DETECTABLE_CELLS = [
    (2.0, 1.0, 100),
    (2.0, 1.0, 150),
    (2.0, 2.0, 1000),
    (2.0, 2.5, 1000),
    (1.25, 1.5, 500),
    (3.0, 1.0, 500),
    (3.0, 1.5, 1000),
    (4.0, 2.0, 1000),
    (4.0, 1.0, 500),
    (8.0, 2.0, 1000),
    (8.0, 4.0, 1000),
    (16.0, 2.0, 2000),
]
# The detectable epsilon such audits printed while the DV estimator's model was counted
# everywhere ('dv counted' cells): audits realised less than 0.8 there, which is why it is not
# counted in these cells.
DV_COUNTED_CELLS = [
    (2.0, 1.0, 100, 5.6406),
    (2.0, 1.0, 150, 4.5156),
    (2.0, 2.0, 1000, 4.3605),
    (2.0, 2.5, 1000, 5.7428),
    (3.0, 1.0, 500, 3.375),
    (4.0, 2.0, 1000, 7.0313),
    (8.0, 2.0, 1000, 11.1807),
    (8.0, 4.0, 1000, 39.0625),
]
DV_MODEL_MAX_ALPHA = DVRenyiEstimator._power_model_max_alpha
DV_MAX_CLAIM_SHARE = DVRenyiEstimator._power_model_max_claim_share
RATIOS = (1.25, 1.5, 2.0, 4.0)


def _shares(alpha: float, claim: float) -> dict:
    """The audit's estimators, each at its share of BETA, as the power model reads them."""
    return Auditor(None, claim, alpha=alpha, beta=BETA)._shares(_estimators(alpha, 0), BETA)


def _dv_counted(shares: dict) -> dict:
    """The estimators with the DV estimator's power model counted at every order (as it was)."""
    counted = {name: clone(est) for name, est in shares.items()}
    for est in counted.values():
        est._power_model_max_alpha, est._power_model_max_claim_share = math.inf, 1.0
    return counted


def _detectable_cells() -> list[tuple[float, float, int, float]]:
    cells = []
    for alpha, claim, n in AT_DETECTABLE_CELLS + HIGH_ORDER_DETECTABLE_CELLS:
        shares = _shares(alpha, claim)
        detectable = audit_power(shares, n, n, claim, alpha)["detectable_epsilon"]
        cells.append((alpha, claim, n, round(float(detectable), 4)))
    return cells


def _estimators(alpha: float, seed: int) -> dict:
    estimators = default_estimators(alpha, seed)
    estimators["dv"].set_params(n_repeats=1)
    return estimators


def _done(path: Path) -> dict:
    if not path.exists():
        return {}
    records = {}
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut short by a kill: redone
        records[record["key"]] = record
    return records


def _append(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(record) + "\n")


def _gaussian_scores(alpha: float, divergence: float, n: int, seed: int):
    """O ~ N(0, 1) and O' ~ N(mu, 1) with D_alpha = alpha mu^2 / 2 = divergence."""
    rng = np.random.default_rng(seed)
    mu = math.sqrt(2.0 * divergence / alpha)
    return rng.normal(0.0, 1.0, n), rng.normal(mu, 1.0, n)


def validate(repetitions: int) -> list[dict]:
    path = RECORDS / "validate.jsonl"
    done = _done(path)
    rows = []
    at_detectable = _detectable_cells()
    cells = VALIDATION_CELLS + HELD_OUT_CELLS + MODEL_080_CELLS + at_detectable + DV_COUNTED_CELLS
    for alpha, claim, n, divergence in cells:
        cell = f"a{alpha}-c{claim}-n{n}-d{divergence}"
        for rep in tqdm(range(repetitions), desc=cell, file=sys.stderr):
            key = f"{cell}-r{rep}"
            if key in done:
                continue
            without, with_ = _gaussian_scores(alpha, divergence, n, seed=10_000 + rep)
            auditor = Auditor(None, claim, alpha=alpha, beta=BETA, n_runs=n)
            result = auditor.evaluate(without, with_, _estimators(alpha, rep))
            done[key] = {"key": key, "violation": result.verdict == "violation"}
            _append(path, done[key])
        shares = _shares(alpha, claim)
        realised = [done[f"{cell}-r{rep}"]["violation"] for rep in range(repetitions)]
        p = float(np.mean(realised))
        predicted = violation_probability(shares, n, n, divergence, claim, alpha)
        counted = violation_probability(_dv_counted(shares), n, n, divergence, claim, alpha)
        rows.append(
            {
                "alpha": alpha,
                "claim": claim,
                "runs_per_side": n,
                "true_divergence": divergence,
                "audits": repetitions,
                "realised": p,
                "realised_se": math.sqrt(max(p * (1 - p), 1e-12) / repetitions),
                "predicted": predicted,
                "difference": predicted - p,
                "held_out": (alpha, claim, n, divergence) in HELD_OUT_CELLS,
                "at_detectable": (alpha, claim, n, divergence) in at_detectable,
                "model_080": (alpha, claim, n, divergence) in MODEL_080_CELLS,
                "dv_counted": (alpha, claim, n, divergence) in DV_COUNTED_CELLS,
                "predicted_dv_counted": counted,
                "dv_not_counted": not shares["dv"]._power_modelled(n, n, claim),
            }
        )
    return rows


def synthetic(repetitions: int, max_runs: int, alpha: float, claim: float) -> list[dict]:
    path = RECORDS / f"synthetic-a{alpha}.jsonl"
    done = _done(path)
    rows = []
    # Claimed noise: the sigma whose epsilon_alpha is the claim (sensitivity 1); the faulty
    # mechanisms add less, so that their true epsilon_alpha is ratio x claim.
    sigma = math.sqrt(alpha / (2.0 * claim))
    for ratio in RATIOS:
        bug = 1.0 / math.sqrt(ratio)
        mech = GaussianMechanismScore(sensitivity=1.0, noise_std=sigma, noise_scale_bug=bug)
        assert abs(mech.true_epsilon(alpha) - ratio * claim) < 1e-9 * ratio
        assert abs(rdp_of_gaussian_mechanism(alpha, 1.0, sigma) - claim) < 1e-9
        for mode in ("fixed", "sequential"):
            cell = f"r{ratio}-{mode}-m{max_runs}"
            for rep in tqdm(range(repetitions), desc=cell, file=sys.stderr):
                key = f"{cell}-r{rep}"
                if key in done:
                    continue
                first = max_runs if mode == "fixed" else max_runs // 8
                result = Auditor(
                    mech,
                    claim,
                    alpha=alpha,
                    beta=BETA,
                    n_runs=first,
                    max_runs=max_runs,
                    estimators=_estimators(alpha, rep),
                    random_state=rep,
                    progress=False,
                ).run()
                done[key] = {
                    "key": key,
                    "violation": result.verdict == "violation",
                    "runs_used": result.n_runs,
                }
                _append(path, done[key])
            records = [done[f"{cell}-r{rep}"] for rep in range(repetitions)]
            rows.append(
                {
                    "alpha": alpha,
                    "claim": claim,
                    "true_over_claim": ratio,
                    "mode": mode,
                    "max_runs": max_runs,
                    "audits": repetitions,
                    "violation_rate": float(np.mean([r["violation"] for r in records])),
                    "median_runs_used": statistics.median(r["runs_used"] for r in records),
                }
            )
    return rows


# (alpha, claim, runs per side): audits with the Bernoulli baseline alone, at the detectable
# epsilon such an audit reports.
BERNOULLI_ONLY_CELLS = [
    (2.0, 0.2, 50),
    (2.0, 0.2, 200),
    (2.0, 1.0, 500),
    (1.25, 0.5, 1000),
    (4.0, 1.0, 300),
    # small audits and claims, where the oracle threshold model overstated power most
    (2.0, 0.05, 20),
    (2.0, 0.5, 40),
    (2.0, 0.1, 60),
    (2.0, 0.01, 100),
]


def bernoulli_only(repetitions: int) -> list[dict]:
    """Audits whose only estimator is the Bernoulli baseline, at their detectable epsilon: the
    verdicts' realised power, and each direction's (the audit's estimator refitted alone, with
    its share of beta and its seed, on the same scores)."""
    # Keys name the detectable epsilon: audits drawn at another model's epsilon are never reused
    # (bernoulli-only-oracle-threshold.jsonl holds those of the model before the training split
    # was modelled).
    path = RECORDS / "bernoulli-only.jsonl"
    done = _done(path)
    rows = []
    for alpha, claim, n in BERNOULLI_ONLY_CELLS:
        only = {"bernoulli": default_estimators(alpha, 0)["bernoulli"]}
        shares = Auditor(None, claim, alpha=alpha, beta=BETA)._shares(only, BETA)
        detectable = float(audit_power(shares, n, n, claim, alpha)["detectable_epsilon"])
        cell = f"a{alpha}-c{claim}-n{n}-e{detectable:.6g}"
        for rep in tqdm(range(repetitions), desc=cell, file=sys.stderr):
            key = f"{cell}-r{rep}"
            if key in done:
                continue
            without, with_ = _gaussian_scores(alpha, detectable, n, seed=10_000 + rep)
            estimators = {"bernoulli": default_estimators(alpha, rep)["bernoulli"]}
            auditor = Auditor(None, claim, alpha=alpha, beta=BETA, n_runs=n)
            result = auditor.evaluate(without, with_, estimators)
            # The audit's own fit: its share of beta, direction "max", O' first.
            fitted = clone(shares["bernoulli"]).set_params(random_state=rep).fit(with_, without)
            bounds = {d: fitted.directions_[d].lower_bound for d in ("forward", "reverse")}
            record = {
                "key": key,
                "violation": result.verdict == "violation",
                **{d: bound > claim for d, bound in bounds.items()},
            }
            if record["violation"] != (record["forward"] or record["reverse"]):
                raise RuntimeError(f"{key}: the refit does not reproduce the audit's verdict")
            done[key] = record
            _append(path, record)
        records = [done[f"{cell}-r{rep}"] for rep in range(repetitions)]
        n_p, n_q, level_p, level_q, *training = shares["bernoulli"]._power_designs(n, n)[
            "threshold"
        ]
        realised = float(np.mean([r["violation"] for r in records]))
        forward = float(np.mean([r["forward"] for r in records]))
        reverse = float(np.mean([r["reverse"] for r in records]))
        rows.append(
            {
                "alpha": alpha,
                "claim": claim,
                "runs_per_side": n,
                "detectable_epsilon": detectable,
                "audits": repetitions,
                "realised": realised,
                "realised_se": math.sqrt(max(realised * (1 - realised), 1e-12) / repetitions),
                "predicted": violation_probability(shares, n, n, detectable, claim, alpha),
                "direction_predicted": threshold_power(
                    detectable, n_p, n_q, alpha, level_p, level_q, claim, training=training or None
                ),
                "forward_realised": forward,
                "reverse_realised": reverse,
                "independent_union": 1.0 - (1.0 - forward) * (1.0 - reverse),
            }
        )
    return rows


# The DP-SGD settings, in the order they run: (name, alpha, power target). Audits of one trainer
# and seed share one run store whatever the order or target (the runs do not depend on them), so
# a later setting reuses the models an earlier one trained. "target2" is the first measurement
# (power target epsilon_2 = 2); its records keep their original keys.
DPSGD_SETTINGS = (("a2", 2.0, None), ("a1.25", 1.25, None), ("target2", 2.0, 2.0))
NOISE_MULTIPLIER = 10.0  # claimed epsilon_2 = 2 * 100 / (2 * 10**2) = 1 (full batch, 100 steps)
DPSGD_STEPS = 100


def _dpsgd_key(setting: str, bug: float, max_runs: int, seed: int) -> str:
    cell = f"bug{bug}-m{max_runs}-s{seed}"
    return cell if setting == "target2" else f"{setting}-{cell}"


def dpsgd(audits: int, max_runs: int, n_jobs: int, report_only: bool = False) -> list[dict]:
    from rdpest.auditing import DPSGDAuditor

    path = RECORDS / "dpsgd.jsonl"
    done = _done(path)
    # faulty trainers first (they stop early), and per seed both orders before the next seed,
    # so the second order reuses the first one's models while they are fresh
    plan = [
        (setting, alpha, target, bug, seed)
        for bug in (0.7, 1.0)
        for seed in range(audits)
        for setting, alpha, target in DPSGD_SETTINGS
        if target is None
    ]
    for setting, alpha, target, bug, seed in plan:
        key = _dpsgd_key(setting, bug, max_runs, seed)
        if key in done or report_only:
            continue
        started = time.time()
        result = DPSGDAuditor(
            alpha=alpha,
            noise_multiplier=NOISE_MULTIPLIER,
            steps=DPSGD_STEPS,
            n_runs=500,
            max_runs=max_runs,
            power_target=target,
            noise_scale_bug=bug,
            n_jobs=n_jobs,
            store=RECORDS / "stores" / f"bug{bug}-s{seed}",
            random_state=seed,
            progress=False,
        ).run()
        done[key] = {
            "key": key,
            "alpha": alpha,
            "claim": result.claimed_epsilon,
            "target_epsilon": target,
            "violation": result.verdict == "violation",
            "verdict": result.verdict,
            "runs_used": result.n_runs,
            "bounds": [r["lower_bound"] for r in result.rounds],
            "dv_estimate": result.estimates["dv"]["divergence"],
            "seconds": time.time() - started,
        }
        _append(path, done[key])
        print(key, done[key], file=sys.stderr, flush=True)
    rows = []
    for setting, alpha, target in DPSGD_SETTINGS:
        for bug in (0.7, 1.0):
            keys = [_dpsgd_key(setting, bug, max_runs, seed) for seed in range(audits)]
            records = [done[key] for key in keys if key in done]
            if not records:
                continue
            claim = dpsgd_epsilon_alpha(NOISE_MULTIPLIER, 1.0, DPSGD_STEPS, alpha)
            rows.append(
                {
                    "alpha": alpha,
                    "claim": claim,
                    "target_epsilon": target,
                    "noise_scale_bug": bug,
                    "true_over_claim": round(1.0 / bug**2, 3),
                    "max_runs": max_runs,
                    "audits": len(records),
                    "violations": int(sum(r["violation"] for r in records)),
                    "median_runs_used": statistics.median(r["runs_used"] for r in records),
                    "verdicts": sorted({r["verdict"] for r in records}),
                }
            )
    return rows


def _kind(row: dict) -> str:
    """Which set of validation cells a row belongs to."""
    for key, kind in (
        ("dv_counted", "dv counted"),
        ("model_080", "model 0.8"),
        ("at_detectable", "at detectable"),
        ("held_out", "held out"),
    ):
        if row.get(key):
            return kind
    return "guided"


def _validation_row(r: dict, eighth: str) -> str:
    """A row of the validation tables, whose eighth column differs between them."""
    return (
        f"| {r['alpha']:g} | {r['claim']:g} | {r['runs_per_side']} | {r['true_divergence']:g} | "
        f"{r['audits']} | {r['realised']:.2f} ± {r['realised_se']:.2f} | {r['predicted']:.2f} | "
        f"{eighth} | {_kind(r)} |"
    )


def _markdown(
    validation: list[dict],
    synth: list[dict],
    dp: list[dict],
    command: str,
    seconds: float,
    kept: dict | None = None,
    bernoulli: list[dict] = (),
) -> str:
    # Sections this run did not compute, by the command of the run that did (None: unknown).
    by_command: dict = {}
    for name, earlier_command in (kept or {}).items():
        by_command.setdefault(earlier_command, []).append(name)
    earlier = "".join(
        f" The {' and '.join(names)} rows are kept from an earlier run"
        + (f", `{cmd}`" if cmd else "")
        + " (this one did not compute them)."
        for cmd, names in by_command.items()
    )
    lines = [
        "# Audit power",
        "",
        f"Command: `{command}` ({os.cpu_count()} CPU cores; finished audits are read back from "
        "benchmarks/results/auditing/power/*.jsonl, so this run's "
        f"{seconds / 60:.0f} min are only the audits it had left). beta = {BETA}; default "
        f"estimators (dv with n_repeats=1, bernoulli, gdp_route).{earlier}",
        "",
    ]
    if validation:
        lines += [
            "## Predicted against realised power",
            "",
            "Scores: O ~ N(0, 1), O' ~ N(mu, 1) at the true D_alpha below (the reference model).",
            "Realised: the fraction of independent audits that said violation (± its standard",
            "error). Predicted: rdpest.auditing.power.violation_probability.",
            "",
            "Cell: 'guided' cells were used to choose the model; 'held out' cells were added",
            "after its last change; 'at detectable' cells sit at the detectable epsilon an",
            "audit of that size reports ('detects epsilon >= X with 80% probability'), where",
            "the verdict's sentence states a power: there the model predicts",
            f"rdpest.auditing.power.MODEL_POWER = {MODEL_POWER:g}, since at the epsilon where it",
            "predicts 0.8 ('model 0.8' cells) audits realised less than 0.8.",
            "",
            "| alpha | claim | runs/side | true D | audits | realised | predicted "
            "| predicted − realised | cell |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        covered = [r for r in validation if not r["dv_not_counted"]]
        above = [r for r in validation if r["dv_not_counted"]]
        for r in covered:
            lines.append(_validation_row(r, f"{r['difference']:+.2f}"))
        worst = max(abs(r["difference"]) for r in covered)
        lines += ["", f"Largest |difference|: {worst:.2f} (target: 0.10)."]
        at = [r for r in validation if r.get("at_detectable")]
        if at:
            met = sum(r["realised"] >= TARGET_POWER for r in at)
            lowest = min(r["realised"] for r in at)
            lines += [
                f"At the detectable epsilon (every order, both tables): realised power >= "
                f"{TARGET_POWER:g} in {met} of {len(at)} cells (lowest {lowest:.2f}).",
            ]
        lines += [""]
        if above:
            counted = [r for r in above if r.get("dv_counted")]
            short = [r for r in counted if r["realised"] < TARGET_POWER]
            lowest = min((r["realised"] for r in counted), default=float("nan"))
            lines += [
                "### Where the DV estimator's power is not counted",
                "",
                "The model credits the DV estimator with the exact log ratio. Counted",
                "everywhere, it stated power that audits did not have above alpha = "
                f"{DV_MODEL_MAX_ALPHA:g} and for",
                f"claims above {DV_MAX_CLAIM_SHARE:g} of the largest bound the DV estimator "
                "can certify (few runs,",
                "claims near that ceiling): at the detectable epsilon it printed there ('dv",
                "counted' cells, where it predicted about 0.9) audits said violation less often",
                f"than {TARGET_POWER:g} in {len(short)} of {len(counted)} cells (lowest "
                f"{lowest:.2f}). There audits count only the",
                "other estimators' power (power['unmodelled'] names the DV estimator):",
                "'predicted' is then a prediction for those alone, which the DV estimator's",
                "votes can only raise; 'predicted, dv counted' is what the model said with it.",
                "",
                "| alpha | claim | runs/side | true D | audits | realised | predicted "
                "| predicted, dv counted | cell |",
                "|---|---|---|---|---|---|---|---|---|",
            ]
            for r in above:
                lines.append(_validation_row(r, f"{r['predicted_dv_counted']:.2f}"))
            lines += [""]
    if synth:
        lines += [
            "## Fixed-size against sequential audits (Gaussian mechanism)",
            "",
            "Fixed: one round of max_runs runs per side at level beta. Sequential: rounds of",
            "about 1.5x from max_runs/8 up to max_runs, each at beta/K, stopping at the first",
            "certified violation.",
            "",
            "| alpha | true / claim | mode | max runs | audits | P(violation) | median runs used |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in synth:
            lines.append(
                f"| {r['alpha']:g} | {r['true_over_claim']:g} | {r['mode']} | {r['max_runs']} | "
                f"{r['audits']} | {r['violation_rate']:.2f} | {r['median_runs_used']:g} |"
            )
        lines.append("")
    if dp:
        lines += [
            "## DP-SGD on digits: sequential audits",
            "",
            "Logistic regression, 100 full-batch steps, C = 1, noise multiplier 10 (claimed",
            "epsilon_2 = 1, epsilon_1.25 = 0.625), blank canary, 500 up to max_runs runs per side",
            "in rounds of about 1.5x, each round at beta/K. Faulty trainer: 0.7x the claimed",
            "noise, so its true epsilon_alpha is 1/0.49 = 2.04x the claim at every alpha. Audits",
            "of one trainer and seed share their models across the rows (one run store each).",
            "",
            "With a power target the audit also stops, without a violation, once it detects the",
            "target with 80% probability; with a true epsilon_2 of 2.04 and a target of 2 such an",
            "audit misses about one time in five or more, which the rows with a target show.",
            "",
            "| alpha | claim | power target | noise / claimed noise | true / claim | max runs "
            "| audits | violations | median runs used | verdicts |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in dp:
            target = "none" if r["target_epsilon"] is None else f"{r['target_epsilon']:g}"
            lines.append(
                f"| {r['alpha']:g} | {r['claim']:g} | {target} | {r['noise_scale_bug']:g} | "
                f"{r['true_over_claim']:g} | {r['max_runs']} | {r['audits']} | "
                f"{r['violations']} | {r['median_runs_used']:g} | {', '.join(r['verdicts'])} |"
            )
        lines.append("")
    if bernoulli:
        met = sum(r["realised"] >= TARGET_POWER for r in bernoulli)
        lines += [
            "## Audits with the Bernoulli baseline alone",
            "",
            "Scores as in the first table, at the detectable epsilon an audit whose only",
            "estimator is the Bernoulli baseline reports (`--estimators bernoulli`), where its",
            f"sentence states {TARGET_POWER:.0%} and the model predicts about {MODEL_POWER:g}.",
            "Per direction: the model's power of one direction's threshold test at the",
            "threshold its training split chooses (rdpest.stats.power, threshold_power's",
            "`training`), and the realised power of each direction. The model counts the two",
            "directions as independent tries; the last column is that combination of the",
            "realised powers.",
            "",
            "| alpha | claim | runs/side | detectable eps | audits | realised | predicted "
            "| per direction: model | forward | reverse | 1 − (1 − fwd)(1 − rev) |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in bernoulli:
            lines.append(
                f"| {r['alpha']:g} | {r['claim']:g} | {r['runs_per_side']} | "
                f"{r['detectable_epsilon']:.4g} | {r['audits']} | {r['realised']:.3f} ± "
                f"{r['realised_se']:.3f} | {r['predicted']:.2f} | "
                f"{r['direction_predicted']:.2f} | {r['forward_realised']:.3f} | "
                f"{r['reverse_realised']:.3f} | {r['independent_union']:.3f} |"
            )
        lowest = min(r["realised"] for r in bernoulli)
        gaps = [r["independent_union"] - r["realised"] for r in bernoulli]
        directions = [r[f"{d}_realised"] for r in bernoulli for d in ("forward", "reverse")]
        modelled = [r["direction_predicted"] for r in bernoulli]
        lines += [
            "",
            f"Realised power >= {TARGET_POWER:g} in {met} of {len(bernoulli)} cells (lowest "
            f"{lowest:.3f}). Each direction realises {min(directions):.2f} to "
            f"{max(directions):.2f} against the model's {min(modelled):.2f} to "
            f"{max(modelled):.2f}; the verdicts {min(gaps):.2f} to {max(gaps):.2f} less than",
            "the independent combination of the realised directions (the two directions test",
            "the same scores), which the margin MODEL_POWER leaves covers. (Before the model",
            "chose the threshold on a training split it credited the best placement, put these",
            "audits' epsilon lower, and they realised 0.73 to 0.82.)",
            "",
        ]
    return "\n".join(lines)


def main(argv=None) -> int:
    global OUT, RECORDS  # --out moves the tables and the resumable records with them
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="results folder (default benchmarks/results/auditing; records under its power/)",
    )
    parser.add_argument("--validate", action="store_true")
    parser.add_argument("--synthetic", action="store_true")
    parser.add_argument("--repetitions", type=int, default=60)
    parser.add_argument("--synthetic-repetitions", type=int, default=20)
    parser.add_argument("--max-runs", type=int, default=1000)
    parser.add_argument("--bernoulli-only", action="store_true")
    parser.add_argument("--bernoulli-repetitions", type=int, default=1000)
    parser.add_argument("--dpsgd", action="store_true")
    parser.add_argument("--dpsgd-audits", type=int, default=10)
    parser.add_argument("--dpsgd-max-runs", type=int, default=5000)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument(
        "--dpsgd-report-only",
        action="store_true",
        help="report the finished DP-SGD audits without running the missing ones",
    )
    args = parser.parse_args(argv)
    check_flags(parser, args)
    if args.out is not None:  # every run rewrote the committed tables (benchmark review)
        OUT = output_folder(args.out)
        RECORDS = OUT / "power"
    start = time.time()
    validation = validate(args.repetitions) if args.validate else []
    synth = []
    if args.synthetic:
        synth += synthetic(args.synthetic_repetitions, args.max_runs, 2.0, 1.0)
        synth += synthetic(args.synthetic_repetitions, args.max_runs, 1.25, 0.5)
    dp = (
        dpsgd(args.dpsgd_audits, args.dpsgd_max_runs, args.n_jobs, args.dpsgd_report_only)
        if args.dpsgd
        else []
    )
    bernoulli = bernoulli_only(args.bernoulli_repetitions) if args.bernoulli_only else []
    command = ("python benchmarks/bench_power.py " + " ".join(argv or sys.argv[1:])).strip()
    seconds = time.time() - start
    # A section this run did not compute keeps its rows from the last run that did (a run of
    # --validate alone once emptied the synthetic and DP-SGD tables).
    earlier = json.loads((OUT / "power.json").read_text()) if (OUT / "power.json").is_file() else {}
    sections = {
        "validation": (args.validate, validation),
        "synthetic": (args.synthetic, synth),
        "dpsgd": (args.dpsgd, dp),
        "bernoulli_only": (args.bernoulli_only, bernoulli),
    }
    # The command behind each section's rows: this run's, or the one recorded with them (for a
    # power.json written before commands were recorded, the old table's Command line).
    header = (
        re.search(r"^Command: `([^`]+)`", (OUT / "power.md").read_text(), re.M)
        if (OUT / "power.md").is_file()
        else None
    )
    recorded = earlier.get("commands") or {}
    commands = {
        name: command if ran else recorded.get(name, header.group(1) if header else None)
        for name, (ran, rows) in sections.items()
        if rows or earlier.get(name)
    }
    kept = {
        name: commands[name] for name, (ran, _) in sections.items() if not ran and earlier.get(name)
    }
    validation, synth, dp, bernoulli = (
        rows if ran else earlier.get(name, []) for name, (ran, rows) in sections.items()
    )
    OUT.mkdir(parents=True, exist_ok=True)
    atomic_write_text(
        OUT / "power.json",
        json.dumps(
            {
                "validation": validation,
                "synthetic": synth,
                "dpsgd": dp,
                "bernoulli_only": bernoulli,
                "commands": commands,
            },
            indent=2,
        ),
    )
    text = _markdown(validation, synth, dp, command, seconds, kept, bernoulli)
    atomic_write_text(OUT / "power.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
