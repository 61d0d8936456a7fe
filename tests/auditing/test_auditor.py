"""Tests of the generic Auditor: verdicts, determinism over n_jobs and backends, resume, errors."""

import json
import os

import numpy as np
import pytest

from rdpest import DVRenyiEstimator
from rdpest.auditing import Auditor, AuditResult, GaussianMechanismScore, RunStore, run_seed

DV_ONLY = {"dv": DVRenyiEstimator(alpha=2.0, random_state=0, max_epochs=60)}


def _auditor(mech, **kwargs):
    options = {"alpha": 2.0, "n_runs": 200, "estimators": DV_ONLY, "progress": False}
    options.update(kwargs)
    return Auditor(mech, mech.claimed_epsilon(options["alpha"]), **options)


def test_audit_catches_under_noised_mechanism_and_clears_honest_one():
    # Claimed: sigma = 1, so epsilon_2 = 1. The buggy one adds a quarter of that noise: true
    # epsilon_2 = 16, far above what 200 + 200 runs can certify (~log n), so the bound clears 1.
    buggy = GaussianMechanismScore(sensitivity=1.0, noise_std=1.0, noise_scale_bug=0.25)
    result = _auditor(buggy).run()
    assert result.verdict == "violation"
    assert result.estimates["dv"]["lower_bound"] > result.claimed_epsilon == 1.0
    honest = GaussianMechanismScore(sensitivity=1.0, noise_std=1.0)
    result = _auditor(honest).run()
    assert result.verdict == "not_refuted"
    assert result.estimates["dv"]["lower_bound"] <= 1.0


def test_results_do_not_depend_on_n_jobs():
    mech = GaussianMechanismScore(noise_std=2.0)
    a = _auditor(mech, n_runs=30).collect()
    b = _auditor(mech, n_runs=30, n_jobs=2).collect()
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    # The seeds are those of run_seed: run 3 with the canary.
    assert a[1][3] == mech(True, run_seed(0, 1, 3))


class _FailsAtRun:
    """Fails on the canary arm's run ``index`` (its seed), scores as the mechanism otherwise."""

    def __init__(self, index):
        self.mech, self.seed = GaussianMechanismScore(noise_std=2.0), run_seed(0, 1, index)

    def __call__(self, include_canary, seed):
        if include_canary and seed == self.seed:
            raise RuntimeError("run failed")
        return self.mech(include_canary, seed)

    def claimed_epsilon(self, alpha):
        return self.mech.claimed_epsilon(alpha)


def test_joblibs_multiprocessing_backend_runs_an_audit_and_keeps_finished_rounds(tmp_path):
    """Reviewer's finding: under joblib.parallel_config(backend="multiprocessing") every audit
    failed with joblib's "Backend ... does not support return_as=generator_unordered". That
    backend cannot hand results back as they finish, so the runs go a round of n_jobs tasks at
    a time: the same scores, and a failure keeps the rounds finished before it."""
    from joblib import parallel_config

    mech = GaussianMechanismScore(noise_std=2.0)
    expected = _auditor(mech, n_runs=12).collect()
    with parallel_config(backend="multiprocessing"):
        got = _auditor(mech, n_runs=12, n_jobs=2).collect()
        np.testing.assert_array_equal(expected[0], got[0])
        np.testing.assert_array_equal(expected[1], got[1])
        store = tmp_path / "audit"
        # Tasks alternate arms (run i without, run i with): the canary arm's run 5 is the 12th
        # task, in the sixth round of two; the five rounds before it and its partner are stored,
        # and no round starts after it.
        with pytest.raises(RuntimeError, match="run failed"):
            _auditor(_FailsAtRun(5), n_runs=12, n_jobs=2, store=store).collect()
    assert len((store / "runs.jsonl").read_text().splitlines()) == 11


def test_dask_local_cluster_backend_gives_identical_results(dask_backend):
    mech = GaussianMechanismScore(noise_std=2.0)
    expected = _auditor(mech, n_runs=20).collect()
    with dask_backend():
        got = _auditor(mech, n_runs=20, n_jobs=2).collect()
    np.testing.assert_array_equal(expected[0], got[0])
    np.testing.assert_array_equal(expected[1], got[1])


