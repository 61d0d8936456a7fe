"""The benchmark scripts keep the results they are trusted for: no empty tables over real ones, no
cells of one setting reported under another's name, no section dropped by a partial run.

The scripts live in benchmarks/ (not a package); they are imported from there, and run as a user
runs them where the behaviour is the command line's.
"""

from __future__ import annotations

import importlib
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
RESULTS = BENCHMARKS / "results"


@pytest.fixture
def bench(monkeypatch):
    """Import a benchmark script by name, as the scripts import each other (from their folder)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module


def test_an_empty_grid_exits_without_writing_tables(tmp_path):
    """Reviewer's finding: an unknown family or --seeds -1 wrote empty tables (exit status 0)
    over the results."""
    script = BENCHMARKS / "bench_point_inputs.py"
    done = subprocess.run(
        [sys.executable, str(script), "--families", "no_such_family", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and "nothing to run: the grid is empty" in done.stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("script", "flags", "message"),
    [
        ("bench_point_estimates", ["--n", "0"], "--n must be at least 1, got 0"),
        ("bench_critic_inputs", ["--seeds", "-1"], "--seeds must be at least 1"),
        ("bench_point_windows", ["--n-jobs", "0"], "--n-jobs must be a positive number"),
        ("bench_auditing", ["--runs", "0"], "--runs must be at least 1"),
        ("bench_point_estimates", ["--quick", "--seeds", "9"], "--quick chooses --seeds itself"),
        ("bench_point_estimates", ["--quick", "--alphas", "8"], "--quick chooses --alphas itself"),
        (
            "bench_critic_inputs",
            ["--quick", "--alphas", "8", "--families", "laplace_shift"],
            "--quick chooses --families, --alphas itself",
        ),
        ("bench_selection_scores", ["--quick", "--seeds", "5"], "--quick chooses --seeds"),
    ],
)
def test_flags_no_run_can_use_are_usage_errors_before_any_work(
    tmp_path, bench, capsys, script, flags, message
):
    """Reviewer's finding: --n 0 failed as a traceback in the first worker after the output
    folder was set up, --n-jobs 0 in joblib, and --quick silently replaced the --seeds, --alphas
    or --families the user passed (a different grid from the one asked for)."""
    with pytest.raises(SystemExit) as exit_:
        bench(script).main([*flags, "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_cells_of_another_mode_in_the_same_out_are_refused(tmp_path, bench, capsys):
    """Reviewer's finding: `bench_point_estimates.py --cross-fit` into a folder of the plain
    run's cells (same file names) read them back as its own and crashed with KeyError
    'cross_fit'; the plain run would have mixed cross-fit rows into its table."""
    points = bench("bench_point_estimates")
    path = points._cell_path(tmp_path, "gaussian_shift", 2.0, 1.0, 200, 0)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"family": "gaussian_shift", "dv": 1.0, "pform": 1.0}))
    for flags, mode in ((["--cross-fit"], "cross_fit"), ([], None)):
        argv = [*flags, "--families", "gaussian_shift", "--alphas", "2", "--n", "200"]
        if mode is None:  # the plain run over cross-fit cells
            path.write_text(json.dumps({"family": "gaussian_shift", "cross_fit": 1.0}))
            mode = "dv"
        with pytest.raises(SystemExit):
            points.main([*argv, "--seeds", "1", "--n-jobs", "1", "--out", str(tmp_path)])
        assert f"has no '{mode}'" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [path.name]


def test_summaries_at_zero_divergence_are_strict_json(tmp_path, bench):
    """Reviewer's finding: cells at D = 0 divided by the truth, and results.json held Infinity and
    NaN, which strict JSON readers (jq, JavaScript) refuse."""
    points = bench("bench_point_estimates")
    rows = [
        {"family": "f", "alpha": 2.0, "divergence": 0.0, "n": 10, "truth": 0.0, "dv": v}
        for v in (0.0, 0.1)
    ]
    summary = points.summarise(rows, ("dv",))
    points.write_results(tmp_path, summary, "table")
    text = (tmp_path / "results.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text)[0]["dv"] is None


def test_a_cell_fitted_with_another_point_window_is_not_reported_under_this_one(tmp_path, bench):
    """Reviewer's finding: a run with --point-window balanced into a folder of range cells read
    them back and printed their numbers under "balanced"."""
    point_inputs = bench("bench_point_inputs")
    path = point_inputs._cell_path(tmp_path, "gaussian_shift", 2.0, 1.0, 300, 0)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"family": "gaussian_shift", "point_window": "range"}))
    with pytest.raises(SystemExit, match="holds fits with --point-window range, not balanced"):
        point_inputs.one_seed("gaussian_shift", 2.0, 1.0, 300, 0, tmp_path, "balanced")
    assert point_inputs.one_seed("gaussian_shift", 2.0, 1.0, 300, 0, tmp_path, "range")


def test_a_partial_cuda_run_keeps_the_other_sections_results(tmp_path, bench, monkeypatch):
    """Reviewer's finding: `bench_cuda.py --protocol` alone rewrote throughput_cuda.json with no
    throughput row (and --throughput alone dropped the protocol's)."""
    import torch

    cuda = bench("bench_cuda")
    device = f"Some GPU, torch {torch.__version__}"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "Some GPU")
    for name in ("OUT", "JSON"):  # main(--out) sets them; restored after the test
        monkeypatch.setattr(cuda, name, getattr(cuda, name))
    committed = json.loads((cuda.OUT / "throughput_cuda.json").read_text())
    rows, measured = committed["throughput"], committed["protocol"]
    earlier = {"device": device, "throughput": rows, "protocol": {**measured, "seconds": 1.0}}
    (tmp_path / "throughput_cuda.json").write_text(json.dumps(earlier))

    def protocol(result, mnist):
        result["protocol"] = {**measured, "seconds": 2.0}
        cuda._save(result)

    monkeypatch.setattr(cuda, "protocol", protocol)
    assert cuda.main(["--protocol", "--out", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / "throughput_cuda.json").read_text())
    assert saved["throughput"] == rows and saved["protocol"]["seconds"] == 2.0
    # Rows measured on another device are not mixed into this one's record.
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "Another GPU")
    assert cuda.main(["--protocol", "--out", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "throughput_cuda.json").read_text())["throughput"] == []


