"""The command line's conventions: --version, help and defaults, -v, the audit's DP-SGD flags,
compact --json, rdpest evaluate on an audit's files, headered CSVs and uncertified notes."""

from __future__ import annotations

import argparse
import json
import logging
import re
import types
import warnings

import numpy as np
import pytest

import rdpest
from rdpest import cli
from rdpest.cli import build_parser, load_samples, main

AUDIT = ["audit", "--runs", "10", "--steps", "2", "--n-jobs", "1"]


@pytest.fixture(scope="module")
def audit_dir(tmp_path_factory):
    """One tiny audit (10 runs per arm, 2 steps) with non-default DP-SGD flags and estimators."""
    out = tmp_path_factory.mktemp("audit")
    argv = [*AUDIT, "--max-grad-norm", "0.5", "--learning-rate", "0.5"]
    assert main([*argv, "--estimators", "dv,bernoulli", "--out", str(out)]) == 0
    return out


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"rdpest {rdpest.__version__}"


def test_no_command_prints_the_help_with_status_2(capsys):
    assert main([]) == 2
    out = capsys.readouterr().out
    for command in ("audit", "evaluate", "estimate", "bench", "quickstart", "exit status"):
        assert command in out


def _subparsers():
    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return parser, sub.choices


def test_every_flag_has_help_and_shows_its_default():
    parser, commands = _subparsers()
    for name, command in [("rdpest", parser), *commands.items()]:
        helps = " ".join(command.format_help().split()).replace("- ", "-")  # wrapped at hyphens
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            assert action.help, (name, action.option_strings or action.dest)
            default = action.default
            if action.option_strings and default not in (None, False, argparse.SUPPRESS):
                assert f"(default: {default})" in helps or ("default" in action.help), (
                    name,
                    action.option_strings,
                )


def test_audit_passes_its_dpsgd_flags(monkeypatch, tmp_path, capsys):
    seen = {}

    class Recorder:
        def __init__(self, **kwargs):
            seen.update(kwargs)

        def _checked_settings(self):
            seen["checked"] = True

        def run(self):
            raise RuntimeError("recorded")

    monkeypatch.setattr("rdpest.auditing.dpsgd.DPSGDAuditor", Recorder)
    argv = [*AUDIT, "--out", str(tmp_path), "--max-grad-norm", "0.7", "--learning-rate", "0.3"]
    argv += ["--sample-rate", "0.25", "--estimators", "bernoulli, gdp_route"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "recorded" in err
    # The banner said "full-batch steps" whatever --sample-rate was
    assert "Poisson q = 0.25 steps" in err and "full-batch" not in err
    assert seen["checked"]
    assert (seen["max_grad_norm"], seen["learning_rate"], seen["sample_rate"]) == (0.7, 0.3, 0.25)
    assert list(seen["estimators"]) == ["bernoulli", "gdp_route"]
    assert seen["estimators"]["gdp_route"].conversion == "gdp"


def test_unknown_estimator_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*AUDIT, "--out", str(tmp_path), "--estimators", "dv,markov"])
    assert exit_.value.code == 2
    assert "markov unknown" in capsys.readouterr().err


def test_audit_records_its_flags(audit_dir):
    result = json.loads((audit_dir / "result.json").read_text())
    pipeline = result["config"]["pipeline"]
    assert (pipeline["max_grad_norm"], pipeline["learning_rate"]) == (0.5, 0.5)
    assert set(result["estimates"]) == {"dv", "bernoulli"}


def test_verbose_shows_the_librarys_messages(audit_dir, capsys):
    argv = [*AUDIT, "--max-grad-norm", "0.5", "--learning-rate", "0.5", "--out", str(audit_dir)]
    argv += ["--estimators", "dv,bernoulli"]
    assert main(argv) == 0
    assert "already finished" not in capsys.readouterr().err  # silent without -v

    class Collect(logging.Handler):
        def emit(self, record):
            reached_root.append(record.getMessage())

    # Opacus installs a handler on the root logger when imported; -v once printed every line a
    # second time through it. -v prints each message once, and none reaches the root logger.
    reached_root, root_handler = [], Collect()
    logging.getLogger().addHandler(root_handler)
    try:
        assert main(["-v", *argv]) == 0
    finally:
        logging.getLogger().removeHandler(root_handler)
    err = capsys.readouterr().err
    assert err.count("20 of 20 runs already finished, 0 to go") == 1
    assert "rdpest: 20 of 20 runs already finished, 0 to go" in err
    assert not any("already finished" in message for message in reached_root)
    assert logging.getLogger("rdpest").propagate  # restored after the command
    assert main([*argv, "--verbose"]) == 0  # also after the command
    assert "already finished" in capsys.readouterr().err