class CountingScore:
    """Counts calls in-process (n_jobs=1 runs sequentially here) and can fail after k calls."""

    def __init__(self, fail_after=None):
        self.mech = GaussianMechanismScore(noise_std=2.0)
        self.calls = 0
        self.fail_after = fail_after

    def __call__(self, include_canary, seed):
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise KeyboardInterrupt("simulated interruption")
        self.calls += 1
        return self.mech(include_canary, seed)

    def describe(self):
        return self.mech.describe()

    def claimed_epsilon(self, alpha):
        return self.mech.claimed_epsilon(alpha)


def test_interrupted_audit_resumes_without_losing_or_redoing_runs(tmp_path):
    reference = _auditor(GaussianMechanismScore(noise_std=2.0), n_runs=15).collect()
    flaky = CountingScore(fail_after=11)
    with pytest.raises(KeyboardInterrupt):
        _auditor(flaky, n_runs=15, store=tmp_path).collect()
    assert len(RunStore(tmp_path, {"pipeline": flaky.describe(), "random_state": 0}).load()) == 11
    resumed = CountingScore()
    got = _auditor(resumed, n_runs=15, store=tmp_path).collect()
    assert resumed.calls == 30 - 11  # only the missing runs are trained
    np.testing.assert_array_equal(got[0], reference[0])
    np.testing.assert_array_equal(got[1], reference[1])


def test_truncated_last_record_is_redone(tmp_path):
    mech = CountingScore()
    _auditor(mech, n_runs=10, store=tmp_path).collect()
    runs = tmp_path / "runs.jsonl"
    text = runs.read_text()
    runs.write_text(text[: len(text) - 7])  # a crash in the middle of the last append
    again = CountingScore()
    got = _auditor(again, n_runs=10, store=tmp_path).collect()
    assert again.calls == 1
    lines = runs.read_text().splitlines()
    assert len(lines) == 20 and all(json.loads(line) for line in lines)
    reference = _auditor(GaussianMechanismScore(noise_std=2.0), n_runs=10).collect()
    np.testing.assert_array_equal(got[1], reference[1])


def test_store_of_another_configuration_is_refused(tmp_path):
    _auditor(GaussianMechanismScore(noise_std=2.0), n_runs=10, store=tmp_path).collect()
    with pytest.raises(ValueError, match=r"different audit configuration.*pipeline"):
        _auditor(GaussianMechanismScore(noise_std=3.0), n_runs=10, store=tmp_path).collect()
    with pytest.raises(ValueError, match="random_state"):
        _auditor(
            GaussianMechanismScore(noise_std=2.0), n_runs=10, store=tmp_path, random_state=1
        ).collect()


def test_membership_delta_is_the_readouts_and_a_store_at_another_delta_is_not_reused(tmp_path):
    """The runs do not depend on δ (a readout's parameter), so a store's runs are reused at another
    δ, but the readouts (and result.json) are recomputed at the new δ, never the stored ones."""
    mech = CountingScore()
    first = _auditor(mech, n_runs=40, store=tmp_path).run()
    assert first.membership["delta"] == 1e-5
    again = CountingScore()
    second = _auditor(again, n_runs=40, store=tmp_path, membership_delta=0.01).run()
    assert again.calls == 0  # every run came from the store
    assert second.membership["delta"] == 0.01
    assert AuditResult.from_json(tmp_path / "result.json").membership == second.membership
    np.testing.assert_array_equal(second.losses_with_canary, first.losses_with_canary)
    assert second.estimates == first.estimates and second.verdict == first.verdict


def test_dpsgd_auditor_passes_membership_delta_on_and_checks_it_before_pretraining():
    from rdpest.auditing import DPSGDAuditor

    audit = DPSGDAuditor(claimed_epsilon=1.0, steps=2, n_runs=10, membership_delta=0.02)
    assert audit._audit_settings(1.0)["membership_delta"] == 0.02
    bad = DPSGDAuditor(claimed_epsilon=1.0, steps=2, n_runs=10, membership_delta=1.0)
    with pytest.raises(ValueError, match="membership_delta"):
        bad.build()  # before any data is split or a model pretrained


