"""Every failure of the command line ends in one line naming the file or option, never a traceback.

Exit status 1 for an error, 2 for a usage error, 130 for Ctrl-C; the paths an audit writes are
checked before any training. Each case printed a raw traceback (some only after all the training)
before these checks.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

from rdpest.auditing.dpsgd import auditor as dpsgd_auditor
from rdpest.cli import main


@pytest.fixture
def no_training(monkeypatch):
    """Fail the test if an audit starts pretraining or training."""

    def fail(*args, **kwargs):
        raise AssertionError("training started before the paths were checked")

    monkeypatch.setattr(dpsgd_auditor, "pretrain", fail)
    monkeypatch.setattr(dpsgd_auditor.DPSGDAuditor, "run", fail)


def _one_error_line(capsys, command: str, *needles: str) -> str:
    """The error is the last line of stderr, the only one of its kind, with no traceback."""
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith(f"rdpest {command}: error: ")]
    assert errors == err[-1:] and "Traceback" not in "\n".join(err), err
    for needle in needles:
        assert needle in err[-1], err[-1]
    return err[-1]


def _samples(tmp_path):
    good = tmp_path / "q.npy"
    np.save(good, np.random.default_rng(0).normal(size=50))
    return good


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda p: p.write_bytes(b""), "cannot read"),
        (lambda p: np.save(p, np.float64(1.0)), "shape ()"),
        (lambda p: np.save(p, np.zeros(3, dtype=[("a", float), ("b", float)])), "real numbers"),
        (lambda p: np.save(p, np.ones(3, dtype=complex)), "real numbers"),
        (lambda p: np.save(p, np.zeros((0,))), "non-empty"),
        (lambda p: p.mkdir(), "is a directory"),
        # Bug: a NaN reached the estimator, whose message named "X (the sample from P)", not
        # the file; booleans were read as 0/1 samples, where rdpest.auditing.evaluate refuses
        # them.
        (lambda p: np.save(p, np.r_[np.ones(9), np.nan]), "non-finite value(s) (NaN or inf)"),
        (lambda p: np.save(p, np.r_[np.inf, np.ones(9)]), "the first at index 0: inf"),
        (lambda p: np.save(p, np.ones(10, dtype=bool)), "holds a bool array"),
        # Bug: numpy's own message, suggesting allow_pickle=True for a file that is not .npy
        (lambda p: p.write_bytes(b"loss\n0.5\n"), "not a NumPy .npy file"),
        # Bug: "X has 2 samples", naming neither the file nor the side
        (lambda p: np.save(p, np.ones(2)), "(P) has 2 samples"),
    ],
    ids=[
        "zero-bytes",
        "zero-d",
        "structured",
        "complex",
        "empty",
        "directory",
        "nan",
        "inf",
        "bool",
        "not-npy",
        "too-few",
    ],
)
def test_estimate_reports_a_bad_sample_file_in_one_line(tmp_path, capsys, make, needle):
    bad = tmp_path / "p.npy"
    make(bad)
    assert main(["estimate", str(bad), str(_samples(tmp_path))]) == 1
    assert "allow_pickle" not in _one_error_line(capsys, "estimate", str(bad), needle)


def test_a_file_name_is_written_into_the_message_as_it_is(tmp_path, capsys):
    """Diff reviewer's finding: the path was used as a re.sub template (a backslash raised
    re.error) and the second substitution rewrote a standalone "Y" inside the first path."""
    odd = tmp_path / "Y" / "a\\d.npy"
    odd.parent.mkdir()
    np.save(odd, np.ones(2))
    assert main(["estimate", str(odd), str(_samples(tmp_path))]) == 1
    _one_error_line(capsys, "estimate", f"{odd} (P) has 2 samples")


def test_an_empty_text_file_is_one_error_without_numpys_warning(tmp_path, capsys):
    """Bug: numpy's "loadtxt: input contained no data" warning was printed above the error."""
    empty = tmp_path / "p.txt"
    empty.write_text("")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would end the command as a UserWarning
        assert main(["estimate", str(empty), str(_samples(tmp_path))]) == 1
    # a blank file is "empty", not "a header line and no numbers" (CLI review)
    _one_error_line(capsys, "estimate", str(empty), "it holds no numbers (it is empty")