def test_audit_json_is_compact(audit_dir, capsys):
    argv = [*AUDIT, "--max-grad-norm", "0.5", "--learning-rate", "0.5", "--out", str(audit_dir)]
    assert main([*argv, "--estimators", "dv,bernoulli", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "losses_with_canary" not in report and "losses_without_canary" not in report
    assert report["n_runs"] == 10 and report["verdict"] in (
        "violation",
        "not_refuted",
        "underpowered",
    )
    for key in ("estimates", "power", "config", "claimed_epsilon", "alpha", "beta", "rounds"):
        assert key in report
    assert report["samples"]["with_canary"] == str(audit_dir / "O_prime.npy")
    assert report["result"] == str(audit_dir / "result.json")


def test_evaluate_reproduces_the_audit_from_its_files(audit_dir, capsys):
    result = json.loads((audit_dir / "result.json").read_text())
    files = [str(audit_dir / "O.npy"), str(audit_dir / "O_prime.npy")]
    argv = ["evaluate", *files, "--claim", "1", "--alpha", "2", "--estimators", "dv,bernoulli"]
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["estimates"] == result["estimates"]
    assert report["power"] == result["power"]
    assert report["verdict"] == result["verdict"] and report["n_runs"] == 10
    assert report["samples"] == {"without_canary": files[0], "with_canary": files[1]}
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"verdict: {result['verdict'].upper().replace('_', ' ')}" in out
    assert "10 runs with and 10 without" in out and "runs used: 10 per side" in out


def test_evaluate_errors_name_the_file(tmp_path, capsys):
    good, short, bad, wide = (tmp_path / f"{n}.csv" for n in ("good", "short", "bad", "wide"))
    np.savetxt(good, np.linspace(0, 1, 20))
    np.savetxt(short, np.linspace(0, 1, 12))
    bad.write_text("\n".join(["1.0"] * 19 + ["nan"]))
    np.savetxt(wide, np.ones((20, 2)), delimiter=",")
    cases = [
        (good, short, f"{good} has 20 scores but {short} has 12"),
        (good, bad, f"{bad} holds 1 non-finite value(s) (NaN or inf), the first on line 20"),
        (
            wide,
            good,
            f"{wide} must be a 1-D array of scores (or a single column), got shape (20, 2)",
        ),
        (tmp_path / "missing.npy", good, "no such file"),
        # CLI review: O against O gave a verdict, recorded in a store's analyses
        (good, good, f"{good} and {good} are the same file"),
    ]
    # a file named like evaluate's own argument is named once, not renamed again
    named = tmp_path / "losses_with_canary.csv"
    np.savetxt(named, np.linspace(0, 1, 12))
    cases.append((named, good, f"{named} has 12 scores but {good} has 20"))
    for without, with_, needle in cases:
        assert main(["evaluate", str(without), str(with_), "--claim", "1", "--alpha", "2"]) == 1
        err = capsys.readouterr().err
        assert "rdpest evaluate: error: " in err and needle in err, err
    with pytest.raises(SystemExit) as exit_:  # the claim is required
        main(["evaluate", str(good), str(good), "--alpha", "2"])
    assert exit_.value.code == 2
    # an out-of-range order is a usage error naming the flag (tests/test_cli_errors.py)
    assert main(["evaluate", str(good), str(good), "--claim", "1", "--alpha", "1"]) == 2
    assert "--alpha must be > 1" in capsys.readouterr().err


def test_the_csv_layouts_of_pandas_are_read_as_written_with_a_warning(tmp_path):
    """Reviewer's finding: Series.to_csv(index=False) writes the header 0 for an unnamed
    Series, which reads as a first score of 0, and DataFrame.to_csv() writes the index as a
    first column under an empty header, read as a feature: both silently. The file is still
    read as written (0 may be a score), with a warning naming the likely cause."""
    series = tmp_path / "series.csv"
    series.write_text("0\n1.5\n2.5\n")
    with pytest.warns(UserWarning, match=r"series\.csv: its first line, 0, is read as a score"):
        np.testing.assert_array_equal(load_samples(str(series)), [0.0, 1.5, 2.5])
    frame = tmp_path / "frame.csv"
    frame.write_text(",loss\n0,1.5\n1,2.5\n2,0.5\n")
    with pytest.warns(UserWarning, match=r"frame\.csv: its first column, under an empty header"):
        assert load_samples(str(frame)).shape == (3, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        named = tmp_path / "named.csv"
        named.write_text("id,loss\n0,1.5\n1,2.5\n")  # a named first column: no warning
        assert load_samples(str(named)).shape == (2, 2)
        zeros = tmp_path / "zeros.csv"
        zeros.write_text("0\n")  # one score of 0: nothing to warn of
        np.testing.assert_array_equal(load_samples(str(zeros)), [0.0])


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        ("c.txt", "0.5, -1.25, 2.0\n", "separated by commas, but a .txt file"),
        ("s.csv", "0.5;-1.25;2.0\n0.1;0.2;0.3\n", "separated by semicolons, but a .csv"),
        ("t.csv", "0.5\t-1.25\n2.0\t0.1\n", "separated by spaces or tabs, but a .csv"),
        ("d.csv", "0,5;1,25\n", "separated by semicolons with decimal commas"),
        ("d.txt", "0,5 1,5\n2,5 3,5\n", "spaces or tabs with decimal commas"),
        # Two numbers, or one with a decimal comma: the advice names both readings (renaming
        # the file .csv alone would read a column of decimal commas as two columns).
        ("one.txt", "0,5\n1,25\n", "if they are decimal commas, write decimal points"),
    ],
)
def test_numbers_in_another_layout_are_not_called_a_header(tmp_path, name, text, said):
    """Catches the bug where a .txt of comma-separated numbers (or a .csv of ;-separated ones)
    was refused with "it holds a header line and no numbers": its first line was taken for a
    header because it did not split into numbers at the file kind's separator."""
    file = tmp_path / name
    file.write_text(text)
    with pytest.raises(ValueError, match=said) as caught:
        load_samples(str(file))
    assert "header" not in str(caught.value)


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        # numpy said "at row 2" of the fourth line (rows counted from 0, the header left out)
        ("h.csv", "loss\n1\n2\nx\n", "line 4 is not numbers: 'x'"),
        ("e.csv", "1,2\n3,\n", "line 2 is not numbers: '3,'"),
        # and "from 1 to 2 at row 2; use `usecols` ...", rows counted from 1 in this message
        ("r.csv", "a\n1\n\n2,3\n", "line 4 holds 2 values where the lines above hold 1"),
        ("t.txt", "1 2\n# note\n3 x\n", "line 3 is not numbers: '3 x'"),
        (
            "n.csv",
            "loss\n1\n\n# run 2\nnan\n",
            "non-finite value(s) (NaN or inf), the first on line 5: nan",
        ),
        ("b.csv", "\ufeff", "it holds no numbers (it is empty"),
        ("c.csv", "# only a comment\n", "it holds no numbers (it is empty, or blank and #"),
        # diff review: the one row's NaN was an IndexError (a 1-D row of several values)
        ("one.txt", "1 2 nan\n", "the first on line 1: nan"),
        # float() reads "1_000", numpy does not: numpy's 0-based row came back
        ("u.csv", "1_000\n2\n", "line 1 is not numbers: '1_000'"),
    ],
)
def test_a_bad_text_file_names_the_line_as_an_editor_counts_it(tmp_path, name, text, said):
    """CLI review: numpy's row numbers counted from 0 without the header in one message and
    from 1 in another; a blank or mark-only file was said to hold "a header line"."""
    file = tmp_path / name
    file.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(said)):
        load_samples(str(file))