def test_result_round_trip_summary_and_plot(tmp_path):
    mech = GaussianMechanismScore(noise_std=1.0, noise_scale_bug=0.5)
    result = _auditor(mech, n_runs=60, store=tmp_path).run()
    assert (tmp_path / "result.json").exists()
    again = AuditResult.from_json(tmp_path / "result.json")
    np.testing.assert_array_equal(again.losses_with_canary, result.losses_with_canary)
    assert again.estimates == result.estimates and again.verdict == result.verdict
    assert AuditResult.from_json(result.to_json()).claimed_epsilon == result.claimed_epsilon
    text = result.summary()
    assert "verdict" in text and "dv" in text
    result.plot(tmp_path / "audit.png")
    assert (tmp_path / "audit.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="not an rdpest audit result"):
        AuditResult.from_json('{"format": "other"}')


def _refuse_constant(token):
    raise ValueError(f"non-standard JSON token {token}")


def test_a_result_with_an_unbounded_ceiling_is_standard_json(tmp_path):
    """Auditor review: a Markov-only audit (no ceiling: max_certifiable = inf) wrote
    ``"max_certifiable": Infinity`` into result.json, which strict parsers refuse, while the
    docs promise plain JSON readable by any tool. Non-finite numbers are written as strings and
    read back as numbers."""
    from rdpest import MarkovRenyiBound

    mech = GaussianMechanismScore(noise_std=1.0)
    markov = {"markov": MarkovRenyiBound(alpha=2.0, log_ratio=lambda x: x - 0.5)}
    result = _auditor(mech, n_runs=30, store=tmp_path, estimators=markov).run()
    assert result.power["max_certifiable"] == float("inf")
    text = (tmp_path / "result.json").read_text()
    payload = json.loads(text, parse_constant=_refuse_constant)
    assert payload["power"]["max_certifiable"] == "Infinity"
    again = AuditResult.from_json(tmp_path / "result.json")
    assert again.power == result.power and again.estimates == result.estimates
    # Diff review: a user's own text "NaN" or "Infinity" in its config came back as a float
    tagged = _auditor(mech, n_runs=30, config={"dataset": "NaN", "tag": ["Infinity"]}).run()
    assert AuditResult.from_json(tagged.to_json()).config == tagged.config
    # and a result edited by hand with a malformed (ε, δ) claim still has a summary
    for broken in ({"delta": 1e-5}, {"epsilon": "8", "delta": 1e-5, "noise_multiplier": 2.0}):
        payload = json.loads(tagged.to_json())
        payload["config"]["dp_claim"] = broken
        assert "from the claimed" not in AuditResult.from_json(json.dumps(payload)).summary()


def test_beta_is_shared_among_certified_estimators():
    estimators = {
        "a": DVRenyiEstimator(alpha=2.0, random_state=0, max_epochs=20),
        "b": DVRenyiEstimator(alpha=2.0, random_state=1, max_epochs=20),
    }
    result = _auditor(GaussianMechanismScore(), n_runs=40, estimators=estimators).run()
    assert {e["beta"] for e in result.estimates.values()} == {0.025}


def _nan_score(include_canary, seed):
    return float("nan")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_runs": 3}, "n_runs=3 is too small.*needs at least"),
        ({"n_runs": 2.5}, "n_runs"),
        ({"alpha": 1.0}, "alpha"),
        ({"beta": 1.0}, "beta"),
        ({"n_jobs": 0}, "n_jobs"),
        ({"membership_delta": 0.0}, "membership_delta"),
        ({"membership_delta": 1.5}, "membership_delta"),
        ({"estimators": {}}, "estimators"),
        ({"estimators": {"x": object()}}, "not an rdpest estimator"),
        ({"estimators": {"dv": DVRenyiEstimator(alpha=3.0)}}, "alpha=3.0"),
    ],
)
def test_bad_configuration_fails_before_any_run(kwargs, match):
    mech = CountingScore()
    options = {"alpha": 2.0, "n_runs": 50, "estimators": DV_ONLY, "progress": False, **kwargs}
    with pytest.raises(ValueError, match=match):
        Auditor(mech, 1.0, **options).run()
    assert mech.calls == 0


