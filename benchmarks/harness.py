"""Known-divergence benchmark: every estimator against pairs whose D_α is known exactly.

For each cell (estimator, family, α, D, n per side) it draws seeded sample pairs with
:func:`rdpest.datasets.make_renyi_pair` (the same samples for every estimator) and records the
point estimate, the lower bound, coverage failures (the unclamped bound above the truth), the
seconds spent in ``fit`` and, for the DV estimator, the "oracle" bound: the exact log ratio
certified on the estimator's own split with its own certificate (same confidence method, same
bracket/threshold choice rule), the practical limit of any critic.

Every cell also records the *sampling floor*: the plug-in estimate with the EXACT log ratio
L = log p/q on the same samples, in its two forms,

- P-form: 1/(α−1) · log mean_{x ∈ X} e^{(α−1) L(x)}   (X ~ P),
- Q-form: 1/(α−1) · log mean_{y ∈ Y} e^{α L(y)}        (Y ~ Q),

(log-sum-exp, no overflow), their median relative errors over the repetitions, and the ratio of
the row's median relative error to the better (smaller) of the two floors: for ``dv`` rows, how
far DV is from what the samples themselves allow. The floors depend only on the samples, so they
are the same on every estimator's row of a cell.

Estimators as benchmarked:

- ``dv``: :class:`~rdpest.DVRenyiEstimator` with its defaults.
- ``markov``: :class:`~rdpest.MarkovRenyiBound` with the EXACT log ratio (certified).
- ``hoeffding``: :class:`~rdpest.HoeffdingRenyiBound` with the exact log ratio and its true bound;
  only where the privacy loss is bounded (laplace_shift); elsewhere the cell is skipped.
- ``bernoulli``: :class:`~rdpest.BernoulliTPRFPRBaseline` (direct conversion, certified); on
  multivariate samples its scalar score is the coordinate sum (the direction of the shift).

Families: :data:`rdpest.datasets.FAMILIES`; :data:`CLASSIC_FAMILIES` (the five of the first
benchmark) gives back the old grid with ``main(..., families=CLASSIC_FAMILIES)``.

Results: one JSON file per finished cell under ``<out>/cells/`` (atomic writes: an interrupted run
resumes), then ``results.csv``, ``results.json`` and ``results.md``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from rdpest.datasets import FAMILIES, family_parameters, log_likelihood_ratio, make_renyi_pair
from rdpest.estimators.dv import DVRenyiEstimator
from rdpest.estimators.privacy_loss import HoeffdingRenyiBound, MarkovRenyiBound
from rdpest.estimators.threshold import BernoulliTPRFPRBaseline
from rdpest.stats.certificates import certify_critic
from rdpest.stats.regions import log_mean_exp
from rdpest.utils.io import atomic_write_text

__all__ = [
    "CLASSIC_FAMILIES",
    "ESTIMATORS",
    "grid",
    "main",
    "run_cell",
    "sampling_floor",
    "write_tables",
]

BETA = 0.05
ESTIMATORS = ("dv", "markov", "hoeffding", "bernoulli")
#: The families of the first benchmark grid (before issue 17 added the others).
CLASSIC_FAMILIES = (
    "gaussian_shift",
    "gaussian_scale",
    "laplace_shift",
    "subsampled_gaussian",
    "multivariate_gaussian",
)
# Orders and divergences of the cells of the families added by issue 17 (n = 500 per side); the
# pairs a family cannot reach (laplace_scale near its infinite boundary) are left out.
_NEW_FAMILY_ALPHAS = (1.25, 2.0, 4.0, 8.0)
_NEW_FAMILY_DIVERGENCES = (0.0, 1.0, 4.0)


def _exact_ratio(family: str, params: dict):
    ratio = log_likelihood_ratio(family, params)
    return lambda A: np.asarray(ratio(A), dtype=np.float64).reshape(len(A))


def _make_estimator(name: str, family: str, params: dict, alpha: float, seed: int):
    """The estimator of a cell, or None where it does not apply to the family."""
    if name == "dv":
        return DVRenyiEstimator(alpha=alpha, beta=BETA, random_state=seed)
    if name == "markov":
        return MarkovRenyiBound(alpha=alpha, beta=BETA, log_ratio=_exact_ratio(family, params))
    if name == "hoeffding":
        if family != "laplace_shift":
            return None  # unbounded privacy loss: Hoeffding's assumption fails
        bound = max(abs(params["shift"]) / params.get("scale", 1.0), 1e-12)
        return HoeffdingRenyiBound(
            alpha=alpha,
            beta=BETA,
            privacy_loss_bound=bound,
            log_ratio=_exact_ratio(family, params),
        )
    if name == "bernoulli":
        score = (lambda A: A.sum(axis=1)) if family == "multivariate_gaussian" else None
        return BernoulliTPRFPRBaseline(
            alpha=alpha, beta=BETA, score_function=score, random_state=seed
        )
    raise ValueError(f"unknown estimator {name!r}; choose from {ESTIMATORS}")


def _oracle_bound(est, X, Y, ratio, alpha) -> float:
    forward = est.directions_["forward"]
    in_p = np.zeros(len(X), dtype=bool)
    in_p[forward.test_index_p] = True
    in_q = np.zeros(len(Y), dtype=bool)
    in_q[forward.test_index_q] = True
    cert = certify_critic(
        ratio(X[~in_p]),
        ratio(Y[~in_q]),
        ratio(X[in_p]),
        ratio(Y[in_q]),
        alpha=alpha,
        beta=forward.beta,
        method=est.confidence,
        kind=est.certificate,
    )
    return max(0.0, cert.lower_bound)


def sampling_floor(loss_p: np.ndarray, loss_q: np.ndarray, alpha: float) -> tuple[float, float]:
    """Plug-in D_α with the exact log ratio: (P-form on L(X), Q-form on L(Y)).

    P-form 1/(α−1) · log mean e^{(α−1)L(X)}, Q-form 1/(α−1) · log mean e^{αL(Y)}; both estimate
    log E_Q[(p/q)^α]/(α−1) = D_α(P‖Q), by importance weighting from P and directly from Q.
    """
    loss_p = np.asarray(loss_p, dtype=np.float64)
    loss_q = np.asarray(loss_q, dtype=np.float64)
    p_form = log_mean_exp((alpha - 1.0) * loss_p) / (alpha - 1.0)
    q_form = log_mean_exp(alpha * loss_q) / (alpha - 1.0)
    return p_form, q_form


def _median_rel_error(values, truth: float) -> float:
    values = np.asarray(values, dtype=np.float64)
    return float(np.median(np.abs(values - truth)) / truth) if truth > 0 else math.nan


def run_cell(
    estimator: str, family: str, alpha: float, divergence: float, n: int, repetitions: int
) -> dict | None:
    """Benchmark one estimator on one (family, α, D, n) cell; None if it does not apply."""
    params = family_parameters(family, alpha, divergence)
    if _make_estimator(estimator, family, params, alpha, 0) is None:
        return None
    ratio = _exact_ratio(family, params)
    rows = []
    for rep in range(repetitions):
        X, Y, truth = make_renyi_pair(family, alpha, divergence, n, random_state=10_000 + rep)
        est = _make_estimator(estimator, family, params, alpha, rep)
        start = time.perf_counter()
        est.fit(X, Y)
        seconds = time.perf_counter() - start
        raw = est.directions_["forward"].raw_lower_bound
        floor_p, floor_q = sampling_floor(ratio(X), ratio(Y), alpha)
        rows.append(
            {
                "point": est.divergence_,
                "bound": est.lower_bound_,
                "raw_bound": raw,
                "oracle": _oracle_bound(est, X, Y, ratio, alpha) if estimator == "dv" else math.nan,
                "seconds": seconds,
                "truth": truth,
                "floor_p": floor_p,
                "floor_q": floor_q,
            }
        )
    point = np.array([r["point"] for r in rows])
    truth = rows[0]["truth"]
    point_rel = _median_rel_error(point, truth)
    floor_p = _median_rel_error([r["floor_p"] for r in rows], truth)
    floor_q = _median_rel_error([r["floor_q"] for r in rows], truth)
    best_floor = min(floor_p, floor_q)
    return {
        "estimator": estimator,
        "family": family,
        "alpha": alpha,
        "n": n,
        "truth": truth,
        "repetitions": repetitions,
        "certified": bool(est.certified_),
        "point_mean": float(point.mean()),
        "point_sd": float(point.std(ddof=1)) if len(point) > 1 else 0.0,
        "point_median_rel_error": point_rel,
        "point_max": float(point.max()),
        "bound_mean": float(np.mean([r["bound"] for r in rows])),
        "miscoverage": float(np.mean([r["raw_bound"] > truth for r in rows])),
        "oracle_mean": float(np.mean([r["oracle"] for r in rows])),
        "seconds_median": float(np.median([r["seconds"] for r in rows])),
        "floor_p_median_rel_error": floor_p,
        "floor_q_median_rel_error": floor_q,
        # The row's median relative error over the better floor (nan at D = 0, and inf where the
        # exact plug-in was exact on every repetition).
        "over_floor": (
            point_rel / best_floor if best_floor > 0 else (math.inf if point_rel > 0 else math.nan)
        ),
    }


def grid(quick: bool = False, families=None) -> list[tuple[str, float, float, int]]:
    """The (family, α, D, n) cells: the DV issue's targets plus the issue-17 families, or a small
    smoke-test grid; ``families`` (default: all) keeps only those families' cells."""
    families = FAMILIES if families is None else tuple(families)
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        raise ValueError(f"unknown families {unknown}; choose from {FAMILIES}")
    if quick:
        cells = [("gaussian_shift", 2.0, 1.0, 500), ("laplace_shift", 2.0, 0.0, 500)]
        return [cell for cell in cells if cell[0] in families]
    cells = [
        ("gaussian_shift", alpha, d, n)
        for n in (500, 5000)
        for alpha in (1.25, 2.0)
        for d in (0.0, 0.5, 1.0, 2.0, 4.0)
    ]
    others = ("gaussian_scale", "laplace_shift", "subsampled_gaussian", "multivariate_gaussian")
    cells += [(family, 2.0, d, 500) for family in others for d in (0.0, 1.0, 4.0)]
    cells += [("laplace_shift", 2.0, d, 5000) for d in (0.0, 1.0, 4.0)]
    for family in (f for f in FAMILIES if f not in CLASSIC_FAMILIES):
        for alpha in _NEW_FAMILY_ALPHAS:
            for d in _NEW_FAMILY_DIVERGENCES:
                try:
                    family_parameters(family, alpha, d)
                except ValueError:  # out of the family's reach at this order
                    continue
                cells.append((family, alpha, d, 500))
    return [cell for cell in cells if cell[0] in families]