def test_a_first_score_with_a_comment_is_a_score_not_a_header(tmp_path):
    """Diff review: "1 # first run" on the first line was taken for a header (its fields were
    not all numbers) and the first score was dropped without a word; np.loadtxt drops comments,
    so the header test does too."""
    file = tmp_path / "c.txt"
    file.write_text("1 # first run\n2\n3\n")
    np.testing.assert_array_equal(load_samples(str(file)), [1.0, 2.0, 3.0])
    headed = tmp_path / "h.csv"
    headed.write_text("loss # in nats\n1\n2\n")
    np.testing.assert_array_equal(load_samples(str(headed)), [1.0, 2.0])


def _write_npy_bytes(path):
    with open(path, "wb") as handle:  # np.save(path) would append .npy to the name
        np.save(handle, np.ones(5))


def test_a_csv_column_with_decimal_commas_is_named(tmp_path):
    """CLI review: one column written with decimal commas (1,125730) read as two columns of
    whole numbers (the sign of -0,5 lost) and gave an estimate without a word. Whole-number
    pairs without a leading zero after the comma stay silent."""
    euro = tmp_path / "euro.csv"
    euro.write_text("loss\n1,125730\n0,067895\n-0,5\n")
    with pytest.warns(UserWarning, match="one column written with decimal commas"):
        assert load_samples(str(euro)).shape == (3, 2)
    signed = tmp_path / "signed.csv"
    signed.write_text("1,5\n-0,25\n")
    with pytest.warns(UserWarning, match="decimal commas"):
        load_samples(str(signed))
    counts = tmp_path / "counts.csv"
    counts.write_text("a,b\n1,2\n3,40\n0,7\n")
    padded = tmp_path / "padded.csv"  # diff review: np.savetxt(fmt="%02d") pads both fields
    padded.write_text("15,34\n07,08\n21,05\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_samples(str(counts)).shape == (3, 2)
        assert load_samples(str(padded)).shape == (3, 2)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (_write_npy_bytes, "it is a NumPy .npy file, not an .npz archive"),
        (lambda p: p.write_text("hello\n"), r"it is not an .npz archive \(a zip file"),
    ],
)
def test_a_file_named_npz_that_is_no_archive_is_named(tmp_path, content, said):
    """CLI review: a .npy file named .npz failed with "'numpy.ndarray' object does not support
    the context manager protocol", and other bytes with numpy's advice to load pickles."""
    path = tmp_path / "s.npz"
    content(path)
    with pytest.raises(ValueError, match=said) as caught:
        load_samples(str(path))
    assert "pickle" not in str(caught.value)