def test_bad_claim_score_fn_and_scores():
    with pytest.raises(ValueError, match="claimed_epsilon"):
        Auditor(CountingScore(), -1.0, estimators=DV_ONLY).run()
    with pytest.raises(ValueError, match="callable"):
        Auditor("not a function", 1.0, estimators=DV_ONLY).run()
    with pytest.raises(ValueError, match="returned nan"):
        Auditor(_nan_score, 1.0, n_runs=10, estimators=DV_ONLY, progress=False).run()


def _huge_integer_score(include_canary, seed):
    return 10**400  # a Python int beyond the float range


class _ShortGroups:
    runs_per_call = 4

    def __call__(self, include_canary, seed):
        return 0.0

    def score_many(self, include_canary, seeds):
        return [0.0] * (len(seeds) - 1)


def test_a_score_beyond_the_float_range_and_a_short_group_are_named_value_errors():
    """Reviewer's findings: a score of 10**400 raised a bare OverflowError naming no run, and a
    group returning too few scores was "returned 3 scores for 4 seeds", naming no arm."""
    with pytest.raises(ValueError, match=r"returned inf \(include_canary=False, seed="):
        Auditor(_huge_integer_score, 1.0, n_runs=10, estimators=DV_ONLY, progress=False).run()
    with pytest.raises(ValueError, match=r"3 scores for 4 seeds \(include_canary=False, seeds \["):
        Auditor(_ShortGroups(), 1.0, n_runs=16, estimators=DV_ONLY, progress=False).run()


class _ScoresBySeed:
    """score_many returning its scores in a container that is no sequence in the seeds' order."""

    runs_per_call = 4

    def __init__(self, container):
        self.container = container

    def __call__(self, include_canary, seed):
        return 0.0

    def score_many(self, include_canary, seeds):
        return self.container({seed: float(include_canary) for seed in seeds})


@pytest.mark.parametrize(
    "container",
    [dict, set, frozenset, lambda scores: np.float64(0.0), lambda scores: np.array(0.0)],
)
def test_a_group_of_scores_that_is_no_sequence_is_refused(container):
    """Reviewer's finding: score_many returning {seed: score} was taken as its keys, so the seeds
    (3.96e9, 9.0e8, ...) were the scores of the audit, which gave a verdict on them; a 0-d array
    raised a raw TypeError."""
    with pytest.raises(ValueError, match="must return a sequence of scores"):
        Auditor(_ScoresBySeed(container), 1.0, n_runs=16, estimators=DV_ONLY, progress=False).run()


class _HoldsALock:
    def __init__(self):
        import threading

        self.lock = threading.Lock()

    def __call__(self, include_canary, seed):
        return GaussianMechanismScore(noise_std=1.0)(include_canary, seed)


def test_a_score_function_that_cannot_be_pickled_is_named_as_the_cause():
    """Reviewer's finding: with n_jobs=2, a score function holding a lock failed with joblib's
    "Could not pickle the task to send it to the workers", naming neither score_fn nor n_jobs."""
    import pickle

    from joblib import parallel_config

    auditor = Auditor(_HoldsALock(), 1.0, n_runs=10, n_jobs=2, estimators=DV_ONLY, progress=False)
    with pytest.raises(pickle.PicklingError) as raised:
        auditor.collect()
    assert "the score function is sent to worker processes, so it must be picklable" in (
        "".join(raised.value.__notes__)
    )
    # joblib's multiprocessing backend raises pickle's own TypeError (diff reviewer's finding)
    with parallel_config(backend="multiprocessing"), pytest.raises(TypeError) as raised:
        auditor.collect()
    assert "so it must be picklable" in "".join(raised.value.__notes__)