_COLUMNS = [
    "estimator", "family", "alpha", "n", "truth", "certified", "point_mean", "point_sd",
    "point_median_rel_error", "point_max", "bound_mean", "miscoverage", "oracle_mean",
    "seconds_median", "repetitions", "floor_p_median_rel_error", "floor_q_median_rel_error",
    "over_floor",
]  # fmt: skip


#: The committed results; quick runs write under ``QUICK_RESULTS`` (ignored by git) instead.
RESULTS_ROOT = Path(__file__).resolve().parent / "results"
QUICK_RESULTS = RESULTS_ROOT / "quick"


def require_jobs(jobs: list) -> list:
    """``jobs``, or an exit naming the flags to check where the grid is empty (an empty grid once
    wrote empty tables over the results, and exited 0)."""
    if not jobs:
        raise SystemExit(
            "nothing to run: the grid is empty (check --families, --alphas, --divergences, "
            "--seeds, --n)"
        )
    return jobs


def check_flags(parser, args, quick_sets=()) -> None:
    """Exit (argparse's usage error) for counts no run can use, before any folder is touched or
    job started (``--n 0`` used to fail as a traceback in the first worker, ``--n-jobs 0`` in
    joblib), and for flags that ``--quick`` would replace without a word: ``quick_sets`` names
    the arguments ``--quick`` chooses itself."""
    for name in ("n", "seeds", "repetitions", "runs"):
        value = getattr(args, name, None)
        if value is not None and value < 1:
            parser.error(f"--{name} must be at least 1, got {value}")
    if getattr(args, "n_jobs", None) == 0:
        parser.error("--n-jobs must be a positive number of workers or negative (-1: all cores)")
    if getattr(args, "quick", False):
        given = [n for n in quick_sets if getattr(args, n) != parser.get_default(n)]
        if given:
            flags = ", ".join("--" + n.replace("_", "-") for n in given)
            parser.error(f"--quick chooses {flags} itself: drop --quick or {flags}")


