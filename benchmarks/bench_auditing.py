"""Auditing benchmarks: DP-SGD throughput, audit memory, and the paper's protocol on digits.

1. Throughput (``--throughput``): models per second on this machine for logistic regression, the
   one-hidden-layer MLP and the small CNN at 100 full-batch DP-SGD steps, with n_jobs = 1 and 2,
   each stacked (``stack_runs="auto"``, which stacks the CNN at most four at a time on the CPU)
   and one model at a time (``stack_runs=1``, plain Opacus), in the same run;
   and the largest data set (rows, full batch) that fits the memory budget of one stack for
   every built-in model. Each row is the median of three timings, and reports the rate of the
   models' forward and backward arithmetic (GFLOP/s), so rows can be compared with what this
   machine's batched products reach (the vectorised yardstick's rows); beside every stacked
   row at n_jobs = 1, the same model trained without privacy (plain autograd SGD, one at a time
   and stacked): what ordinary torch training of the model reaches here. ``--throughput-render``
   rewrites the table from the stored JSON. On a CUDA GPU: benchmarks/bench_cuda.py.
2. Protocol (``--protocol``): the set-up of Kim, Varshney & Alabi (2026), Tables 1/2,
   at small scale on scikit-learn's digits: worst-case (pretrained) initialisation, blank canary,
   full batch, C = 1, 100 steps, 500 runs with and 500 without the canary, for μ in
   {0.5, 1, √2, 2, √10} (ε₂ = 0.25, 1, 2, 4, 10; ε₁.₂₅ = 1.25 μ²/2). The runs of one μ serve
   both orders (the training does not depend on α). Reports the claim, the DV point estimate,
   the DV certified bound, the Bernoulli bound and the GDP-route estimate.
3. Memory (``--memory``): peak resident memory of a fresh 500 + 500-run audit, main process and
   joblib workers.
4. Reference (``--reference``): at the smallest claim (μ = 0.5, ε₂ = 0.25) the protocol's loss
   distributions themselves are measured with 10000 + 10000 runs: their D_α from a two-Gaussian
   fit (with a bootstrap interval) and from DV on all runs, the spread of the 500 + 500-run DV
   point estimate over 20 disjoint blocks, and the spread of the Gaussian fit itself at 500 + 500
   runs, i.e. how far one protocol audit can land from the claim by sampling alone.

With no flag it runs 1, 2 and 3 (throughput, protocol and memory). Finished runs are stored
under benchmarks/results/auditing/stores/ (append-only JSON lines), so an interrupted benchmark
resumes; tables are written to benchmarks/results/auditing/. ``--out DIR`` writes tables and
stores there instead; a ``--runs`` other than the protocol's 500 does so by default under
benchmarks/results/quick/auditing/, so a smaller check never replaces the committed tables.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from harness import check_flags

from rdpest.auditing import DPSGDAuditor
from rdpest.utils.io import atomic_write_text

OUT = Path(__file__).resolve().parent / "results" / "auditing"
QUICK_OUT = Path(__file__).resolve().parent / "results" / "quick" / "auditing"
#: Runs per arm of the protocol (its committed tables and stores).
PROTOCOL_RUNS = 500
MUS = {"0.5": 0.5, "1": 1.0, "sqrt2": math.sqrt(2.0), "2": 2.0, "sqrt10": math.sqrt(10.0)}
STEPS = 100


def _throughput_auditor(model, n_runs: int, n_jobs: int, device: str, stack_runs):
    """The audit whose training runs a throughput measurement times."""
    return DPSGDAuditor(
        noise_multiplier=1.0,
        steps=STEPS,
        n_runs=n_runs,
        model=model,
        n_jobs=n_jobs,
        device=device,
        progress=device == "cpu",
        random_state=1,
        stack_runs=stack_runs,
    ).auditor()


def _throughput_row(audit, model, stack_runs, n_jobs: int, timings: list[float]) -> dict:
    """One row from repeated timings of the same training (median reported, with the range)."""
    median = statistics.median(timings)
    row = {
        "model": model,
        "stack_runs": stack_runs,
        "runs_per_call": audit.score_fn.runs_per_call,
        "n_jobs": n_jobs,
        "steps": STEPS,
        "models": 2 * audit.n_runs,
        "seconds": median,
        "timings": timings,
        "models_per_second": 2 * audit.n_runs / median,
        "models_per_second_range": [
            2 * audit.n_runs / max(timings),
            2 * audit.n_runs / min(timings),
        ],
    }
    print(row, flush=True)
    return row


# (model, runs per arm, stack_runs) for --throughput: "auto" stacks at most a quarter of the
# runs, so 256 runs per arm give stacks of up to 64 (the CNN: 16 runs, stacks of 4, its CPU cap).
# Each configuration is timed REPEATS times and the median reported: this host's speed drifts
# by up to 1.5x between runs minutes apart, and one timing per row made the table's absolute
# figures depend on when a row happened to run.
THROUGHPUT_CASES = (
    ("lr", 256, "auto"),
    ("lr", 32, 1),
    ("mlp", 256, "auto"),
    ("mlp", 16, 1),
    ("cnn", 5, 1),
    ("cnn", 16, "auto"),
)
REPEATS = 3


def stack_capacity() -> list[dict]:
    """For every built-in model: the largest full-batch data set (rows) that one stack of K
    copies may train within this machine's CPU budget (rdpest.auditing.dpsgd.stacking)."""
    import torch

    from rdpest.auditing.dpsgd.models import make_model
    from rdpest.auditing.dpsgd.stacking import (
        BYTES_PER_ACTIVATION,
        activation_floats,
        stack_memory_budget,
    )

    shapes = {
        "lr": (64,),
        "mlp": (64,),
        "cnn": (1, 8, 8),
        "mnist_cnn": (1, 28, 28),
        "cifar10_cnn": (3, 32, 32),
    }
    budget = stack_memory_budget("cpu")
    rows = []
    for model, shape in shapes.items():
        with torch.random.fork_rng(devices=[]):
            net = make_model(model, math.prod(shape), 10, shape if len(shape) > 1 else None)
        per_row = activation_floats(net, shape) * BYTES_PER_ACTIVATION
        rows.append(
            {
                "model": model,
                "example_shape": list(shape),
                "bytes_per_row_and_copy": per_row,
                "budget_bytes": budget,
                "max_rows": {str(k): budget // (k * per_row) for k in (1, 16, 64)},
            }
        )
    return rows


def _yardstick_row(audit, model: str) -> dict:
    """The same training (the audit's data, stack size and settings) by the vectorised torch
    yardstick (benchmarks/vectorised_dpsgd.py, no Opacus), one thread, in this run."""
    import torch
    from vectorised_dpsgd import models_per_second

    from rdpest.auditing.dpsgd.models import make_model

    run = audit.score_fn
    with torch.random.fork_rng(devices=[]):
        net = make_model(model, int(run.X[0].size), run.n_classes)
    rates = [
        models_per_second(
            net, run.X, run.y, run.runs_per_call, steps=STEPS, noise_multiplier=1.0, repeats=1
        )
        for _ in range(REPEATS)
    ]
    rate = statistics.median(rates)
    row = {
        "model": model,
        "stack_runs": "vectorised torch (no Opacus)",
        "runs_per_call": run.runs_per_call,
        "n_jobs": 1,
        "steps": STEPS,
        "models": run.runs_per_call,
        "seconds": run.runs_per_call / rate,
        "timings": [run.runs_per_call / r for r in rates],
        "models_per_second": rate,
        "models_per_second_range": [min(rates), max(rates)],
    }
    print(row, flush=True)
    return row


def _sgd_rows(audit, model: str) -> list[dict]:
    """The same model on the same data trained without privacy (benchmarks/vectorised_dpsgd.py's
    plain autograd SGD), one model at a time and as the audit's stacked network, one thread, in
    this run: what ordinary torch training reaches with no per-example work at all."""
    import torch
    from vectorised_dpsgd import sgd_models_per_second

    from rdpest.auditing.dpsgd.models import make_model

    run = audit.score_fn
    with torch.random.fork_rng(devices=[]):
        net = make_model(model, int(run.X[0].size), run.n_classes)
    rows = []
    for copies, label in (
        (1, "plain torch SGD, no privacy"),
        (run.runs_per_call, "stacked, no privacy"),
    ):
        rates = [
            sgd_models_per_second(net, run.X, run.y, copies, steps=STEPS, repeats=1)
            for _ in range(REPEATS)
        ]
        rate = statistics.median(rates)
        row = {
            "model": model,
            "stack_runs": label,
            "runs_per_call": copies,
            "n_jobs": 1,
            "steps": STEPS,
            "models": copies,
            "seconds": copies / rate,
            "timings": [copies / r for r in rates],
            "models_per_second": rate,
            "models_per_second_range": [min(rates), max(rates)],
        }
        print(row, flush=True)
        rows.append(row)
    return rows


def throughput() -> list[dict]:
    """Models per second of the audit's training, stacked and one model at a time (plain Opacus),
    in one process; and the largest data size per stack."""
    rows = []
    for model, n_runs, stack_runs in THROUGHPUT_CASES:
        for n_jobs in (1, 2):
            audit = _throughput_auditor(model, n_runs, n_jobs, "cpu", stack_runs)
            if n_jobs > 1:  # start the worker pool first: its start-up is not training
                audit.n_runs = 16
                audit.collect()
                audit.n_runs = n_runs
            timings = []
            for _ in range(REPEATS):  # no store: every collect trains all runs again
                start = time.perf_counter()
                audit.collect()
                timings.append(time.perf_counter() - start)
            rows.append(_throughput_row(audit, model, stack_runs, n_jobs, timings))
            if n_jobs == 1 and stack_runs == "auto":
                if model in ("lr", "mlp"):
                    rows.append(_yardstick_row(audit, model))
                rows += _sgd_rows(audit, model)
    write_throughput_tables(rows)
    return rows


def training_gflop(model: str) -> float:
    """GFLOP of one model's training in the throughput benchmark: torch's FlopCounterMode count
    of one full-batch forward and backward pass on the audit's training rows, times the steps
    (the per-example norms, clipping and noise come on top)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from rdpest.auditing.dpsgd.models import make_model

    run = _throughput_auditor(model, 8, 1, "cpu", 1).score_fn
    with torch.random.fork_rng(devices=[]):
        net = make_model(model, int(run.X[0].size), run.n_classes)
    X = torch.as_tensor(run.X, dtype=torch.float32).reshape(len(run.X), -1)
    y = torch.as_tensor(run.y, dtype=torch.long)
    with FlopCounterMode(display=False) as counter:
        torch.nn.functional.cross_entropy(net(X), y).backward()
    return counter.get_total_flops() * STEPS / 1e9


def write_throughput_tables(rows: list[dict]) -> None:
    """throughput.json and throughput.md from the timed rows (``--throughput-render`` re-renders
    them from a stored throughput.json)."""
    capacity = stack_capacity()
    gflop = {model: training_gflop(model) for model in sorted({r["model"] for r in rows})}
    lines = [
        "# DP-SGD training throughput (CPU)",
        "",
        "Command: `python benchmarks/bench_auditing.py --throughput` (this machine: "
        f"{os.cpu_count()} cores; digits, 100 full-batch steps, sigma = 1). Stacked and plain "
        "(stack_runs=1, one Opacus PrivacyEngine per model) rows come from the same run; "
        'absolute figures drift between runs, the ratios less so. The "vectorised torch" rows '
        "are a yardstick, not a trainer: the same DP-SGD on the same data and stack written "
        "directly in torch without Opacus (benchmarks/vectorised_dpsgd.py; one "
        "thread; its tanh is the same 2·sigmoid(2x) − 1 as the stacked training's), a reference "
        'for what plain batched torch code reaches here. The "no privacy" rows train the same '
        "model on the same data without privacy (plain autograd SGD: no per-example gradients, "
        "clipping or noise), one model at a time and as the audit's stacked network, on one "
        "thread: what ordinary torch training of the model reaches here. They are a reference, "
        "not a bound: the stacked DP-SGD's own backward pass and loss beat autograd's on linear "
        "layers. Every row is the median of "
        f"{REPEATS} timings of the same training (seconds: the median timing; models/s: at the "
        "median, with the range over the timings). GFLOP/s: the rate of the models' forward and "
        "backward arithmetic (torch's FlopCounterMode count of one model's full-batch pass on the "
        "training rows, times the steps: "
        + ", ".join(f"{m} {g:.2f} GFLOP per model" for m, g in gflop.items())
        + "; per-example norms, clipping and noise come on top). At these sizes elementwise "
        "passes and memory traffic take much of a step, so the rate stays well below what one "
        "thread's matrix products reach on large matrices.",
        "",
        "| model | stack_runs (models per stack) | n_jobs | steps | models | seconds | models/s "
        "| range | GFLOP/s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['model']} | {r['stack_runs']} ({r['runs_per_call']}) | {r['n_jobs']} "
        f"| {r['steps']} | {r['models']} | {r['seconds']:.1f} | {r['models_per_second']:.2f} "
        f"| {r['models_per_second_range'][0]:.2f}–{r['models_per_second_range'][1]:.2f} "
        f"| {r['models_per_second'] * gflop[r['model']]:.1f} |"
        for r in rows
    ]
    budget = capacity[0]["budget_bytes"]
    lines += [
        "",
        "## Largest data set per stack",
        "",
        f"The CPU budget of one stack on this machine: {budget / 2**20:.0f} MiB (a quarter of "
        "the available RAM per core, at most 1 GiB). Rows: full-batch examples one stack of K "
        "copies may train within it (16 bytes per activation float, per row and copy).",
        "",
        "| model | example | bytes per row and copy | K = 1 | K = 16 | K = 64 |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {c['model']} | {'x'.join(map(str, c['example_shape']))} "
        f"| {c['bytes_per_row_and_copy']} | {c['max_rows']['1']} | {c['max_rows']['16']} "
        f"| {c['max_rows']['64']} |"
        for c in capacity
    ]
    atomic_write_text(
        OUT / "throughput.json",
        json.dumps({"rows": rows, "capacity": capacity, "gflop_per_model": gflop}, indent=2),
    )
    atomic_write_text(OUT / "throughput.md", "\n".join(lines) + "\n")


def _peak_rss_mb(pid: int) -> float:
    """Peak resident memory (VmHWM) of a live process, from /proc (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def memory(n_runs: int, n_jobs: int) -> dict:
    """Peak memory of a fresh audit of n_runs + n_runs models, main process and workers.

    The joblib (loky) workers stay alive after the audit, so their peak is read from /proc
    (getrusage's RUSAGE_CHILDREN only counts children that have exited).
    """
    import tempfile

    import psutil  # a dependency of the dask extra, installed with the dev extra

    with tempfile.TemporaryDirectory() as store:
        start = time.perf_counter()
        DPSGDAuditor(
            noise_multiplier=10.0, steps=STEPS, n_runs=n_runs, n_jobs=n_jobs, store=store
        ).run()
        seconds = time.perf_counter() - start
    workers = psutil.Process().children(recursive=True)
    peaks = [_peak_rss_mb(w.pid) for w in workers]
    result = {
        "n_runs_per_arm": n_runs,
        "n_jobs": n_jobs,
        "seconds": seconds,
        "peak_mb_main": _peak_rss_mb(os.getpid()),
        "peak_mb_workers": peaks,
        "peak_mb_total": _peak_rss_mb(os.getpid()) + sum(peaks),
    }
    atomic_write_text(OUT / "memory.json", json.dumps(result, indent=2))
    atomic_write_text(
        OUT / "memory.md",
        "# Peak memory of a default audit\n\n"
        f"Command: `python benchmarks/bench_auditing.py --memory --runs {n_runs} --n-jobs "
        f"{n_jobs}` (this machine: {os.cpu_count()} cores). A fresh `DPSGDAuditor` with its "
        'defaults (logistic regression, stack size "auto", digits) but sigma = 10 and '
        f"{STEPS} steps; peak resident memory of the main process and of every joblib worker "
        "(read from /proc), summed.\n\n"
        "| runs (with + without) | n_jobs | seconds | peak MB main | peak MB workers | total |\n"
        "|---|---|---|---|---|---|\n"
        f"| {n_runs} + {n_runs} | {n_jobs} | {seconds:.0f} | {result['peak_mb_main']:.0f} "
        f"| {', '.join(f'{p:.0f}' for p in peaks)} | {result['peak_mb_total']:.0f} |\n",
    )
    print(json.dumps(result), flush=True)
    return result


def _protocol_auditor(
    mu: float, alpha: float, n_runs: int, n_jobs: int, store: str, stack_runs="auto"
):
    """The paper's protocol at μ-GDP level ``mu`` (full batch: μ = √T / σ), runs in ``store``."""
    return DPSGDAuditor(
        alpha=alpha,
        noise_multiplier=math.sqrt(STEPS) / mu,
        steps=STEPS,
        n_runs=n_runs,
        n_jobs=n_jobs,
        device="cpu",
        store=OUT / "stores" / store,
        random_state=0,
        stack_runs=stack_runs,
    )


def _stored_runs(store: str) -> tuple[int | str, dict]:
    """A protocol store's stack size ("auto" where it has none) and its runs by (arm, index)."""
    path = OUT / "stores" / store
    try:
        config = json.loads((path / "config.json").read_text())
        stack = config["pipeline"]["stack_size"]
        lines = (path / "runs.jsonl").read_text().splitlines()
    except (OSError, KeyError, ValueError):
        return "auto", {}
    runs = [json.loads(line) for line in lines if line.strip()]
    return stack, {(r["arm"], r["index"]): r["score"] for r in runs}


# Other train/certify splits of the same runs: every seed is an equally valid audit, so the
# spread of the certified bounds over seeds says how much of a DV-against-Bernoulli gap in one
# row is the luck of the split.
SPLIT_SEEDS = range(1, 11)


def _bound_spread(result, alpha: float) -> dict:
    """The DV and Bernoulli certified bounds on the audit's own runs over :data:`SPLIT_SEEDS`.

    The audit's own estimators (:func:`rdpest.auditing.auditor.default_estimators`) at the β the
    audit gave each, P the runs with the canary as in the audit; DV with one partition and no
    cross-fit (only the first partition's first critic certifies, so the bound's distribution
    over seeds is the audit's).
    """
    from rdpest.auditing.auditor import default_estimators

    e = result.estimates
    without = np.asarray(result.losses_without_canary, dtype=np.float64).reshape(-1, 1)
    with_canary = np.asarray(result.losses_with_canary, dtype=np.float64).reshape(-1, 1)
    bounds = {"dv": [], "bernoulli": []}
    for seed in SPLIT_SEEDS:
        audit = default_estimators(alpha, seed)
        # Bound-neutral savings for DV: one partition, no cross-fit.
        audit["dv"].set_params(n_repeats=1, point_estimate="split")
        for name, values in bounds.items():
            estimator = audit[name].set_params(beta=e[name]["beta"])
            values.append(estimator.fit(with_canary, without).lower_bound_)
    dv, bernoulli = np.array(bounds["dv"]), np.array(bounds["bernoulli"])
    return {
        "dv_bounds_other_splits": dv.tolist(),
        "bernoulli_bounds_other_splits": bernoulli.tolist(),
        "dv_at_least_bernoulli_splits": int(np.sum(dv >= bernoulli)),
    }


def _spread_cell(values: list[float]) -> str:
    return f"{np.median(values):.3f} ({min(values):.3f}–{max(values):.3f})"


def protocol(n_runs: int, n_jobs: int) -> list[dict]:
    rows = []
    for label, mu in MUS.items():
        for alpha in (2.0, 1.25):
            start = time.perf_counter()
            result = _protocol_auditor(mu, alpha, n_runs, n_jobs, f"mu_{label}").run()
            e = result.estimates
            rows.append(
                {
                    "mu": mu,
                    "alpha": alpha,
                    "claimed_epsilon": result.claimed_epsilon,
                    "dv_point": e["dv"]["divergence"],
                    "dv_bound": e["dv"]["lower_bound"],
                    "bernoulli_bound": e["bernoulli"]["lower_bound"],
                    "bernoulli_point": e["bernoulli"]["divergence"],
                    "gdp_route": e["gdp_route"]["divergence"],
                    "gdp_route_bound": e["gdp_route"]["lower_bound"],
                    "verdict": result.verdict,
                    "n_runs": n_runs,
                    "seconds": time.perf_counter() - start,
                    **_bound_spread(result, alpha),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
            # Keep the per-α result next to the store (the store's result.json is overwritten).
            result.to_json(OUT / "stores" / f"mu_{label}" / f"result_alpha{alpha:g}.json")
    atomic_write_text(OUT / "protocol.json", json.dumps({"rows": rows}, indent=2))
    lines = [
        "Command: `python benchmarks/bench_auditing.py --protocol`"
        + ("" if n_runs == PROTOCOL_RUNS else f" --runs {n_runs}"),
        "",
        "| α | claimed ε_α | DV point | DV certified bound | Bernoulli bound | GDP route "
        "(not certified) | verdict | DV bound, other splits | Bernoulli bound, other splits "
        "| DV >= Bernoulli |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (-r["alpha"], r["claimed_epsilon"])):
        lines.append(
            f"| {r['alpha']:g} | {r['claimed_epsilon']:.3f} | {r['dv_point']:.3f} "
            f"| {r['dv_bound']:.3f} | {r['bernoulli_bound']:.3f} | {r['gdp_route']:.3f} "
            f"| {r['verdict']} | {_spread_cell(r['dv_bounds_other_splits'])} "
            f"| {_spread_cell(r['bernoulli_bounds_other_splits'])} "
            f"| {r['dv_at_least_bernoulli_splits']}/{len(SPLIT_SEEDS)} |"
        )
    lines.append("")
    lines.append(
        f'"Other splits": the same runs certified again with seeds {SPLIT_SEEDS.start}–'
        f"{SPLIT_SEEDS.stop - 1} (median, min–max), each estimator at the β the audit gave it; "
        "the last column counts the seeds where DV's bound is at least Bernoulli's."
    )
    lines.append("")
    lines.append(
        f"{n_runs} + {n_runs} runs per μ (shared by both orders), logistic regression, blank "
        f"canary, {STEPS} full-batch steps, C = 1, pretrained initialisation (memory: see "
        "memory.md)."
    )
    atomic_write_text(OUT / "protocol.md", "\n".join(lines) + "\n")
    return rows


def _gaussian_fit_divergence(P, Q, alpha: float) -> float:
    """max of D_α in both directions between normal distributions fitted to P and Q."""
    from rdpest.stats.divergences import gaussian_renyi_divergence

    p, q = (P.mean(), P.std(ddof=1)), (Q.mean(), Q.std(ddof=1))
    return float(
        max(gaussian_renyi_divergence(alpha, *p, *q), gaussian_renyi_divergence(alpha, *q, *p))
    )


def _parametric_floor(P, Q, alpha: float, n: int, rng, reps: int = 2000):
    """Spread of the two-Gaussian fit itself on n + n draws from the Gaussians fitted to P, Q.

    The estimator that knows the losses are Gaussian (maximum likelihood in that family) is about
    as precise as any can be on Gaussian data, so its spread at n runs per arm is a floor for
    DV's: how close any 500-run audit can be expected to land.
    """
    import numpy as np

    mp, sp, mq, sq = P.mean(), P.std(ddof=1), Q.mean(), Q.std(ddof=1)
    return np.array(
        [
            _gaussian_fit_divergence(rng.normal(mp, sp, n), rng.normal(mq, sq, n), alpha)
            for _ in range(reps)
        ]
    )


def reference(n_runs: int, n_jobs: int, label: str = "0.5", block: int = 500) -> dict:
    import numpy as np

    from rdpest import DVRenyiEstimator

    mu = MUS[label]
    # The protocol's stack layout, so that the reference's first block repeats the protocol's
    # runs (each stack's noise comes from its runs' seeds: runs in a stack of another size, such
    # as the protocol's last, partial stack, differ); how many it repeats is counted below.
    stack, protocol_runs = _stored_runs(f"mu_{label}")
    store = f"mu_{label}_reference"
    audit = _protocol_auditor(mu, 2.0, n_runs, n_jobs, store, stack_runs=stack).auditor()
    without, with_ = audit.collect()
    # Equal up to float32 rounding (the scores are float32; threads and hosts move the last
    # bits): a relative difference below 1e-6, about 8 float32 ulps.
    shared = sum(
        (arm, i) in protocol_runs
        and math.isclose(protocol_runs[(arm, i)], float(scores[i]), rel_tol=1e-6)
        for arm, scores in ((0, without), (1, with_))
        for i in range(block)
    )
    rng = np.random.default_rng(0)
    rows = []
    for alpha in (2.0, 1.25):
        claim = alpha * mu**2 / 2
        fit = _gaussian_fit_divergence(with_, without, alpha)
        boot = []
        for _ in range(200):
            i, j = rng.integers(n_runs, size=n_runs), rng.integers(n_runs, size=n_runs)
            boot.append(_gaussian_fit_divergence(with_[i], without[j], alpha))
        dv_all = DVRenyiEstimator(alpha=alpha, direction="max", n_repeats=5, random_state=0)
        dv_all.fit(with_, without)
        subsample_points = []
        for k in range(n_runs // block):
            part = slice(block * k, block * (k + 1))
            est = DVRenyiEstimator(alpha=alpha, direction="max", n_repeats=5, random_state=k)
            subsample_points.append(est.fit(with_[part], without[part]).divergence_)
            print(f"alpha={alpha} block {k}: {subsample_points[-1]:.3f}", flush=True)
        points = np.array(subsample_points)
        floor = _parametric_floor(with_, without, alpha, block, rng)
        rows.append(
            {
                "mu": mu,
                "alpha": alpha,
                "claimed_epsilon": claim,
                "n_runs": n_runs,
                "gaussian_fit": fit,
                "gaussian_fit_interval_95": [
                    float(np.quantile(boot, 0.025)),
                    float(np.quantile(boot, 0.975)),
                ],
                "dv_point_all_runs": dv_all.divergence_,
                "block": block,
                "stack_runs": stack,
                "first_block_runs_equal_to_protocol_to_float32_rounding": shared,
                "dv_point_blocks": points.tolist(),
                "dv_blocks_within_20_percent_of_claim": float(
                    np.mean(np.abs(points - claim) <= 0.2 * claim)
                ),
                "gaussian_fit_at_block_size_sd": float(floor.std(ddof=1)),
                "gaussian_fit_at_block_size_within_20_percent_of_claim": float(
                    np.mean(np.abs(floor - claim) <= 0.2 * claim)
                ),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    atomic_write_text(OUT / "reference.json", json.dumps({"rows": rows}, indent=2))
    lines = [
        "Command: `python benchmarks/bench_auditing.py --reference`",
        "",
        f"| α | claimed ε_α | Gaussian fit, all runs (95% bootstrap) | DV, all runs | DV on "
        f"{block} + {block}-run blocks: mean ± sd | DV blocks within 20% of the claim | Gaussian "
        f"fit at {block} + {block}: sd | Gaussian fit at {block} + {block}: within 20% of the "
        "claim |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        pts = np.array(r["dv_point_blocks"])
        lo, hi = r["gaussian_fit_interval_95"]
        lines.append(
            f"| {r['alpha']:g} | {r['claimed_epsilon']:.3f} | {r['gaussian_fit']:.3f} "
            f"({lo:.3f}–{hi:.3f}) | {r['dv_point_all_runs']:.3f} | {pts.mean():.3f} ± "
            f"{pts.std(ddof=1):.3f} | {r['dv_blocks_within_20_percent_of_claim']:.0%} of "
            f"{pts.size} | {r['gaussian_fit_at_block_size_sd']:.3f} | "
            f"{r['gaussian_fit_at_block_size_within_20_percent_of_claim']:.0%} |"
        )
    lines.append("")
    lines.append(
        f"{n_runs} + {n_runs} runs at μ = {mu:g} (protocol set-up otherwise); the blocks are "
        f"disjoint, {block} runs per arm each, trained in stacks of {stack} as the protocol's; "
        + (
            f"all {2 * block} runs of the first block are the protocol's own (equal to float32 "
            "rounding). "
            if shared == 2 * block
            else f"{shared} of the first block's {2 * block} runs are the protocol's own (equal "
            "to float32 rounding; a stack's noise comes from its runs' seeds, so the runs of a "
            "protocol store trained with a partial last stack differ). "
        )
        + "DV with "
        "direction='max' and n_repeats=5, as in audits. The last two columns: the two-Gaussian "
        f"fit (maximum likelihood, the best estimator if the losses were exactly Gaussian) on "
        f"{block} + {block} draws from the Gaussians fitted to all runs, 2000 repetitions: how "
        "close a 500-run audit can land at best."
    )
    atomic_write_text(OUT / "reference.md", "\n".join(lines) + "\n")
    return {"rows": rows}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--throughput", action="store_true")
    parser.add_argument("--protocol", action="store_true")
    parser.add_argument("--memory", action="store_true", help="peak memory of a fresh audit")
    parser.add_argument(
        "--reference",
        action="store_true",
        help="the smallest claim's losses from 10000 + 10000 runs",
    )
    parser.add_argument(
        "--throughput-render",
        action="store_true",
        help="rewrite throughput.md from the stored throughput.json (no timing)",
    )
    parser.add_argument("--runs", type=int, default=PROTOCOL_RUNS)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="tables and stores (default: benchmarks/results/auditing/; with a --runs other "
        "than 500, benchmarks/results/quick/auditing/)",
    )
    args = parser.parse_args(argv)
    check_flags(parser, args)
    global OUT
    if args.out is not None:
        OUT = args.out
    elif args.runs != PROTOCOL_RUNS:
        OUT = QUICK_OUT
        print(f"--runs {args.runs}: tables and stores go to {OUT}", file=sys.stderr)
    if args.throughput_render:
        write_throughput_tables(json.loads((OUT / "throughput.json").read_text())["rows"])
        return 0
    if not (args.throughput or args.protocol or args.memory or args.reference):
        args.throughput = args.protocol = args.memory = True
    if args.throughput:
        throughput()
    if args.protocol:
        protocol(args.runs, args.n_jobs)
    if args.memory and (args.throughput or args.protocol):
        # A fresh process: the peak it reads (VmHWM) is the process's whole life, so after the
        # other sections it would be theirs, not the audit's.
        import subprocess

        command = [sys.executable, __file__, "--memory", "--runs", str(args.runs)]
        command += ["--n-jobs", str(args.n_jobs), "--out", str(OUT)]
        subprocess.run(command, check=True)
    elif args.memory:
        memory(args.runs, args.n_jobs)
    if args.reference:
        reference(10_000, args.n_jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
