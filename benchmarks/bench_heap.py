"""What keeping freed memory in the C heap does to DP-SGD training on the CPU.

The trainers call ``rdpest.utils.processes.keep_freed_heap`` before they train on the CPU (glibc
keeps a step's freed blocks for the next step instead of returning them to the kernel, which
then maps and zero-fills them again page by page). The setting is process-wide and cannot be
undone, so the two arms run in separate processes: each child trains the throughput benchmark's
stacked models (the audit's digits data and stack size: 64 copies of LR and MLP, 4 of the CNN;
100 full-batch steps, σ = 1, one thread) once after a three-step warm-up, with
``RDPEST_KEEP_HEAP=1`` (the default) or ``0`` (glibc's own adaptive thresholds). The arms
alternate, the first arm of each pair alternating too, since this host's speed drifts.
Reported per child: models/s, minor page faults and system CPU seconds during the timed
training, and the child's peak resident memory.

Usage::

    python benchmarks/bench_heap.py            # 3 pairs per model
    python benchmarks/bench_heap.py --pairs 5

Each child's result is written under benchmarks/results/auditing/heap/cells/ (atomic writes: an
interrupted run resumes; ``--fresh`` starts over), then heap.json and heap.md beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from tqdm.auto import tqdm

from rdpest.utils.io import atomic_write_text

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "auditing" / "heap"
COMMAND = "python benchmarks/bench_heap.py"
# (model, runs per arm of the throughput benchmark's audit): "auto" stacks 64 LR or MLP copies
# and 4 CNN copies there.
MODELS = (("lr", 256), ("mlp", 256), ("cnn", 16))
STEPS = 100

_CHILD = """
import json, resource, sys, time
import torch
torch.set_num_threads(1)
from bench_auditing import _throughput_auditor
from rdpest.auditing.dpsgd.models import make_model
from rdpest.auditing.dpsgd.training import train_dp_sgd_many
from rdpest.utils import processes
model, n_runs, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
run = _throughput_auditor(model, n_runs, 1, "cpu", "auto").score_fn
k = run.runs_per_call
with torch.random.fork_rng(devices=[]):
    torch.manual_seed(0)
    net = make_model(model, int(run.X[0].size), run.n_classes)
train_dp_sgd_many(net, run.X, run.y, seeds=list(range(k)), noise_multiplier=1.0, steps=3)
before = resource.getrusage(resource.RUSAGE_SELF)
start = time.perf_counter()
train_dp_sgd_many(net, run.X, run.y, seeds=list(range(k)), noise_multiplier=1.0, steps=steps)
seconds = time.perf_counter() - start
after = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({
    "kept": processes._heap_kept, "copies": k, "seconds": seconds,
    "models_per_second": k / seconds,
    "minor_faults": after.ru_minflt - before.ru_minflt,
    "system_seconds": after.ru_stime - before.ru_stime,
    "peak_rss_mb": after.ru_maxrss / 1024,
}))
"""


def child(model: str, n_runs: int, keep: bool) -> dict:
    """One training in a fresh process with the heap options on or off."""
    env = {**os.environ, "RDPEST_KEEP_HEAP": "1" if keep else "0", "OMP_NUM_THREADS": "1"}
    paths = [str(HERE), str(HERE.parent), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, model, str(n_runs), str(STEPS)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the {model} child failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["kept"] is not keep:
        raise RuntimeError(f"the child's heap options are {result['kept']}, asked for {keep}")
    return {"model": model, "keep_heap": keep, **result}


def summarise(cells: list[dict]) -> list[dict]:
    """Medians per model and arm, and the ratio of the arms' median rates."""
    rows = []
    for model, _ in MODELS:
        arms = {}
        for keep in (False, True):
            mine = [c for c in cells if c["model"] == model and c["keep_heap"] is keep]
            if not mine:
                continue
            rates = [c["models_per_second"] for c in mine]
            arms[keep] = {
                "model": model,
                "keep_heap": keep,
                "copies": mine[0]["copies"],
                "children": len(mine),
                "models_per_second": statistics.median(rates),
                "models_per_second_range": [min(rates), max(rates)],
                "minor_faults": statistics.median(c["minor_faults"] for c in mine),
                "system_seconds": statistics.median(c["system_seconds"] for c in mine),
                "peak_rss_mb": max(c["peak_rss_mb"] for c in mine),
            }
        if len(arms) == 2:
            # Paired by the order of the children: the two arms of a pair ran back to back.
            by_pair = {
                (c["pair"], c["keep_heap"]): c["models_per_second"]
                for c in cells
                if c["model"] == model
            }
            ratios = [
                by_pair[pair, True] / by_pair[pair, False]
                for pair in sorted({pair for pair, _ in by_pair})
                if (pair, True) in by_pair and (pair, False) in by_pair
            ]
            arms[True]["paired_ratios"] = ratios
            arms[True]["paired_ratio_median"] = statistics.median(ratios)
            arms[True]["pairs_faster"] = sum(r > 1 for r in ratios)
        rows.extend(arms.values())
    return rows