def refuse_foreign_cells(parser, folder: Path, needed) -> None:
    """Exit if ``folder/cells`` holds a row without the columns ``needed``: per-seed cells are
    named by their cell alone, so another script's or another mode's rows in the same ``--out``
    were read back as this run's (and crashed its summary, or joined its table)."""
    for path in sorted((Path(folder) / "cells").glob("*.json")):
        missing = [k for k in needed if k not in json.loads(path.read_text())]
        if missing:
            parser.error(
                f"{path} was written by another benchmark or mode (it has no {missing[0]!r}): "
                "pass an --out of this run's own"
            )


def write_json(path: Path, value, indent: int | None = 1) -> None:
    """``value`` as strict JSON (NaN and infinities as null, which Python's json would write
    as the non-standard NaN and Infinity), written atomically."""
    atomic_write_text(Path(path), json.dumps(_strict(value), indent=indent, allow_nan=False))


def output_folder(out) -> Path:
    """``out`` as a folder to write results into (created, before any cell is computed), or an
    exit saying why it cannot be one."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise SystemExit(f"--out {out} is a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SystemExit(f"--out {out} cannot be created: {exc.strerror or exc}") from None
    return out


def results_folder(out, default: Path, quick: bool) -> Path:
    """Where a benchmark writes: ``out`` if given; else ``default`` (its committed results), or
    for a ``--quick`` run the same folder under ``benchmarks/results/quick/``, so that a quick
    check never replaces a committed table with its own few cells."""
    if out is not None:
        return Path(out)
    if not quick:
        return Path(default)
    folder = QUICK_RESULTS / Path(default).resolve().relative_to(RESULTS_ROOT)
    print(f"--quick: results go to {folder} (the committed tables are left alone)", file=sys.stderr)
    return folder


def _read_cell(path: Path) -> dict | None:
    """A finished cell's record: its nulls (values undefined or infinite when it was written)
    read back as NaN, which the tables print as blanks. Cells written before the files were
    strict JSON hold NaN tokens, which Python reads as NaN too. A cell the estimator skips
    (``run_cell`` gave None) is the file ``null``: None, skipped again without a fit."""
    record = json.loads(path.read_text())
    if record is None:
        return None
    return {k: math.nan if v is None else v for k, v in record.items()}


def _strict(value):
    """``value`` with every non-finite float replaced by None (JSON null)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(v) for v in value]
    return value


