"""CUDA benchmarks: DP-SGD models per second on a GPU, and the paper's MNIST protocol's cost.

1. Throughput (``--throughput``): the audit's training (``DPSGDRun.score_many`` of a
   ``DPSGDAuditor``'s runs: 100 full-batch steps on the digits, σ = 1, the with-canary arm,
   canary losses included) for logistic regression, the one-hidden-layer MLP and the digits CNN:
   8 models one at a time (plain Opacus), one stack of 16 (the CNN) or 64 up to 16384 copies,
   and one stack of ``stack_runs="auto"`` for a 500 + 500-run audit (the stack a default audit
   gets). A larger stack is skipped when the last stacked row's rate says it would take longer
   than ``--case-limit`` seconds, or once ``--time-limit`` has passed. Timed after a warm-up of the
   CUDA context and kernels; each row's models are timed again at one step, which splits the
   time into milliseconds per step and seconds per stack that do not depend on the steps.
2. Protocol (``--protocol``): the paper's MNIST set-up (Kim, Varshney & Alabi 2026: 30,000
   training examples, full batch, 100 steps, C = 1, its MNIST CNN, worst-case pretrained start).
   One stack of ``stack_runs="auto"`` copies of a 500 + 500-run audit is timed, and the seconds
   per model give the GPU-hours of 500 + 500 runs, beside the paper's reported ~100 A100-hours
   per MNIST audit; the pretraining (once per audit) is timed too. With ``--mnist DIR`` the
   user's MNIST IDX files are read; without it, random images and labels are written in the
   IDX format first: the time of a step does not depend on the pixels' values.

Results: benchmarks/results/auditing/throughput_cuda.{json,md} (``--out DIR`` for another folder);
the JSON is written after every row, a section not run keeps its rows from an earlier run on the
same device, and ``--render`` rewrites the Markdown from it (with the JSON's optional
``findings``, lines of what a profile of the run showed). ``--code REV`` records the commit
measured.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from harness import output_folder

from rdpest.auditing import DPSGDAuditor
from rdpest.auditing.dpsgd.run import DPSGDRun
from rdpest.utils.io import atomic_write_text

OUT = Path(__file__).resolve().parent / "results" / "auditing"
JSON = OUT / "throughput_cuda.json"
STEPS = 100
# Stack sizes tried per model, smallest first: (stack_runs, models timed); a stacked row times
# one stack.
STACKS = {
    "lr": ((1, 8), (64, 64), (256, 256), (1024, 1024), (4096, 4096), (16384, 16384)),
    "mlp": ((1, 8), (64, 64), (256, 256), (1024, 1024), (4096, 4096), (16384, 16384)),
    "cnn": ((1, 8), (16, 16), (64, 64), (256, 256), (1024, 1024), (2048, 2048)),
}
# The paper's MNIST protocol (Kim, Varshney & Alabi 2026, Section 5): 500 runs per arm, ~100
# A100-hours per audit as they report it.
PAPER_RUNS = 500
PAPER_A100_HOURS = 100.0


def _auditor(model: str, n_runs: int, stack_runs, **kwargs):
    return DPSGDAuditor(
        noise_multiplier=1.0,
        steps=STEPS,
        n_runs=n_runs,
        model=model,
        device="cuda",
        progress=False,
        random_state=1,
        stack_runs=stack_runs,
        **kwargs,
    ).auditor()


def _timed(fn, *args) -> float:
    import torch

    torch.cuda.synchronize()
    start = time.perf_counter()
    fn(*args)
    torch.cuda.synchronize()
    return time.perf_counter() - start


def _one_step(run: DPSGDRun) -> DPSGDRun:
    """``run`` at one step: its data, canary, pretrained start, stack size and device."""
    return DPSGDRun(
        run.model,
        run.X,
        run.y,
        (run.canary_x, run.canary_y),
        run.initial_state,
        config=dataclasses.replace(run.config, steps=1),
        device=run.device,
        input_shape=run.input_shape,
        n_classes=run.n_classes,
        stack_runs=run.runs_per_call,
    )


def _save(result: dict) -> None:
    atomic_write_text(JSON, json.dumps(result, indent=2))
    write_markdown(result)


def throughput(result: dict, case_limit: float, deadline: float) -> None:
    """Rows of models per second, stack sizes growing while the last stacked row's rate says the
    next stack takes at most ``case_limit`` seconds and the run is within ``deadline``
    (perf_counter)."""
    import torch

    cases = [(m, s, n) for m, stacks in STACKS.items() for s, n in stacks]
    cases += [(m, "auto", PAPER_RUNS) for m in STACKS]
    rate = {}
    for model, stack_runs, n_models in cases:
        if time.perf_counter() > deadline:
            print(f"skip {model} stack {stack_runs}: past the deadline", flush=True)
            continue
        if stack_runs != "auto" and model in rate and n_models / rate[model] > case_limit:
            print(f"skip {model} stack {stack_runs}: would take over {case_limit} s", flush=True)
            continue
        run = _auditor(model, max(PAPER_RUNS, n_models), stack_runs).score_fn
        if stack_runs == "auto":
            n_models = run.runs_per_call
        run.score_many(False, [1, 2])  # warm-up: CUDA context and kernels
        seeds = list(range(100, 100 + n_models))
        # The same stacks at one step: what a stack costs whatever its steps (building it,
        # Opacus's wrapping, the canary losses) against what each step adds.
        one_step = _one_step(run)
        try:
            seconds = _timed(run.score_many, True, seeds)
            one_step.score_many(False, [1, 2])
            seconds_one_step = _timed(one_step.score_many, True, seeds)
        except torch.cuda.OutOfMemoryError:
            print(f"skip {model} stack {stack_runs}: out of GPU memory", flush=True)
            torch.cuda.empty_cache()
            continue
        stacks = math.ceil(n_models / run.runs_per_call)
        per_step = (seconds - seconds_one_step) / (STEPS - 1) / stacks
        row = {
            "model": model,
            "stack_runs": stack_runs,
            "runs_per_call": run.runs_per_call,
            "steps": STEPS,
            "models": n_models,
            "seconds": seconds,
            "models_per_second": n_models / seconds,
            "step_ms": 1e3 * per_step,
            "fixed_seconds_per_stack": seconds_one_step / stacks - per_step,
        }
        if stack_runs not in ("auto", 1):
            # Only a stack predicts a larger one: one-at-a-time rates (2 MLP models/s on an
            # H200) would say a stack of 64 takes 30 s, where it took 0.4 s.
            rate[model] = row["models_per_second"]
        print(row, flush=True)
        result["throughput"].append(row)
        _save(result)


def _write_fake_mnist(folder: Path, n: int = 60_000, seed: int = 0) -> None:
    """Random images and labels in MNIST's training-set IDX files (gzipped, as distributed)."""
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n, dtype=np.uint8)
    with gzip.open(folder / "train-images-idx3-ubyte.gz", "wb") as f:
        f.write(bytes([0, 0, 8, 3]) + np.array([n, 28, 28], ">u4").tobytes() + images.tobytes())
    with gzip.open(folder / "train-labels-idx1-ubyte.gz", "wb") as f:
        f.write(bytes([0, 0, 8, 1]) + np.array([n], ">u4").tobytes() + labels.tobytes())


