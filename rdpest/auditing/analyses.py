"""The analyses of a run store's runs: what each one tested, and what testing a claim again costs.

Every completed audit of a store's runs is a level-β test of its claim (the order α and the
claimed ε_α) and is recorded in the store's ``analyses.jsonl``
(:meth:`rdpest.auditing.RunStore.record_analysis`). Testing the same claim again on the same runs
under another level, schedule (``n_runs``, ``max_runs``, and ``power_target`` where there are
several rounds) or estimator settings spends the level again: by a union bound, the chance that
at least one of the analyses accuses an honest pipeline is at most the sum of their β, not β.
Repeating an analysis with the same settings is not a new test (its verdict is the same), unless
an estimator is unseeded (``random_state`` None where its fit draws splits): its fits draw new
splits, so a repeat can give another verdict and is counted as another test. (A RandomState or
Generator counts by its state: an audit copies it, so the same state fits the same way.) An
analysis of a larger claim at the same order under other settings tested this claim too (its
violation would have refuted it) and is counted; another order, or a smaller claim, is another
test, of another claim. :class:`rdpest.auditing.Auditor` names the
earlier analyses in its result (``config["earlier_analyses"]``) and its summary, and warns.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import uuid
import warnings
from numbers import Real
from pathlib import Path

import numpy as np

__all__ = [
    "RUNNING_PARAMETERS",
    "earlier_analyses",
    "earlier_line",
    "retest_message",
    "settings_text",
    "warn_unseeded",
]

#: Estimator parameters that change how a fit runs, not what it tests.
RUNNING_PARAMETERS = frozenset({"verbose", "n_threads", "device"})


def settings_text(estimator) -> str:
    """An estimator's parameters as JSON text (an object that is not JSON by its class name),
    without those that only change how the fit runs. A RandomState or Generator is recorded by
    a digest of its state (an audit clones its estimators, which copies the generator, so the
    same state fits the same way; another state is another test), and an unseeded estimator by
    a token of its own."""
    params = estimator.get_params(deep=False)
    params = {key: value for key, value in params.items() if key not in RUNNING_PARAMETERS}
    state = params.get("random_state")
    if isinstance(state, np.random.RandomState | np.random.Generator):
        params["random_state"] = f"{type(state).__name__} in state {_state_digest(state)}"
    elif _unseeded(estimator, params):
        # Each fit draws its own splits, so two such analyses are two tests even with equal
        # settings: a token of its own keeps this one from being taken for any other (rerun
        # until it says "violation", each rerun was once counted as no new test).
        params["random_state"] = f"unseeded fit {uuid.uuid4().hex}"
    return json.dumps(params, sort_keys=True, default=_json_value)


def _json_value(value):
    """A parameter that is not JSON: a numpy number as its value (np.int64 seeds 0 and 1 were
    both "int64", one analysis), anything else by its name."""
    if isinstance(value, np.generic):
        return value.item()
    return getattr(value, "__qualname__", type(value).__qualname__)


def _state_digest(state) -> str:
    """A digest of a RandomState's or Generator's state, from the state's own description (not
    a pickle, whose format changes with Python and numpy releases)."""
    described = (
        state.bit_generator.state
        if isinstance(state, np.random.Generator)
        else state.get_state(legacy=False)
    )
    text = json.dumps(described, sort_keys=True, default=lambda v: np.asarray(v).tolist())
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _unseeded(estimator, params: dict) -> bool:
    """Whether the estimator's ``random_state`` is None and its fits may differ from one call to
    the next: where the estimator says so (sklearn's ``non_deterministic`` tag), and where it
    says nothing (its tags are scikit-learn's own, whose default, False, is no statement about
    its fit)."""
    if "random_state" not in params or params["random_state"] is not None:
        return False
    tags = getattr(type(estimator), "__sklearn_tags__", None)
    if tags is None or (getattr(tags, "__module__", None) or "sklearn").split(".")[0] == "sklearn":
        return True
    return bool(estimator.__sklearn_tags__().non_deterministic)


def warn_unseeded(estimators: dict) -> None:
    """Warn, once per audit's validation, of estimators whose fits draw fresh randomness
    (``random_state`` None where the fit splits): the same scores can then give another bound
    and verdict at every call, which a store counts as another test but a report cannot show."""
    names = [name for name, est in estimators.items() if _unseeded(est, est.get_params(deep=False))]
    if names:
        warnings.warn(
            f"estimator(s) {', '.join(map(repr, names))} have random_state=None: every fit "
            "draws new splits, so the same scores can give another bound and verdict at the "
            "next call; seed them (random_state=...) for an audit that can be repeated",
            UserWarning,
            stacklevel=_outside_rdpest(),
        )


def _outside_rdpest() -> int:
    """The ``stacklevel`` of the first frame outside the rdpest package (the user's call), seen
    from the ``warnings.warn`` of the function that calls this one."""
    package = str(Path(__file__).resolve().parents[1]) + os.sep  # not a sibling rdpest_x/
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def earlier_analyses(entries: list, claim: dict, settings: dict) -> list[dict]:
    """The analyses among ``entries`` (a store's records) that tested ``claim``, or a larger ε_α
    at its order, under other ``settings``: the latest verdict under each other setting, oldest
    setting first. A violation of a larger claim would have refuted this one too, so such an
    analysis was a test of it as well; a larger claim's entry names it (``claimed_epsilon``).
    Entries with a level outside (0, 1) are skipped (a damaged record)."""
    earlier: dict[str, dict] = {}
    tested = _tested(settings)
    for entry in entries:
        other = {key: entry.get(key) for key in settings}
        other_tested = _tested(other)
        level = other["beta"]
        if (
            _covers(entry, claim)
            and other_tested != tested
            and isinstance(level, Real)
            and not isinstance(level, bool)
            and 0 < level < 1
        ):
            larger = not _same_value(entry["claimed_epsilon"], claim["claimed_epsilon"])
            earlier[json.dumps(other_tested, sort_keys=True)] = {
                **other,
                **({"claimed_epsilon": entry["claimed_epsilon"]} if larger else {}),
                "verdict": entry.get("verdict"),
            }
    return list(earlier.values())


def _covers(entry: dict, claim: dict) -> bool:
    """Whether a recorded analysis tested ``claim``: the same order and an ε_α at least as large
    (up to rounding), whose violation would have refuted ``claim`` as well."""
    recorded = entry.get("claimed_epsilon")
    if not (isinstance(recorded, Real) and not isinstance(recorded, bool)):
        return False
    epsilon = claim["claimed_epsilon"]
    return all(
        _same_value(entry.get(key), value)
        for key, value in claim.items()
        if key != "claimed_epsilon"
    ) and (recorded >= epsilon or _same_value(recorded, epsilon))


def _same_value(recorded, value) -> bool:
    """Whether a recorded claim's field is ``value``: numbers within a relative 1e-9 (a claim
    recomputed with other rounding, 1.000000000003 for 1.0, is the same claim; compared
    exactly, its analyses escaped each other's count)."""
    if isinstance(value, Real) and isinstance(recorded, Real) and not isinstance(recorded, bool):
        return math.isclose(float(recorded), float(value), rel_tol=1e-9, abs_tol=1e-12)
    return recorded == value


#: Estimator parameters an audit sets itself (each estimator's share of β, both directions): an
#: analysis whose estimators differ only in them tested the same way.
AUDIT_SET_PARAMETERS = ("beta", "direction")


def _tested(settings: dict) -> dict:
    """``settings`` with each estimator's text stripped of :data:`AUDIT_SET_PARAMETERS` (records
    written before, and texts that are not JSON objects, compare as they are)."""
    estimators = settings.get("estimators")
    if not isinstance(estimators, dict):
        return settings
    stripped = {}
    for name, text in estimators.items():
        try:
            params = json.loads(text)
        except (TypeError, ValueError):
            params = None
        if isinstance(params, dict):
            text = json.dumps(
                {k: v for k, v in params.items() if k not in AUDIT_SET_PARAMETERS}, sort_keys=True
            )
        stripped[name] = text
    return {**settings, "estimators": stripped}


def retest_message(directory, claim: dict, earlier: list, beta: float) -> str:
    """The warning of an analysis that tests a claim the store's runs were already tested for."""
    combined = min(1.0, beta + sum(float(entry["beta"]) for entry in earlier))
    return (
        f"the runs in {directory} were already analysed for this claim (ε_{claim['alpha']:g} = "
        f"{claim['claimed_epsilon']:g}){_or_larger(earlier)} under {len(earlier)} other "
        "setting(s) of the level, "
        f"schedule or estimators; each analysis spends its own β on the same runs, so the chance "
        f"that one of them accuses an honest pipeline is at most {combined:.3g}, not {beta:g}. "
        "Decide on the first analysis planned, or train new runs (another store or random_state) "
        "for another test"
    )


def _or_larger(earlier: list) -> str:
    """ " or a larger one" where an earlier analysis tested a larger ε_α (see earlier_analyses)."""
    return " or a larger one" if any("claimed_epsilon" in e for e in earlier) else ""


def earlier_line(earlier: list, beta: float) -> str:
    """The earlier analyses of the same runs for the same claim, and the level they add up to."""
    described, total = [], float(beta)
    for entry in earlier:
        try:
            level = float(entry["beta"])
            runs = f"{entry['n_runs']}" + (
                f" to {entry['max_runs']}" if entry["max_runs"] != entry["n_runs"] else ""
            )
            larger = f", claim {entry['claimed_epsilon']:g}" if "claimed_epsilon" in entry else ""
            verdict = str(entry["verdict"]).upper().replace("_", " ")
            described.append(f"beta {level:g}, {runs} runs{larger}: {verdict}")
            total += level
        except (KeyError, TypeError, ValueError):
            continue
    return (
        f"these runs were also analysed for this claim{_or_larger(earlier)} under other "
        "settings ("
        + "; ".join(described)
        + f"): the chance that one of the analyses accuses an honest pipeline is at most "
        f"{min(total, 1.0):.3g}, not beta"
    )