@pytest.mark.parametrize("seed", ["-1", "4294967296"])
@pytest.mark.parametrize("command", ["estimate", "evaluate", "audit", "quickstart"])
def test_a_seed_out_of_range_is_a_usage_error_naming_the_flag(tmp_path, capsys, command, seed):
    """Bug: status 1, naming the Python parameter random_state (after reading the files; above
    2**32 - 1, scikit-learn's message after fitting)."""
    missing = str(tmp_path / "missing.npy")
    argv = {
        "estimate": [missing, missing],
        "evaluate": [missing, missing, "--claim", "1", "--alpha", "2"],
        "audit": ["--out", str(tmp_path / "audit")],
        "quickstart": [],
    }[command]
    with pytest.raises(SystemExit) as exit_info:
        main([command, *argv, "--seed", seed])
    assert exit_info.value.code == 2
    assert f"argument --seed: must lie in [0, 4294967295], got {seed}" in capsys.readouterr().err
    assert not (tmp_path / "audit").exists()


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["estimate", "--alpha", "1"], "--alpha must be > 1"),
        (["estimate", "--beta", "1.5"], "--beta must"),
        (["evaluate", "--claim", "1", "--alpha", "0.5"], "--alpha must be > 1"),
        # an order so close to 1 that no bound at it is trustworthy in double precision
        (["estimate", "--alpha", "1.0000000001"], "--alpha must be at least 1 + 1e-06"),
        (["evaluate", "--claim", "1", "--alpha", "1.0000000001"], "at least 1 + 1e-06"),
        (["evaluate", "--claim", "1", "--alpha", "2", "--beta", "0"], "--beta must"),
        # status 1 after reading both files, naming the Python parameter membership_delta
        (
            ["evaluate", "--claim", "1", "--alpha", "2", "--membership-delta", "0"],
            "--membership-delta must",
        ),
        # status 1, naming the Python parameter claimed_epsilon
        (["evaluate", "--claim", "-1", "--alpha", "2"], "--claim must be >= 0"),
        (["evaluate", "--claim", "inf", "--alpha", "2"], "--claim must be finite"),
        (["evaluate", "--claim", "nan", "--alpha", "2"], "--claim must be finite"),
        # a verdict ("underpowered") from an audit that could never find a violation
        (
            ["evaluate", "--claim", "1", "--alpha", "2", "--estimators", "gdp_route"],
            "none of them is certified",
        ),
        # silently ignored by every estimator but hoeffding; a negative bound reached sklearn
        (
            ["estimate", "--estimator", "bernoulli", "--privacy-loss-bound", "3"],
            "--privacy-loss-bound is used by --estimator hoeffding only",
        ),
        (
            ["estimate", "--estimator", "hoeffding", "--privacy-loss-bound", "-1"],
            "--privacy-loss-bound must be > 0",
        ),
    ],
)
def test_estimate_and_evaluate_refuse_alpha_and_beta_out_of_range_as_usage_errors(
    tmp_path, capsys, argv, needle
):
    """Bug: `rdpest estimate --alpha 1` exited with status 1 after reading both files, naming
    DVRenyiEstimator's parameter `alpha`; `rdpest audit` says `--alpha` with status 2."""
    good = str(_samples(tmp_path))
    missing = str(tmp_path / "missing.npy")  # never read: the flags are checked first
    assert main([*argv, missing, good]) == 2
    _one_error_line(capsys, argv[0], needle)


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--alpha", "1"], "--alpha must be > 1"),
        (["--alpha", "1.0000000001"], "--alpha must be at least 1 + 1e-06"),
        (["--alpha", "inf"], "--alpha must be finite"),
        (["--divergence", "-1"], "--divergence must be >= 0"),
        (["--divergence", "nan"], "--divergence must be finite"),
        (["--n", "4"], "--n must lie in [5, 1e+08] samples per side, got 4"),
        (["--n", "100000000000"], "--n must lie in [5, 1e+08]"),
    ],
)
def test_quickstart_refuses_values_out_of_range_as_usage_errors(capsys, flags, needle):
    """Reviewer's finding: `rdpest quickstart --alpha 1` (or --divergence -1, --n 4) exited with
    status 1 and the library's words (alpha, n_samples, "X has 4 samples"), not the flags'."""
    assert main(["quickstart", *flags]) == 2
    _one_error_line(capsys, "quickstart", needle)


def _audit_argv(out) -> list[str]:
    return ["audit", "--runs", "12", "--steps", "2", "--n-jobs", "1", "--out", str(out)]