def table(rows: list[dict], pairs: int) -> str:
    lines = [
        "# Keeping freed memory in the C heap (DP-SGD training, CPU)",
        "",
        f"Command: `{COMMAND} --pairs {pairs}` (this machine: {os.cpu_count()} cores; one "
        "thread per child). "
        "Each child trains the throughput benchmark's stacked models once (digits, 100 "
        "full-batch steps, sigma = 1) after a warm-up, in a fresh process with "
        "`RDPEST_KEEP_HEAP=1` (the trainers' default: glibc keeps freed blocks of up to 32 MiB "
        "and 256 MiB of free heap) or `0` (glibc's defaults); the arms alternate. Medians over "
        "the children; faults and system seconds are those of the timed training; peak: the "
        "largest resident set of an arm's children. Last column: the median over pairs of the "
        "kept child's rate over its pair's glibc child's, and in how many pairs the kept child "
        "was faster.",
        "",
        "| model | copies | heap kept | children | models/s | range | minor faults "
        "| system s | peak RSS MB | kept / glibc, paired |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        low, high = r["models_per_second_range"]
        ratio = r.get("paired_ratio_median")
        paired = (
            ""
            if ratio is None
            else f"{ratio:.2f} ({r['pairs_faster']} of {len(r['paired_ratios'])})"
        )
        lines.append(
            f"| {r['model']} | {r['copies']} | {'yes' if r['keep_heap'] else 'no (glibc)'} "
            f"| {r['children']} | {r['models_per_second']:.2f} | {low:.2f}–{high:.2f} "
            f"| {r['minor_faults']:.0f} | {r['system_seconds']:.2f} | {r['peak_rss_mb']:.0f} "
            f"| {paired} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3, help="children per arm and model")
    parser.add_argument("--fresh", action="store_true", help="discard stored children")
    parser.add_argument("--out", type=Path, default=OUT, help=f"results folder (default {OUT})")
    args = parser.parse_args(argv)
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out} is a file, not a folder")
    out = args.out
    cells_dir = out / "cells"
    cells_dir.mkdir(parents=True, exist_ok=True)
    if args.fresh:
        for path in cells_dir.glob("*.json"):
            path.unlink()
    jobs = [
        (model, n_runs, pair, keep)
        for pair in range(args.pairs)
        for model, n_runs in MODELS
        for keep in ((False, True) if pair % 2 == 0 else (True, False))
    ]
    cells = []
    for model, n_runs, pair, keep in tqdm(jobs, desc="heap A/B"):
        path = cells_dir / f"{model}_{'kept' if keep else 'glibc'}_{pair}.json"
        if path.exists():
            cells.append({**json.loads(path.read_text()), "pair": pair})
            continue
        cell = {**child(model, n_runs, keep), "pair": pair}
        atomic_write_text(path, json.dumps(cell, indent=1) + "\n")
        cells.append(cell)
    rows = summarise(cells)
    command = f"{COMMAND} --pairs {args.pairs}"
    atomic_write_text(out / "heap.json", json.dumps({"command": command, "rows": rows}, indent=1))
    atomic_write_text(out / "heap.md", table(rows, args.pairs))
    print(table(rows, args.pairs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