def test_loky_workers_of_an_audit_end_with_it_unless_configured_otherwise():
    """Reviewer's finding: `rdpest audit`'s loky workers were asked to end with the audit's
    process (Linux's PR_SET_PDEATHSIG, rdpest.utils.processes.end_with_parent), an Auditor run
    from Python did not ask (its idle workers outlived a SIGKILL). The Auditor's Parallel call now
    passes the same initializer under joblib's default loky backend, and nothing under other
    backends or where the user's parallel_config names its own initializer."""
    from joblib import parallel_config

    from rdpest.auditing.runs import worker_options
    from rdpest.utils.processes import end_with_parent

    def theirs():
        pass

    assert worker_options() == {"initializer": end_with_parent, "initargs": (os.getpid(),)}
    with parallel_config(backend="loky", initializer=theirs):
        assert worker_options() == {}
    with parallel_config(backend="threading"):
        assert worker_options() == {}


def test_the_auditor_hands_the_worker_options_to_joblib(monkeypatch):
    """The Auditor's own Parallel call receives worker_options() (a test of worker_options alone
    would pass with the call not using it)."""
    import joblib

    from rdpest.utils.processes import end_with_parent

    seen: dict = {}
    real = joblib.Parallel

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(joblib, "Parallel", spy)  # rdpest.auditing.runs imports it when it runs
    mech = GaussianMechanismScore(noise_std=1.0)
    Auditor(mech, 1.0, alpha=2.0, n_runs=20, n_jobs=1, progress=False).collect()
    assert seen.get("initializer") is end_with_parent and seen["initargs"] == (os.getpid(),)


@pytest.mark.parametrize("seed", [-1, 2**32])
def test_a_seed_the_estimators_cannot_take_is_refused_before_training(seed):
    """Diff reviewer's finding: random_state = 2**32 trained every run, then failed in
    scikit-learn's check of the estimators' random_state."""

    def no_training(include_canary, seed):
        raise AssertionError("a run was trained before the settings were checked")

    with pytest.raises(ValueError, match=r"random_state must lie in \[0, 2\*\*32 - 1\]"):
        Auditor(no_training, 1.0, alpha=2.0, n_runs=20, random_state=seed).run()


class _FailsOnTheCanaryArm:
    def __call__(self, include_canary, seed):
        if include_canary:
            raise ZeroDivisionError("the user's training failed")
        return 0.0


def test_an_error_of_the_score_function_names_the_run_that_raised_it():
    # It came back bare: nothing said which arm or seed would reproduce it.
    auditor = Auditor(_FailsOnTheCanaryArm(), 1.0, alpha=2.0, n_runs=8, progress=False)
    with pytest.raises(ZeroDivisionError, match="the user's training failed") as raised:
        auditor.run()
    seed = run_seed(auditor.random_state, 1, 0)
    assert f"raised by score_fn(include_canary=True, seed(s) {seed})" in raised.value.__notes__


def _constant_score(include_canary, seed):
    return 0.693  # a score function that ignores its run and the canary


def test_scores_that_are_all_one_number_are_underpowered_and_say_why(tmp_path):
    """Reviewer's finding: a score function returning one number for every run was "not
    refuted", with "this audit detects ε_2 >= 2.8 with 80% probability", though no number of
    runs could show a divergence through it. The verdict is "underpowered" now, with a sentence
    naming the score function; one differing score restores the usual verdict."""
    from rdpest import BernoulliTPRFPRBaseline

    fast = {"bernoulli": BernoulliTPRFPRBaseline(alpha=2.0, random_state=0)}
    auditor = Auditor(_constant_score, 1.0, alpha=2.0, n_runs=200, estimators=fast, progress=False)
    result = auditor.run()
    assert result.verdict == "underpowered" and result.power["constant"] is True
    assert "all 400 scores are the same number" in result.summary()
    assert "check that it returns the canary's loss" in result.summary()
    again = AuditResult.from_json(result.to_json())
    assert again.verdict == "underpowered" and again.summary() == result.summary()
    # Given scores: the same rule, and one differing score is an ordinary audit.
    same = np.full(200, 0.5)
    assert auditor.evaluate(same, same, fast).verdict == "underpowered"
    one_off = same.copy()
    one_off[0] = 0.6
    varied = auditor.evaluate(same, one_off, fast)
    assert varied.verdict == "not_refuted" and varied.power["constant"] is False