def test_headered_csv_skips_only_a_non_numeric_first_line(tmp_path):
    headered = tmp_path / "h.csv"
    headered.write_text("loss\n1.5\n2.5\n")
    np.testing.assert_array_equal(load_samples(str(headered)), [1.5, 2.5])
    plain = tmp_path / "p.csv"
    plain.write_text("1.5\n2.5\n")
    np.testing.assert_array_equal(load_samples(str(plain)), [1.5, 2.5])
    two = tmp_path / "two.csv"
    two.write_text("a,b\n1,2\n3,4\n")
    assert load_samples(str(two)).shape == (2, 2)
    only = tmp_path / "only.csv"
    only.write_text("loss\n")
    with pytest.raises(ValueError, match=r"only\.csv: it holds a header line and no numbers"):
        load_samples(str(only))
    # A spreadsheet's "CSV UTF-8" starts with a byte-order mark: the first number is still a
    # number (it was read as a header and dropped), and a header after the mark is still skipped.
    for text, expected in (("0.5\n1.5\n2.5\n", [0.5, 1.5, 2.5]), ("loss\n1.5\n", [1.5])):
        marked = tmp_path / "marked.csv"
        marked.write_text(text, encoding="utf-8-sig")
        np.testing.assert_array_equal(load_samples(str(marked)), expected)
        marked_txt = tmp_path / "marked.txt"
        marked_txt.write_text(text, encoding="utf-8-sig")
        np.testing.assert_array_equal(load_samples(str(marked_txt)), expected)
    broken = tmp_path / "broken.csv"  # a second non-numeric line is not skipped
    broken.write_text("loss\nx\n1\n")
    with pytest.raises(ValueError, match="cannot read"):
        load_samples(str(broken))


@pytest.mark.parametrize("name", ["markov", "dv"])
def test_uncertified_estimates_carry_a_note(tmp_path, name, capsys):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "p.npy", rng.normal(0.5, 1.0, 200))
    np.save(tmp_path / "q.npy", rng.normal(0.0, 1.0, 200))
    argv = ["estimate", str(tmp_path / "p.npy"), str(tmp_path / "q.npy"), "--estimator", name]
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert ("note" in report) is (name == "markov")
    if name == "markov":
        assert report["lower_bound"] == 0.0 and "not certified" in report["note"]
        assert main(argv) == 0
        assert "not certified" in capsys.readouterr().out