@pytest.mark.parametrize(
    "layout",
    [
        "out-is-file",
        "out-under-file",
        "result-is-dir",
        "samples-are-dir",
        "unwritable",
        "users-own-files",
    ],
)
def test_audit_checks_its_paths_before_any_training(tmp_path, capsys, no_training, layout):
    out = tmp_path / "out"
    if layout == "out-is-file":
        out.write_text("x")
        needle = "is not a directory"
    elif layout == "out-under-file":
        (tmp_path / "file").write_text("x")
        out = tmp_path / "file" / "out"
        needle = "is not a directory"
    elif layout == "result-is-dir":
        (out / "result.json").mkdir(parents=True)
        needle = "result.json exists and is not a file"
    elif layout == "samples-are-dir":
        (out / "O.npy").mkdir(parents=True)
        needle = "O.npy exists and is not a file"
    elif layout == "users-own-files":  # CLI review: an audit overwrote them without a word
        out.mkdir()
        np.save(out / "O.npy", np.arange(3.0))
        (out / "result.json").write_text('{"mine": true}')
        needle = "holds result.json, O.npy but no audit's run store"
    else:  # /proc refuses new directories even to root
        out = "/proc/rdpest-cannot-write-here"
        needle = "not a writable directory"
    assert main(_audit_argv(out)) == 1
    _one_error_line(capsys, "audit", needle)
    if layout == "users-own-files":
        assert np.array_equal(np.load(out / "O.npy"), np.arange(3.0))
        assert (out / "result.json").read_text() == '{"mine": true}'


@pytest.mark.parametrize("value", ["0", "-1", "x"])
def test_bench_repetitions_must_be_a_positive_integer(capsys, value):
    """Bug: --repetitions 0 silently ran the default and -1 crashed."""
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--repetitions", value])
    assert exit_info.value.code == 2
    assert "--repetitions" in capsys.readouterr().err


def test_ctrl_c_exits_130_with_one_line(tmp_path, capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(dpsgd_auditor.DPSGDAuditor, "run", interrupted)
    assert main(_audit_argv(tmp_path / "out")) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == "rdpest audit: interrupted"


def test_unexpected_errors_are_one_line_unless_traceback_is_asked(tmp_path, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("something inside broke")

    monkeypatch.setattr(dpsgd_auditor.DPSGDAuditor, "run", broken)
    assert main(_audit_argv(tmp_path / "out")) == 1
    _one_error_line(capsys, "audit", "RuntimeError: something inside broke")
    with pytest.raises(RuntimeError):
        main(["--traceback", *_audit_argv(tmp_path / "out")])


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux's PR_SET_PDEATHSIG")
def test_a_killed_audit_leaves_no_workers_behind(tmp_path):
    """Bug: after SIGKILL of `rdpest audit --n-jobs 2`, idle loky workers lived on for over 90 s
    (blocked on a pipe). Workers now end with their parent; then the audit resumes, keeping the
    scores of the runs finished before the kill (a resume that retrained or reordered them, or
    lost them, would change the samples the verdict is drawn from)."""
    import psutil

    out = tmp_path / "out"
    store = out / "runs.jsonl"
    argv = [sys.executable, "-m", "rdpest", "audit", "--runs", "400", "--n-jobs", "2"]
    audit = subprocess.Popen(
        [*argv, "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        parent = psutil.Process(audit.pid)
        deadline = time.monotonic() + 240
        workers: list = []
        while time.monotonic() < deadline and audit.poll() is None:
            workers = [
                p for p in parent.children(recursive=True) if "loky" in " ".join(p.cmdline())
            ]
            if len(workers) >= 2 and store.exists() and store.stat().st_size > 0:
                break
            time.sleep(0.5)
        assert len(workers) >= 2, "the audit never started its workers"
        os.kill(audit.pid, signal.SIGKILL)
        audit.wait()
        before = _finished_runs(store)
        _, alive = psutil.wait_procs(workers, timeout=30)
        assert not alive, f"workers outlived the killed audit: {[p.pid for p in alive]}"
    finally:
        if audit.poll() is None:
            audit.kill()
    resumed = subprocess.run(
        [*argv, "--out", str(out)], capture_output=True, text=True, timeout=600, check=False
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    result = json.loads((out / "result.json").read_text())
    samples = {0: result["losses_without_canary"], 1: result["losses_with_canary"]}
    assert len(samples[0]) == len(samples[1]) == 400
    assert before, "no run had finished before the kill"
    for (arm, index), score in before.items():
        assert samples[arm][index] == score, (arm, index)


def _finished_runs(store) -> dict[tuple[int, int], float]:
    """(arm, index) -> score of the complete lines of a run store (a killed writer may leave a
    partial last line)."""
    runs = {}
    for line in store.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        runs[record["arm"], record["index"]] = record["score"]
    return runs


def test_a_bench_out_that_cannot_be_a_folder_is_this_commands_error_line(tmp_path, capsys):
    """Reviewer's finding: `rdpest bench --out FILE` printed the harness's bare message, and an
    --out that cannot be created failed after the first cell, naming no flag."""
    a_file = tmp_path / "afile"
    a_file.write_text("")
    assert main(["bench", "--quick", "--out", str(a_file)]) == 1
    _one_error_line(capsys, "bench", f"--out {a_file} is a file, not a folder")
    below_a_file = a_file / "results"
    assert main(["bench", "--quick", "--out", str(below_a_file)]) == 1
    _one_error_line(capsys, "bench", f"--out {below_a_file} cannot be created")