def protocol(result: dict, mnist: str | None) -> None:
    """Seconds per model of the paper's MNIST protocol, from one stack of the audit's size."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = mnist
        if folder is None:
            _write_fake_mnist(Path(tmp))
            folder = tmp
        built = {}
        pretrain_s = _timed(
            lambda: built.update(
                audit=_auditor("mnist_cnn", PAPER_RUNS, "auto", data=f"mnist:{folder}")
            )
        )
    run = built["audit"].score_fn
    k = run.runs_per_call
    run.score_many(False, [1, 2])  # warm-up
    seconds = _timed(run.score_many, True, list(range(10, 10 + k)))
    per_model = seconds / k
    row = {
        "data": "MNIST files" if mnist else "random images in MNIST's IDX format",
        "training_rows": len(run.y),
        "model": "mnist_cnn",
        "steps": STEPS,
        "stack": k,
        "stack_seconds": seconds,
        "seconds_per_model": per_model,
        "pretraining_and_setup_seconds": pretrain_s,
        "gpu_hours_500_500": (2 * PAPER_RUNS * per_model + pretrain_s) / 3600,
        "paper_a100_hours": PAPER_A100_HOURS,
    }
    print(row, flush=True)
    result["protocol"] = row
    _save(result)


def _cell(row: dict, key: str, digits: int) -> str:
    return f"{row[key]:.{digits}f}" if key in row else "–"


def write_markdown(result: dict) -> None:
    # Results written before the limits were recorded ran with the defaults' case limit.
    case_limit = result.get("case_limit", 30.0)
    time_limit = result.get("time_limit")
    flags = "" if time_limit is None else f" --time-limit {time_limit:g}"
    flags += f" --case-limit {case_limit:g}" if case_limit != 30.0 else ""
    lines = [
        f"# DP-SGD training on CUDA ({result['device']})",
        "",
        *([f"Code measured: {result['code']}", ""] if result.get("code") else []),
        f"Command: `python benchmarks/bench_cuda.py{flags}` (on a machine with a CUDA GPU). "
        "The audit's "
        "training, digits, 100 full-batch steps, sigma = 1: a stacked row times one stack of "
        "the with-canary arm, a stack_runs = 1 row 8 models one at a time (plain Opacus); "
        "canary losses included, one timing per row after a warm-up. ms per step and fixed s "
        "per stack: from the same stacks timed again at one step (what a stack costs whatever "
        "its steps: building it, Opacus's wrapping, the canary losses). `auto` is the stack a "
        "500 + 500-run audit gets by default. Stack sizes missing from a model's rows were "
        f"skipped because the last stacked rate said they would take over {case_limit:g} s"
        + ("." if time_limit is None else f", or because {time_limit:g} s had passed."),
        "",
        "| model | stack_runs (models per stack) | models | seconds | models/s "
        "| ms per step | fixed s per stack |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['model']} | {r['stack_runs']} ({r['runs_per_call']}) | {r['models']} "
        f"| {r['seconds']:.2f} | {r['models_per_second']:.1f} | {_cell(r, 'step_ms', 2)} "
        f"| {_cell(r, 'fixed_seconds_per_stack', 3)} |"
        for r in result["throughput"]
    ]
    p = result.get("protocol")
    if p:
        lines += [
            "",
            "## The paper's MNIST protocol",
            "",
            f"{p['training_rows']} training rows ({p['data']}), full batch, {p['steps']} steps, "
            f"C = 1, the paper's MNIST CNN (`mnist_cnn`), pretrained start. One stack of "
            f"{p['stack']} models (the default `auto` stack of a 500 + 500-run audit) took "
            f"{p['stack_seconds']:.1f} s: {p['seconds_per_model']:.2f} s per model. Loading, "
            f"pretraining and set-up took {p['pretraining_and_setup_seconds']:.1f} s once. "
            f"500 + 500 runs: **{p['gpu_hours_500_500']:.3f} GPU-hours** on this GPU, against "
            f"the ~{p['paper_a100_hours']:.0f} A100-hours the paper reports per MNIST audit.",
        ]
    if result.get("findings"):
        lines += ["", "## Where the time went", "", *result["findings"]]
    atomic_write_text(OUT / "throughput_cuda.md", "\n".join(lines) + "\n")


def main(argv=None) -> int:
    global OUT, JSON
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--throughput", action="store_true")
    parser.add_argument("--protocol", action="store_true")
    parser.add_argument("--mnist", help="folder with MNIST's IDX files (else random ones)")
    parser.add_argument("--case-limit", type=float, default=30.0)
    parser.add_argument(
        "--time-limit", type=float, default=240.0, help="seconds for the throughput rows"
    )
    parser.add_argument("--render", action="store_true", help="rewrite the Markdown only")
    parser.add_argument("--code", help="the commit measured, recorded with the results")
    parser.add_argument("--out", type=Path, help=f"results folder (default {OUT})")
    args = parser.parse_args(argv)
    if args.out is not None:
        output_folder(args.out)
        OUT, JSON = args.out, args.out / JSON.name
    if args.render:
        if not JSON.is_file():
            raise SystemExit(f"--render needs {JSON}, written by a --throughput or --protocol run")
        write_markdown(json.loads(JSON.read_text()))
        return 0
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("bench_cuda.py needs a CUDA GPU")
    if not (args.throughput or args.protocol):
        args.throughput = args.protocol = True
    device = f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}"
    result = {"device": device, "code": args.code, "throughput": [], "protocol": None}
    # A section not run keeps its results from an earlier run on the same device (running
    # --protocol alone once dropped every throughput row, and --throughput the protocol's).
    earlier = json.loads(JSON.read_text()) if JSON.is_file() else {}
    if earlier.get("device") == device:
        for section, run in (("throughput", args.throughput), ("protocol", args.protocol)):
            if not run and earlier.get(section):
                result[section] = earlier[section]
    result.update(case_limit=args.case_limit, time_limit=args.time_limit)
    if args.protocol:
        protocol(result, args.mnist)
    if args.throughput:
        throughput(result, args.case_limit, time.perf_counter() + args.time_limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