@pytest.mark.parametrize("folder", ["estimators", "estimators_new_families"])
def test_the_committed_known_divergence_tables_are_their_records(tmp_path, bench, folder):
    """Benchmark reviewer's finding: the committed results.csv were in an older format (85 and
    138 fields 'nan' where the code writes empty ones), and no test compared a committed table
    with its records. Both tables, written again from the committed results.json with the
    command they name, are the committed files byte for byte."""
    harness = bench("harness")
    committed = RESULTS / folder
    records = [
        {k: math.nan if v is None else v for k, v in r.items()}
        for r in json.loads((committed / "results.json").read_text())
    ]
    command = re.match(r"Command: `([^`]+)`", (committed / "results.md").read_text()).group(1)
    harness.write_tables(records, tmp_path, command)
    for name in ("results.md", "results.csv"):
        assert (tmp_path / name).read_text() == (committed / name).read_text(), name


def test_the_known_divergence_tables_name_their_command_and_bad_flags_are_messages(tmp_path, bench):
    """Reviewer's findings: estimators/results.md and scale.md did not say what produced them;
    --repetitions -1 ended in an IndexError, an unknown family and an --out that is a file in
    tracebacks (the latter after the first cell had been computed)."""
    harness = bench("harness")
    table = harness.write_tables([], tmp_path, "python benchmarks/bench_estimators.py --quick")
    assert table.startswith("Command: `python benchmarks/bench_estimators.py --quick`\n\n| ")
    assert (tmp_path / "results.md").read_text() == table
    a_file = tmp_path / "file"
    a_file.write_text("")
    for kwargs, message in [
        ({"repetitions": -1}, "--repetitions must be at least 1, got -1"),
        ({"families": ["nosuch"]}, "unknown families ['nosuch']"),
        ({"out": a_file}, "is a file, not a folder"),
    ]:
        with pytest.raises(SystemExit, match=re.escape(message)):
            harness.main(kwargs.pop("out", tmp_path / "out"), quick=True, **kwargs)
    for name in (
        "estimators/results.md",
        "estimators/scale.md",
        "estimators_new_families/results.md",
    ):
        text = (BENCHMARKS / "results" / name).read_text()
        assert text.startswith("Command: `python benchmarks/bench_estimators.py"), name