def _fmt(value, spec: str = ".3f") -> str:
    # Blank where undefined or infinite (a relative error at D = 0): results.json holds null there
    return "" if value is None or not math.isfinite(value) else format(value, spec)


def write_tables(records: list[dict], out: Path, command: str | None = None) -> str:
    """Write results.csv / .json / .md under ``out``; return the Markdown (the table, after a
    line naming ``command`` where given)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(_strict(records))  # an undefined value is an empty field, not "nan"
    atomic_write_text(out / "results.csv", buffer.getvalue())
    # Strict JSON: a value that is undefined (a relative error at D = 0) or infinite is null,
    # not Python's NaN/Infinity tokens, which strict parsers (jq, JavaScript) refuse.
    write_json(out / "results.json", records, indent=2)
    lines = [
        "| estimator | family | α | n | truth | point mean ± sd | median rel. err | bound mean "
        "| miscoverage | oracle bound | s/fit (median) | floor rel. err P / Q | ÷ best floor |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(records, key=lambda r: (r["family"], r["n"], r["alpha"], r["truth"])):
        oracle, rel = _fmt(r["oracle_mean"]), _fmt(r["point_median_rel_error"])
        lines.append(
            f"| {r['estimator']} | {r['family']} | {r['alpha']:g} | {r['n']} | {r['truth']:.3g} "
            f"| {r['point_mean']:.3f} ± {r['point_sd']:.3f} | {rel} | {r['bound_mean']:.3f} "
            f"| {r['miscoverage']:.3f} | {oracle} | {r['seconds_median']:.3f} "
            f"| {_fmt(r.get('floor_p_median_rel_error', math.nan))} / "
            f"{_fmt(r.get('floor_q_median_rel_error', math.nan))} "
            f"| {_fmt(r.get('over_floor', math.nan), '.2f')} |"
        )
    table = (f"Command: `{command}`\n\n" if command else "") + "\n".join(lines) + "\n"
    atomic_write_text(out / "results.md", table)
    return table


def main(
    out,
    *,
    quick: bool = False,
    repetitions: int | None = None,
    estimators=ESTIMATORS,
    families=None,
    command: str | None = None,
) -> str:
    """Run (or resume) the benchmark into ``out``; return the Markdown table.

    ``families``: only these families' cells (default: all; :data:`CLASSIC_FAMILIES` for the
    first benchmark's grid). ``command``: what ran it, written above the table.
    """
    if repetitions is not None and repetitions < 1:
        raise SystemExit(f"--repetitions must be at least 1, got {repetitions}")
    repetitions = repetitions or (5 if quick else 50)
    records = []
    try:
        cells = require_jobs([(e, *cell) for cell in grid(quick, families) for e in estimators])
    except ValueError as exc:  # an unknown family: the message, not a traceback
        raise SystemExit(str(exc)) from None
    out = output_folder(out)  # created once the flags are known to be good
    for estimator, family, alpha, d, n in tqdm(cells, desc="benchmark cells"):
        path = out / "cells" / f"{estimator}_{family}_a{alpha:g}_d{d:g}_n{n}_r{repetitions}.json"
        record = _read_cell(path) if path.exists() else None
        # Resume from finished cells, except those written before the sampling floor existed.
        if not path.exists() or (record is not None and "over_floor" not in record):
            record = run_cell(estimator, family, alpha, d, n, repetitions)
            write_json(path, record, indent=None)  # strict: NaN (undefined) as null
        if record is not None:
            records.append(record)
    return write_tables(records, out, command)