def test_an_uncertified_bound_is_never_reported_as_the_lower_bound(tmp_path, capsys):
    """Catches the bug where `rdpest estimate --estimator markov` printed lower_bound 1.96 (above
    its own point estimate, 1.79) beside a note saying the lower bound is 0: the Q-form with a
    fitted Gaussian log ratio overshoots, and its "bound" is not one."""
    from rdpest import MarkovRenyiBound

    rng = np.random.default_rng(0)
    P, Q = rng.normal(0, 1, 300), rng.normal(1, 1, 300)
    np.save(tmp_path / "p.npy", P)
    np.save(tmp_path / "q.npy", Q)
    argv = ["estimate", str(tmp_path / "p.npy"), str(tmp_path / "q.npy"), "--estimator", "markov"]
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    direct = MarkovRenyiBound(random_state=0).fit(P, Q)
    assert direct.lower_bound_ > direct.divergence_  # the case the bug showed
    assert report["certified"] is False and report["lower_bound"] == 0.0
    assert report["uncertified_lower_bound"] == direct.lower_bound_
    assert "uncertified_lower_bound" in report["note"]


def test_estimate_help_says_how_to_reproduce_an_audit(capsys):
    with pytest.raises(SystemExit):
        main(["estimate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "rdpest evaluate" in text and "shares beta" in text


def test_bench_says_where_it_wrote(monkeypatch, tmp_path, capsys):
    fake = types.SimpleNamespace(main=lambda out, quick, repetitions, command: "| table |")
    monkeypatch.setattr(cli, "_benchmark_harness", lambda: fake)
    assert main(["bench", "--quick", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "| table |\n"  # stdout is the table alone, for piping
    assert f"results: {tmp_path / 'results.md'}" in captured.err


def test_audit_takes_opacus_epsilon_delta_as_the_claim(capsys, tmp_path):
    # Opacus's vocabulary: (epsilon, delta) solved to sigma by Opacus's get_noise_multiplier;
    # the audited claim is that sigma's epsilon_alpha, and Opacus's own accountant gives back
    # at most the asked epsilon (get_noise_multiplier's tolerance is 0.01).
    from opacus.accountants import RDPAccountant

    from rdpest.auditing import DPSGDAuditor

    audit = DPSGDAuditor(target_epsilon=8.0, target_delta=1e-5, steps=100)
    config, claimed = audit._config_and_claim()
    accountant = RDPAccountant()
    accountant.history = [(config.noise_multiplier, 1.0, 100)]
    assert 7.99 <= accountant.get_epsilon(1e-5) <= 8.0
    assert claimed == pytest.approx(2.0 * 100 / (2 * config.noise_multiplier**2), rel=1e-9)
    for bad, match in [
        ({"target_epsilon": 8.0}, "together"),
        ({"target_epsilon": 8.0, "target_delta": 1.5}, "target_delta"),
        ({"target_epsilon": 8.0, "target_delta": 1e-5, "noise_multiplier": 1.0}, "exactly one"),
    ]:
        with pytest.raises(ValueError, match=match):
            DPSGDAuditor(**bad)._config_and_claim()
    argv = ["audit", "--runs", "10", "--steps", "2", "--n-jobs", "1", "--out", str(tmp_path)]
    assert main([*argv, "--target-epsilon", "8", "--target-delta", "1e-5", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    sigma = report["config"]["pipeline"]["noise_multiplier"]
    assert report["claimed_epsilon"] == pytest.approx(2.0 * 2 / (2 * sigma**2), rel=1e-9)
    # One of the pair alone is a usage error (status 2) saying what is missing; it once said
    # "are given together" with status 1.
    assert main([*argv[:-1], str(tmp_path / "b"), "--target-epsilon", "8"]) == 2
    assert "--target-epsilon needs --target-delta" in capsys.readouterr().err
    assert main([*argv[:-1], str(tmp_path / "b"), "--target-delta", "1e-5"]) == 2
    assert "--target-delta needs --target-epsilon" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_an_epsilon_delta_claim_is_recorded_and_named_in_the_summary(tmp_path):
    """DP-SGD review: the user's (ε, δ) = (8, 1e-5) appeared nowhere in the result: the summary
    spoke of ε_2 = 2.459 alone, and result.json recorded neither the target nor that σ was
    solved for it. It is recorded (outside the store's identity: the runs depend on σ alone)."""
    from rdpest.auditing import AuditResult, DPSGDAuditor

    settings = {"steps": 2, "n_runs": 8, "n_jobs": 1, "progress": False, "store": tmp_path}
    result = DPSGDAuditor(target_epsilon=8.0, target_delta=1e-5, **settings).run()
    sigma = result.config["pipeline"]["noise_multiplier"]
    assert result.config["dp_claim"]["epsilon"] == 8.0
    assert result.config["dp_claim"]["delta"] == 1e-5
    assert result.config["dp_claim"]["noise_multiplier"] == sigma
    first = result.summary().splitlines()[0]
    assert (
        f"(from the claimed (ε, δ) = (8, 1e-05): Opacus solved noise multiplier {sigma:.4g}"
        in first
    )
    assert AuditResult.from_json(tmp_path / "result.json").config == result.config
    stored = json.loads((tmp_path / "config.json").read_text())
    assert "dp_claim" not in json.dumps(stored)
    # the same runs audited by their σ resume the store (the claim is the same number)
    again = DPSGDAuditor(noise_multiplier=sigma, **settings).run()
    assert "dp_claim" not in again.config and again.claimed_epsilon == result.claimed_epsilon


def test_a_refused_audit_leaves_no_empty_folder(tmp_path, capsys):
    """Catches the bug where `rdpest audit --runs 3 --out NEW` created NEW and then failed on the
    setting, leaving an empty folder behind. A folder that existed is kept, empty or not."""
    new = tmp_path / "new" / "audit"
    base = ["audit", "--steps", "2", "--n-jobs", "1"]
    assert main([*base, "--runs", "3", "--out", str(new)]) == 2
    assert "--runs=3" in capsys.readouterr().err
    assert not new.exists()
    assert main([*base, "--alpha", "1", "--out", str(new)]) == 2
    assert not (tmp_path / "new").exists()
    existing = tmp_path / "kept"
    existing.mkdir()
    assert main([*base, "--runs", "3", "--out", str(existing)]) == 2
    assert existing.is_dir()


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--alpha", "1"], "--alpha must be > 1"),
        (["--alpha", "1.0000000001"], "--alpha must be at least 1 + 1e-06"),
        (["--beta", "1.5"], "--beta must lie strictly between 0 and 1"),
        (["--sample-rate", "0"], "--sample-rate must lie in (0, 1]"),
        (["--learning-rate", "-1"], "--learning-rate must be > 0"),
        (["--noise-multiplier", "0"], "--noise-multiplier must be > 0"),
        (
            ["--runs", "8", "--max-runs", "4"],
            "--max-runs, where given, must be an integer >= --runs=8",
        ),
        (["--membership-delta", "0"], "--membership-delta must lie strictly between 0 and 1"),
        # CLI review: "must be None or a finite number", and None is nothing to type
        (["--power-target", "0"], "--power-target must be a finite number > 0, got 0.0"),
        # and a claim of 0 was refused without the reason (evaluate --claim 0 is accepted)
        (["--claimed-epsilon", "0"], "a claim of 0 would need infinite noise"),
    ],
)
def test_an_out_of_range_value_is_a_usage_error_before_anything_runs(
    flags, message, tmp_path, capsys, monkeypatch
):
    """Catches the bug where values out of range exited with status 1 (cli.rst: a malformed
    value is a usage error, status 2) after printing the "Auditing ..." banner, and named the
    Python parameter (sample_rate) instead of the flag. Nothing is read or trained first."""
    from rdpest.auditing.dpsgd import data

    def no_reading(*args, **kwargs):
        raise AssertionError("data were read before the settings were checked")

    monkeypatch.setattr(data, "load_data", no_reading)
    out = tmp_path / "audit"
    assert main(["audit", "--steps", "2", "--n-jobs", "1", "--out", str(out), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Auditing" not in err
    assert not out.exists()


def test_paths_that_are_not_files_of_samples_are_named_as_what_they_are(tmp_path):
    """Reviewer's finding: an empty argument was "a directory" (Path("") is the current one),
    and a named pipe or /dev/null was "no such file"."""
    import os

    fifo = tmp_path / "scores.csv"
    os.mkfifo(fifo)
    for path, message in [
        ("", "an empty path was given"),
        (str(fifo), "is not a regular file"),
        (os.devnull, "is not a regular file"),
        (str(tmp_path / "missing.csv"), "no such file"),
    ]:
        with pytest.raises(ValueError, match=message):
            load_samples(path)


@pytest.mark.parametrize("command", ["audit", "bench"])
def test_an_empty_out_is_a_usage_error(command, capsys):
    """Benchmark reviewer's finding: `rdpest bench --out ""` wrote its cells and tables into the
    current directory (an empty path is "."), as `rdpest audit --out ""` would its run store."""
    with pytest.raises(SystemExit) as exit_:
        main([command, "--out", ""])
    assert exit_.value.code == 2
    assert "argument --out: must name a folder, got an empty path" in capsys.readouterr().err