def test_the_known_divergence_cells_are_strict_json_and_resume(tmp_path, bench, monkeypatch):
    """Reviewer's finding: `rdpest bench --quick --repetitions 1` wrote cells/*.json holding NaN
    tokens (an oracle bound undefined for one repetition), which strict JSON readers refuse,
    and results.csv held "nan". Cells are strict now (null), read back as NaN on resume."""
    harness = bench("harness")
    cell = ("dv", "gaussian_shift", 2.0, 1.0, 100)
    record = {
        "estimator": "dv", "family": "gaussian_shift", "alpha": 2.0, "n": 100, "truth": 1.0,
        "certified": True, "point_mean": 0.9, "point_sd": 0.0, "point_median_rel_error": 0.1,
        "point_max": 0.9, "bound_mean": 0.3, "miscoverage": 0.0, "oracle_mean": math.nan,
        "seconds_median": 0.1, "repetitions": 1, "floor_p_median_rel_error": math.inf,
        "floor_q_median_rel_error": 0.05, "over_floor": math.nan,
    }  # fmt: skip
    calls = []
    monkeypatch.setattr(harness, "grid", lambda quick, families=None: [cell[1:]])
    monkeypatch.setattr(harness, "run_cell", lambda *args: calls.append(args) or dict(record))
    first = harness.main(tmp_path, estimators=("dv",), repetitions=1)
    strict = {"parse_constant": lambda token: pytest.fail(f"{token} in strict JSON")}
    for path in [*tmp_path.glob("cells/*.json"), tmp_path / "results.json"]:
        json.loads(path.read_text(), **strict)
    assert "nan" not in (tmp_path / "results.csv").read_text().lower()
    assert harness.main(tmp_path, estimators=("dv",), repetitions=1) == first  # resumed
    assert len(calls) == 1


def test_a_skipped_cell_resumes_as_skipped(tmp_path, bench, monkeypatch):
    """Reviewer's finding: a cell the estimator skips is the file `null`; reading cells back as
    strict JSON called .items() on it, so every re-run into the same --out failed ("NoneType
    object has no attribute items"), the committed results' own command included (29 of their
    140 cells are skipped Hoeffding cells)."""
    harness = bench("harness")
    calls = []
    monkeypatch.setattr(
        harness, "grid", lambda quick, families=None: [("gaussian_shift", 2.0, 1.0, 100)]
    )
    monkeypatch.setattr(harness, "run_cell", lambda *args: calls.append(args))  # skipped: None
    first = harness.main(tmp_path, estimators=("hoeffding",), repetitions=1)
    assert (next((tmp_path / "cells").glob("*.json"))).read_text().strip() == "null"
    assert harness.main(tmp_path, estimators=("hoeffding",), repetitions=1) == first
    assert len(calls) == 1  # the skip is remembered, not recomputed
    committed = sorted((BENCHMARKS / "results" / "estimators" / "cells").glob("*.json"))
    skipped = [path for path in committed if path.read_text().strip() == "null"]
    assert skipped and all(harness._read_cell(path) is None for path in skipped)


def test_a_partial_power_run_keeps_the_sections_it_did_not_compute(tmp_path, bench, monkeypatch):
    """Reviewer's finding: `bench_power.py --validate` alone rewrote power.json and power.md
    with the synthetic and DP-SGD sections empty."""
    power = bench("bench_power")
    committed = json.loads((power.OUT / "power.json").read_text())
    (tmp_path / "power.json").write_text(json.dumps(committed))
    monkeypatch.setattr(power, "OUT", tmp_path)
    monkeypatch.setattr(power, "validate", lambda repetitions: committed["validation"][:3])
    assert power.main(["--validate"]) == 0
    saved = json.loads((tmp_path / "power.json").read_text())
    assert saved["validation"] == committed["validation"][:3]
    for section in ("synthetic", "dpsgd", "bernoulli_only"):
        assert committed[section] and saved[section] == committed[section], section
    table = (tmp_path / "power.md").read_text()
    # kept rows name the command that computed them, recorded beside them in power.json
    assert "The synthetic and dpsgd rows are kept from an earlier run, `" in table
    assert "The bernoulli_only rows are kept from an earlier run, `" in table
    assert saved["commands"]["synthetic"] == committed["commands"]["synthetic"]
    assert saved["commands"]["validation"] == "python benchmarks/bench_power.py --validate"
    assert "## Audits with the Bernoulli baseline alone" in (tmp_path / "power.md").read_text()


@pytest.mark.parametrize(
    "script, work, argv",
    [
        (
            "bench_point_estimates",
            "one_seed",
            ["--n-jobs", "1", "--seeds", "1", "--n", "100", "--alphas", "2"],
        ),
        ("bench_estimators", "scale_run", ["--scale"]),
    ],
)
def test_an_out_that_is_a_file_exits_before_any_fit(
    tmp_path, bench, monkeypatch, script, work, argv
):
    """Benchmark reviewer's finding: these scripts found a file given as --out at their first
    write, after the first fit (the 100,000-row fit of --scale), with a traceback."""
    module = bench(script)

    def no_fit(*args, **kwargs):
        raise AssertionError("a fit ran before --out was checked")

    monkeypatch.setattr(module, work, no_fit)
    a_file = tmp_path / "afile"
    a_file.write_text("")
    with pytest.raises(SystemExit, match="is a file, not a folder"):
        module.main([*argv, "--out", str(a_file)])
