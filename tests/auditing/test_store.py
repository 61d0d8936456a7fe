"""A run store never gives a wrong verdict: one pipeline, one writer, checked records, safe files.

Each test names the defect it catches; each failed on the store as it was before these checks
(a store that trusted its callable's name, its records and its first writer).
"""

from __future__ import annotations

import abc
import contextlib
import functools
import json
import logging
import os
import re
import stat
import threading
import time
import traceback
import types
import warnings

import numpy as np
import pytest

from rdpest import BernoulliTPRFPRBaseline, DVRenyiEstimator
from rdpest.auditing import (
    Auditor,
    AuditResult,
    GaussianMechanismScore,
    RunStore,
    evaluate,
    run_seed,
)
from rdpest.auditing.identity import score_fn_identity

N_RUNS = 60


def _mechanism_score(include_canary, seed, noise_scale_bug=1.0):
    """A module-level score function: the Gaussian mechanism with an optional noise bug."""
    return GaussianMechanismScore(noise_std=1.0, noise_scale_bug=noise_scale_bug)(
        include_canary, seed
    )


class _Trainer:
    """A callable instance without describe(): its identity is its class and attributes."""

    def __init__(self, noise_scale_bug=1.0):
        self.noise_scale_bug = noise_scale_bug

    def __call__(self, include_canary, seed):
        return _mechanism_score(include_canary, seed, self.noise_scale_bug)


class _SlowMechanism(GaussianMechanismScore):
    """The Gaussian mechanism taking 2 ms a run, so that two audits started together overlap
    (600 runs take over a second; taking the store's lock takes microseconds)."""

    def __call__(self, include_canary, seed):
        time.sleep(0.002)
        return super().__call__(include_canary, seed)


def _audit(score_fn, store=None, **kwargs):
    """An audit of the claim of the honest mechanism, with the fast threshold baseline alone."""
    claim = GaussianMechanismScore(noise_std=1.0).claimed_epsilon(2.0)
    fast = {"bernoulli": BernoulliTPRFPRBaseline(alpha=2.0, direction="max", random_state=0)}
    options = {
        "alpha": 2.0,
        "n_runs": N_RUNS,
        "progress": False,
        "store": store,
        "estimators": fast,
        **kwargs,
    }
    return Auditor(score_fn, claim, **options)


def _same(a: AuditResult, b: AuditResult) -> None:
    np.testing.assert_array_equal(a.losses_without_canary, b.losses_without_canary)
    np.testing.assert_array_equal(a.losses_with_canary, b.losses_with_canary)
    assert a.estimates == b.estimates and a.verdict == b.verdict


# ------------------------------------------------------------------------------------------------
# 1. one pipeline per store
def test_lambdas_and_closures_are_refused_for_a_store(tmp_path):
    """Bug: every lambda fingerprinted as '<lambda>', so two pipelines shared a store."""
    with pytest.raises(ValueError, match=r"lambda.*describe\(\).*config"):
        _audit(lambda c, s: _mechanism_score(c, s), store=tmp_path).run()

    def closure(include_canary, seed):
        return _mechanism_score(include_canary, seed)

    with pytest.raises(ValueError, match="inside another"):
        _audit(closure, store=tmp_path / "b").run()
    # Without a store nothing needs an identity: lambdas are fine.
    assert _audit(lambda c, s: _mechanism_score(c, s), n_runs=10).run().verdict


@pytest.mark.parametrize(
    ("honest", "buggy"),
    [
        (
            functools.partial(_mechanism_score, noise_scale_bug=1.0),
            functools.partial(_mechanism_score, noise_scale_bug=0.25),
        ),
        (_Trainer(1.0), _Trainer(0.25)),
    ],
    ids=["partial", "instance"],
)
def test_a_store_is_never_reused_by_another_pipeline(tmp_path, honest, buggy):
    """Bug: partials all fingerprinted as 'functools.partial' and instances as their class, so a
    buggy pipeline resumed an honest one's store and was reported consistent."""
    _audit(honest, store=tmp_path).run()
    with pytest.raises(ValueError, match="different audit configuration"):
        _audit(buggy, store=tmp_path).run()
    assert _audit(buggy, store=tmp_path / "fresh").run().verdict == "violation"
    # The same pipeline (an equal, separately built object) resumes.
    if isinstance(honest, functools.partial):
        again = functools.partial(honest.func, *honest.args, **honest.keywords)
    else:
        again = _Trainer(1.0)
    _same(_audit(again, store=tmp_path).run(), _audit(honest).run())


def _with_defaults(fn, defaults):
    """``fn`` as it would be after editing its default arguments: same module, name and code."""
    edited = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, defaults, fn.__closure__)
    edited.__qualname__, edited.__module__ = fn.__qualname__, fn.__module__
    return edited


class _Pipeline(_Trainer):
    """A callable instance (identified by its class and attributes) with a second entry point."""

    def score(self, include_canary, seed, noise_scale_bug=1.0):
        return _mechanism_score(include_canary, seed, noise_scale_bug)


def test_a_function_whose_default_arguments_changed_is_another_pipeline(tmp_path):
    """Bug: a function was identified by its name and bytecode only; a default argument lives
    outside the bytecode, so editing `noise_scale_bug=1.0` to 0.25 in the score function's file
    resumed the honest runs' store with the buggy pipeline (a reviewer's audit mixed runs of a
    shift of 1 with runs of a shift of 5). Bound methods had no code digest at all."""
    honest = _with_defaults(_mechanism_score, (1.0,))
    buggy = _with_defaults(_mechanism_score, (0.25,))
    assert honest.__code__ is buggy.__code__
    _audit(honest, store=tmp_path / "f").run()
    with pytest.raises(ValueError, match="different audit configuration"):
        _audit(buggy, store=tmp_path / "f").run()
    _same(
        _audit(_with_defaults(_mechanism_score, (1.0,)), store=tmp_path / "f").run(),
        _audit(honest).run(),
    )
    method = _Pipeline().score
    _audit(method, store=tmp_path / "m").run()
    original = _Pipeline.score.__defaults__
    try:
        _Pipeline.score.__defaults__ = (0.25,)
        with pytest.raises(ValueError, match="different audit configuration"):
            _audit(_Pipeline().score, store=tmp_path / "m").run()
    finally:
        _Pipeline.score.__defaults__ = original
    _same(_audit(_Pipeline().score, store=tmp_path / "m").run(), _audit(method).run())


class _Delegating:
    """A callable instance whose ``__call__`` delegates to a helper that reads a class constant
    (the natural shape of a user's trainer)."""

    NOISE_SCALE_BUG = 1.0

    def _score(self, include_canary, seed):
        return _mechanism_score(include_canary, seed, self.NOISE_SCALE_BUG)

    def __call__(self, include_canary, seed):
        return self._score(include_canary, seed)


def _leaky_score(self, include_canary, seed):
    return _mechanism_score(include_canary, seed, 0.25)


def test_an_edited_helper_or_class_constant_of_a_callable_instance_is_another_pipeline(tmp_path):
    """Bug: a callable instance was identified by its ``__call__``'s code and its attributes
    only, so editing the helper that ``__call__`` calls, or a class constant, resumed the old
    store: a reviewer's store written by an honest trainer was resumed by a leaking one and the
    audit said "not_refuted" where a fresh store said "violation"."""
    _audit(_Delegating(), store=tmp_path).run()
    honest = _audit(_Delegating()).run()
    original = _Delegating.__dict__["_score"]
    try:
        _Delegating.NOISE_SCALE_BUG = 0.25
        with pytest.raises(ValueError, match="different audit configuration"):
            _audit(_Delegating(), store=tmp_path).run()
        _Delegating.NOISE_SCALE_BUG = 1.0
        _Delegating._score = _leaky_score
        with pytest.raises(ValueError, match="different audit configuration"):
            _audit(_Delegating(), store=tmp_path).run()
        assert _audit(_Delegating(), store=tmp_path / "fresh").run().verdict == "violation"
    finally:
        _Delegating.NOISE_SCALE_BUG = 1.0
        _Delegating._score = original
    _same(_audit(_Delegating(), store=tmp_path).run(), honest)


class _TupleAndProperty:
    """A callable instance reading a tuple class constant and a property."""

    NOISE = (1.0,)
    LOG = logging.getLogger("rdpest.test")  # no stable identity: left out of the identity

    @property
    def shift(self):
        return 1.0

    def __call__(self, include_canary, seed):
        return _mechanism_score(include_canary, seed, self.NOISE[0] * self.shift)


def test_an_edited_tuple_constant_or_property_is_another_pipeline(tmp_path):
    """Bug: a class's identity kept only its functions and its scalar constants, so editing
    ``NOISE = (1.0,)`` to ``(0.05,)``, or a property's ``return 1.0``, resumed the old store: a
    reviewer's honest store, resumed by the edited class, said "violation" on the mixed runs."""
    _audit(_TupleAndProperty(), store=tmp_path).run()
    before = score_fn_identity(_TupleAndProperty())
    original = _TupleAndProperty.__dict__["shift"]
    try:
        _TupleAndProperty.NOISE = (0.25,)
        assert score_fn_identity(_TupleAndProperty()) != before
        with pytest.raises(ValueError, match="different audit configuration"):
            _audit(_TupleAndProperty(), store=tmp_path).run()
        _TupleAndProperty.NOISE = (1.0,)
        _TupleAndProperty.shift = property(_leaky_shift)
        assert score_fn_identity(_TupleAndProperty()) != before
        with pytest.raises(ValueError, match="different audit configuration"):
            _audit(_TupleAndProperty(), store=tmp_path).run()
        _TupleAndProperty.shift = original
        assert score_fn_identity(_TupleAndProperty()) == before  # (the logger left out)
        _TupleAndProperty.LOG = "a string now"  # a readable constant in its place is recorded
        assert score_fn_identity(_TupleAndProperty()) != before
    finally:
        _TupleAndProperty.NOISE = (1.0,)
        _TupleAndProperty.shift = original
        _TupleAndProperty.LOG = logging.getLogger("rdpest.test")
    assert score_fn_identity(_TupleAndProperty()) == before
    _audit(_TupleAndProperty(), store=tmp_path).run()  # the unedited class resumes its store


def _leaky_shift(self):
    return 0.25


class _SelfReferring(abc.ABC):  # noqa: B024 (an ABC for its _abc_impl)
    """A class whose constant is an instance of itself, and a long table: the diff reviewer's
    RecursionError (every audit of it failed, with or without a store) and a 1.5 MB config.json.
    Deriving from abc.ABC adds ``_abc_impl``, which no identity records."""

    TABLE = list(range(20_000))

    def __call__(self, include_canary, seed):
        return _mechanism_score(include_canary, seed)


class _DescribeNeedsArguments:
    """A callable whose describe() takes an argument: a class constant of this kind is left
    out, as before constants other than scalars were covered (not a TypeError)."""

    def describe(self, what):
        return {"what": what}

    def __call__(self):
        return 0.0


_SelfReferring.HELPER = _DescribeNeedsArguments()


_SelfReferring.DEFAULT = _SelfReferring()


def test_self_reference_long_constants_and_abc_bookkeeping_in_an_identity():
    identity = score_fn_identity(_SelfReferring())
    members = dict(identity["instance"]["code"][0][1])
    assert "_abc_impl" not in members  # as before tuples and properties were covered
    assert "HELPER" not in members
    assert set(members["TABLE"]) == {"sha256"}  # a digest, not 20,000 numbers
    assert members["DEFAULT"]["instance"] == {"class": identity["instance"]["class"]}
    original = _SelfReferring.TABLE
    try:
        _SelfReferring.TABLE = [*original[:-1], -1]
        assert score_fn_identity(_SelfReferring()) != identity  # the digest sees the edit
    finally:
        _SelfReferring.TABLE = original
    assert score_fn_identity(_SelfReferring()) == identity


def test_config_adds_to_the_score_function_identity(tmp_path):
    """Bug: ``Auditor(config=...)`` replaced the score function's identity in the store's
    fingerprint, and the guides advise passing it for the globals a function reads; a changed
    score function with the same config then resumed the old store (a reviewer's noisy-sum audit
    with its clipping removed resumed the clipped runs and said "not_refuted")."""
    config = {"noise_multiplier": 1.0}
    honest = functools.partial(_mechanism_score, noise_scale_bug=1.0)
    buggy = functools.partial(_mechanism_score, noise_scale_bug=0.25)
    _audit(honest, store=tmp_path / "a", config=config).run()
    with pytest.raises(ValueError, match="different audit configuration"):
        _audit(buggy, store=tmp_path / "a", config=config).run()
    with pytest.raises(ValueError, match="different audit configuration"):
        _audit(honest, store=tmp_path / "a", config={"noise_multiplier": 2.0}).run()
    _same(_audit(honest, store=tmp_path / "a", config=config).run(), _audit(honest).run())
    # A score function without a readable identity is named by its config alone.
    _audit(lambda c, s: _mechanism_score(c, s), store=tmp_path / "b", config=config).run()
    stored = json.loads((tmp_path / "b" / "config.json").read_text())
    assert stored["pipeline"] == config


def test_non_json_config_and_store_that_is_a_file_are_clear_errors(tmp_path):
    """Bug: a non-JSON config and a store path naming a file gave raw TypeError/OSError."""
    mech = GaussianMechanismScore()
    with pytest.raises(ValueError, match="JSON-serialisable"):
        _audit(mech, store=tmp_path / "s", config={"when": object()}).run()
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(ValueError, match="not a directory"):
        _audit(mech, store=afile).run()


class _GroupScores:
    """Runs trained in groups of 4 whose scores depend on the group (as a stack's shared noise
    does): the group size shifts every score a little."""

    runs_per_call = 4

    def __call__(self, include_canary, seed):
        return self.score_many(include_canary, [seed])[0]

    def score_many(self, include_canary, seeds):
        return [_mechanism_score(include_canary, s) + 0.01 * len(seeds) for s in seeds]


def test_raising_n_runs_gives_the_runs_of_an_audit_that_had_them_from_the_start(tmp_path):
    """Reviewer's finding: with n_runs = 22 and groups of 4, runs 20 and 21 trained as a group of
    2; raising n_runs to 24 kept them, so the grown store's scores (and its DV and Bernoulli
    bounds) differed from a fresh 24-run audit's. The last group is now trained whole: its
    extra runs are stored, not used."""
    grown = _audit(_GroupScores(), store=tmp_path / "grown", n_runs=22).run()
    assert len(grown.losses_with_canary) == 22
    stored = [json.loads(x) for x in (tmp_path / "grown" / "runs.jsonl").read_text().splitlines()]
    assert sorted((r["arm"], r["index"]) for r in stored) == [
        (arm, i) for arm in (0, 1) for i in range(24)
    ]
    fresh22 = _audit(_GroupScores(), n_runs=22).run()
    _same(grown, fresh22)
    fresh24 = _audit(_GroupScores(), n_runs=24).run()
    with pytest.warns(UserWarning, match="already analysed"):  # another schedule: a retest
        _same(_audit(_GroupScores(), store=tmp_path / "grown", n_runs=24).run(), fresh24)
    # every run trained in a group of 4, past n_runs or not (arm 1: with the canary)
    expected = [_mechanism_score(True, run_seed(0, 1, i)) + 0.04 for i in range(24)]
    np.testing.assert_allclose(fresh24.losses_with_canary, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(grown.losses_with_canary, expected[:22], rtol=0, atol=1e-12)
    # Diff reviewer's finding: a score function's own groups of 64 made a 20-run audit train 64
    # runs per arm. The last group is trained whole only where that costs at most a quarter
    # more runs (B <= n_runs / 4).
    wide = _GroupScores()
    wide.runs_per_call = 64
    _audit(wide, store=tmp_path / "wide", n_runs=20).run()
    assert len((tmp_path / "wide" / "runs.jsonl").read_text().splitlines()) == 40


# ------------------------------------------------------------------------------------------------
# 2. one writer per store
@pytest.mark.parametrize("same_config", [False, True], ids=["different", "same"])
def test_two_audits_started_together_on_one_store(tmp_path, same_config):
    """Bug: the configuration check was check-then-write with no lock: two audits started
    together both passed it and interleaved their runs in one runs.jsonl (800 lines from two
    pipelines under one config.json; 584 duplicate lines for one pipeline twice)."""
    honest = _SlowMechanism(noise_std=1.0)
    other = honest if same_config else _SlowMechanism(noise_std=1.0, noise_scale_bug=0.25)
    barrier = threading.Barrier(2)
    outcomes: dict[str, object] = {}

    def start(name, score_fn):
        barrier.wait()
        try:
            outcomes[name] = _audit(score_fn, store=tmp_path, n_runs=300).run()
        except ValueError as exc:
            outcomes[name] = exc

    threads = [
        threading.Thread(target=start, args=("a", honest)),
        threading.Thread(target=start, args=("b", other)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results = {k: v for k, v in outcomes.items() if isinstance(v, AuditResult)}
    refused = {k: v for k, v in outcomes.items() if isinstance(v, ValueError)}
    assert len(results) == 1 and len(refused) == 1, outcomes
    assert "in use by another audit" in str(next(iter(refused.values())))
    winner = next(iter(results))
    fresh = _audit(honest if winner == "a" else other, store=tmp_path / "fresh", n_runs=300).run()
    _same(results[winner], fresh)
    lines = (tmp_path / "runs.jsonl").read_text().splitlines()
    assert len(lines) == 600  # one pipeline's runs, each once


def test_the_lock_is_released_after_an_audit_and_after_an_error(tmp_path):
    mech = GaussianMechanismScore()
    _audit(mech, store=tmp_path, n_runs=10).run()
    with pytest.warns(UserWarning, match="already analysed"):  # 12 runs: another test
        _audit(mech, store=tmp_path, n_runs=12).run()  # resumes: the first released its lock

    def broken(include_canary, seed):
        raise RuntimeError("training failed")

    with pytest.raises(RuntimeError):
        _audit(broken, store=tmp_path / "b", n_runs=10, config={"name": "broken"}).run()
    with RunStore(tmp_path / "b", _audit(broken, config={"name": "broken"})._fingerprint()):
        pass  # the failed audit left no lock behind


class _Flaky(GaussianMechanismScore):
    """The Gaussian mechanism, leaving a file named after each run it finishes in ``log``, and
    failing at one seed while ``log/fail`` exists (state outside its identity, so the fixed
    pipeline resumes the same store)."""

    def __init__(self, log, failing_seed):
        super().__init__(noise_std=1.0)
        self.log, self.failing_seed = str(log), failing_seed

    def __call__(self, include_canary, seed):
        time.sleep(0.001)
        if seed == self.failing_seed and os.path.exists(os.path.join(self.log, "fail")):
            raise RuntimeError(f"training failed at seed {seed}")
        score = super().__call__(include_canary, seed)
        open(os.path.join(self.log, f"{int(include_canary)}-{seed}"), "w").close()
        return score


@pytest.mark.parametrize("backend", ["1", "2", "dask"])
def test_a_failing_run_loses_no_finished_run(tmp_path, backend, dask_backend):
    """Bug: with n_jobs=2, a run that raised took with it the runs finished in its joblib batch
    and in the batches other workers were running (12 of 30 in a reviewer's probe): they had
    trained but were never stored, and a re-run trained them again."""
    log = tmp_path / "log"
    log.mkdir()
    (log / "fail").touch()
    failing = run_seed(0, 1, 37)
    score_fn = _Flaky(log, failing)
    n_jobs = 1 if backend == "1" else 2
    context = dask_backend() if backend == "dask" else contextlib.nullcontext()
    with context, pytest.raises(RuntimeError, match=f"training failed at seed {failing}") as raised:
        _audit(score_fn, store=tmp_path / "s", n_jobs=n_jobs).run()
    # the worker's traceback travels with its error (as Dask sends it, or as a note)
    assert "in __call__" in "".join(traceback.format_exception(raised.value))
    trained = {name for name in os.listdir(log) if name != "fail"}
    lines = (tmp_path / "s" / "runs.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert {f"{r['arm']}-{r['seed']}" for r in records} == trained  # every trained run stored
    assert len(records) >= 2 * 37 + 1  # the runs dispatched before the failing one
    if n_jobs == 1:  # and nothing after it is started
        assert len(records) == 2 * 37 + 1
    (log / "fail").unlink()
    resumed = _audit(score_fn, store=tmp_path / "s", n_jobs=n_jobs).run()
    assert len(os.listdir(log)) == 2 * N_RUNS  # the re-run trained only the runs not stored
    _same(resumed, _audit(GaussianMechanismScore(noise_std=1.0), store=None).run())


class _TrainingFailed(Exception):
    """An error that pickles but does not unpickle: its __init__ takes other arguments than it
    passes on (a common pattern)."""

    def __init__(self, what, seed):
        super().__init__(f"{what} failed at seed {seed}")


class _UnsendableError(GaussianMechanismScore):
    """Fails at run 5 of arm 0 with an error that holds a lock (which cannot be pickled) or
    one that cannot be unpickled."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def __call__(self, include_canary, seed):
        if not include_canary and seed == run_seed(0, 0, 5):
            if self.kind == "lock":
                raise ValueError("training failed", threading.Lock())
            raise _TrainingFailed("training", seed)
        return super().__call__(include_canary, seed)


@pytest.mark.parametrize("kind", ["lock", "constructor"])
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_an_error_a_worker_cannot_send_back_is_still_named(tmp_path, kind, n_jobs):
    """Without the guard, a worker could not return these errors: joblib reported a pickling
    failure of the worker's result, or "BrokenProcessPool: A result has failed to
    un-serialize" (losing the runs trained beside it), instead of the training's error. In
    the auditing process itself the error comes back unchanged."""
    expected = ValueError if kind == "lock" else _TrainingFailed
    if n_jobs != 1:
        expected = RuntimeError
    with pytest.raises(expected, match="training failed") as raised:
        _audit(_UnsendableError(kind), store=tmp_path, n_jobs=n_jobs).run()
    if n_jobs != 1:
        assert str(raised.value).startswith("ValueError" if kind == "lock" else "_TrainingFailed")
    assert "in __call__" in "".join(traceback.format_exception(raised.value))
    assert len((tmp_path / "runs.jsonl").read_text().splitlines()) >= 10


def test_each_analysis_is_recorded_and_a_retest_of_the_claim_says_what_it_costs(tmp_path):
    """Bug: re-running a store under another schedule or level silently replaced result.json:
    a "not refuted" at max_runs 300 followed by a "violation" at max_runs 1000 on the same runs
    read as a level-β violation, when the two analyses together accuse an honest pipeline with
    probability up to 2β."""
    mech = GaussianMechanismScore(noise_std=1.0)
    first = _audit(mech, store=tmp_path, max_runs=120)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a first analysis warns of nothing
        assert "also analysed" not in first.run().summary()
        _audit(mech, store=tmp_path, max_runs=120).run()  # the same analysis again: not a retest
    with pytest.warns(UserWarning, match=r"at most 0\.1, not 0\.05"):
        second = _audit(mech, store=tmp_path, max_runs=240).run()
    assert [e["max_runs"] for e in second.config["earlier_analyses"]] == [120]
    assert "also analysed for this claim under other settings (beta 0.05, 60 to 120 runs: NOT" in (
        second.summary()
    )
    assert AuditResult.from_json(tmp_path / "result.json").summary() == second.summary()
    with pytest.warns(UserWarning, match=r"at most 0\.3, not 0\.2"):
        _audit(mech, store=tmp_path, beta=0.2).run()  # another level counts too
    reseeded = {"bernoulli": BernoulliTPRFPRBaseline(alpha=2.0, direction="max", random_state=1)}
    with pytest.warns(UserWarning, match="under 3 other setting"):  # and other hyperparameters
        _audit(mech, store=tmp_path, estimators=reseeded).run()
    entries = [json.loads(x) for x in (tmp_path / "analyses.jsonl").read_text().splitlines()]
    assert [(e["beta"], e["max_runs"]) for e in entries] == [
        (0.05, 120),
        (0.05, 120),
        (0.05, 240),
        (0.2, 60),
        (0.05, 60),
    ]
    claim = GaussianMechanismScore(noise_std=1.0).claimed_epsilon(4.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # another claim (order 4) is another test
        other = Auditor(mech, claim, alpha=4.0, n_runs=N_RUNS, progress=False, store=tmp_path)
        other.estimators = {
            "bernoulli": BernoulliTPRFPRBaseline(alpha=4.0, direction="max", random_state=0)
        }
        assert "earlier_analyses" not in other.run().config


def test_a_claim_recomputed_with_other_rounding_is_the_same_claim(tmp_path):
    """Reviewer's finding: analyses were matched by the claim's exact value, so a claim of
    1.000000000003 (the same claim, rounded otherwise) with another estimator seed was tested
    on the same runs with no earlier analysis named and no warning."""
    mech = GaussianMechanismScore(noise_std=1.0)
    claim = mech.claimed_epsilon(2.0)
    _audit(mech, store=tmp_path).run()
    reseeded = {"bernoulli": BernoulliTPRFPRBaseline(alpha=2.0, direction="max", random_state=1)}
    auditor = _audit(mech, store=tmp_path, estimators=reseeded)
    auditor.claimed_epsilon = claim * (1 + 3e-12)
    with pytest.warns(UserWarning, match=r"at most 0\.1, not 0\.05"):
        result = auditor.run()
    assert len(result.config["earlier_analyses"]) == 1
    another = _audit(mech, store=tmp_path, estimators=reseeded)
    another.claimed_epsilon = claim * 1.01  # another claim: not this claim's analysis
    assert "earlier_analyses" not in another.run().config


def test_an_analysis_of_a_larger_claim_counts_against_a_smaller_one(tmp_path):
    """A violation of a larger claim at the same order refutes every smaller one, so analysing
    ε_α = 2c under one setting and then c under another tests c twice: the second analysis names
    the first (with its claim) and counts its level. An analysis of a smaller claim does not
    count (its violation would not have refuted c), nor one at another order."""
    mech = GaussianMechanismScore(noise_std=1.0)
    claim = mech.claimed_epsilon(2.0)

    def audit(epsilon, seed, alpha=2.0, store=tmp_path):
        estimators = {
            "bernoulli": BernoulliTPRFPRBaseline(alpha=alpha, direction="max", random_state=seed)
        }
        auditor = _audit(mech, store=store, estimators=estimators, alpha=alpha)
        auditor.claimed_epsilon = epsilon
        return auditor

    audit(claim / 2, 0).run()  # smaller: not a test of claim
    audit(2 * claim, 1, alpha=4.0).run()  # another order
    audit(2 * claim, 2).run()
    with pytest.warns(UserWarning, match=r"for this claim .* or a larger one under 1 other"):
        result = audit(claim, 3).run()
    [earlier] = result.config["earlier_analyses"]
    assert earlier["claimed_epsilon"] == 2 * claim
    assert f"60 runs, claim {2 * claim:g}: " in result.summary()
    audit(2 * claim, 2, store=tmp_path / "same").run()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same setting as the larger claim's: the same bound
        audit(claim, 2, store=tmp_path / "same").run()


@pytest.mark.parametrize(
    ("store", "said"), [("", "empty path"), (" ", "empty path"), (b"x", "b'x'"), (123, "123")]
)
def test_a_store_that_is_no_path_is_refused(tmp_path, monkeypatch, store, said):
    """Reviewer's finding: store="" wrote config.json, runs.jsonl, result.json and .lock into
    the current directory; bytes and integers raised raw TypeErrors from pathlib."""
    monkeypatch.chdir(tmp_path)
    mech = GaussianMechanismScore(noise_std=1.0)
    with pytest.raises(ValueError, match=re.escape(said)):
        _audit(mech, store=store).run()
    with pytest.raises(ValueError, match=re.escape(said)):
        evaluate(np.zeros(N_RUNS), np.ones(N_RUNS), 1.0, alpha=2.0, store=store)
    assert not list(tmp_path.iterdir())


def test_a_repeat_with_an_unseeded_estimator_is_counted_as_another_test(tmp_path):
    """An estimator whose fits draw new splits each time (random_state None) can give another
    verdict on a repeat: a reviewer's four repeats gave bounds 0.0176, 0.004, 0, 0, were
    recorded as one analysis, and warned of nothing, so rerunning until "violation" spent β
    each time unseen. A seeded or deterministic repeat is no new test."""
    mech = GaussianMechanismScore(noise_std=1.0)
    unseeded = {"bernoulli": BernoulliTPRFPRBaseline(alpha=2.0, random_state=None)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _audit(mech, store=tmp_path, estimators=unseeded).run()
    # The first analysis is no retest; it warns only that its estimator is unseeded.
    assert {str(w.message).split(":")[0] for w in caught} == {
        "estimator(s) 'bernoulli' have random_state=None"
    }
    warnings.filterwarnings("ignore", "estimator.* have random_state=None")  # (said above)
    with pytest.warns(UserWarning, match=r"under 1 other setting.* at most 0\.1, not 0\.05"):
        _audit(mech, store=tmp_path, estimators=unseeded).run()
    with pytest.warns(UserWarning, match=r"under 2 other setting.* at most 0\.15"):
        _audit(mech, store=tmp_path, estimators=unseeded).run()
    deterministic = {
        "bernoulli": BernoulliTPRFPRBaseline(alpha=2.0, threshold="bonferroni", random_state=None)
    }
    other = tmp_path / "deterministic"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no splits: the same fit each time
        _audit(mech, store=other, estimators=deterministic).run()
        _audit(mech, store=other, estimators=deterministic).run()


@pytest.mark.parametrize(
    "make", [np.random.default_rng, np.random.RandomState], ids=["Generator", "RandomState"]
)
def test_a_generator_seed_counts_by_its_state(tmp_path, make):
    """Diff reviewer's finding: a RandomState or Generator was recorded by its class name, so
    generators in two states (two different splits) were one analysis; and an audit clones its
    estimators, copying the generator, so a repeat with one state fits the same way and is no
    new test."""
    mech = GaussianMechanismScore(noise_std=1.0)

    def audit(seed):
        estimators = {"bernoulli": BernoulliTPRFPRBaseline(alpha=2.0, random_state=make(seed))}
        return _audit(mech, store=tmp_path, estimators=estimators).run()

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first = audit(0)
        again = audit(0)  # the same state: the same fit, no new test
    assert again.estimates["bernoulli"] == first.estimates["bernoulli"]
    with pytest.warns(UserWarning, match="under 1 other setting"):
        audit(1)  # another state: other splits, another test


def test_an_estimator_that_does_not_tag_itself_counts_as_unseeded():
    """Diff reviewer's finding: scikit-learn's default tags say non_deterministic=False for any
    estimator, so one of the user's with random_state=None that sets no tags was taken for
    seeded; only tags an estimator's own classes set are believed."""
    from sklearn.base import BaseEstimator

    from rdpest.auditing.analyses import _unseeded

    class Untagged(BernoulliTPRFPRBaseline):
        __sklearn_tags__ = BaseEstimator.__sklearn_tags__  # as a class that sets no tags has

    assert _unseeded(Untagged(random_state=None), {"random_state": None})
    assert _unseeded(BernoulliTPRFPRBaseline(random_state=None), {"random_state": None})
    assert not _unseeded(BernoulliTPRFPRBaseline(random_state=3), {"random_state": 3})
    seeded = BernoulliTPRFPRBaseline(threshold="bonferroni", random_state=None)
    assert not _unseeded(seeded, {"random_state": None})  # it says its fit draws nothing
    # rdpest's base class, which a user's estimator may extend, says so too (it set no tag)
    from rdpest.estimators.base import RenyiEstimatorBase

    untagged = BernoulliTPRFPRBaseline(random_state=None)
    assert RenyiEstimatorBase.__sklearn_tags__(untagged).non_deterministic
    untagged.random_state = 4
    assert not RenyiEstimatorBase.__sklearn_tags__(untagged).non_deterministic


def test_numpy_seeds_are_recorded_by_value():
    """Final diff reviewer's finding: a numpy integer is not JSON, and was recorded by its type
    name, so audits seeded np.int64(0) and np.int64(1) were one analysis."""
    from rdpest.auditing.analyses import settings_text

    texts = {
        settings_text(BernoulliTPRFPRBaseline(alpha=np.float64(2.0), random_state=np.int64(seed)))
        for seed in range(3)
    }
    assert len(texts) == 3 and '"random_state": 0' in min(texts)


def test_an_analysis_after_a_record_cut_short_is_kept_and_the_lost_one_is_reported(
    tmp_path, caplog
):
    """Reviewer's finding: the next analysis was appended onto a last line cut short by a crash,
    so it was lost with it, and a later retest warning added up too small a level."""
    mech = GaussianMechanismScore(noise_std=1.0)
    _audit(mech, store=tmp_path).run()
    with pytest.warns(UserWarning, match=r"at most 0\.25, not 0\.2"):
        _audit(mech, store=tmp_path, beta=0.2).run()
    path = tmp_path / "analyses.jsonl"
    path.write_bytes(path.read_bytes()[:-40])  # the β = 0.2 record, cut short
    with caplog.at_level(logging.WARNING, logger="rdpest.auditing.store"):
        with pytest.warns(UserWarning, match=r"at most 0\.35, not 0\.3"):
            _audit(mech, store=tmp_path, beta=0.3).run()
    assert "1 record(s)" in caplog.text and "cannot be read" in caplog.text
    with pytest.warns(UserWarning, match=r"at most 0\.75, not 0\.4"):  # 0.4 + 0.05 + 0.3
        _audit(mech, store=tmp_path, beta=0.4).run()
    lines = path.read_text().splitlines()
    assert [json.loads(line)["beta"] for line in lines[-2:]] == [0.3, 0.4]


def test_what_does_not_change_the_test_is_not_a_retest(tmp_path, caplog):
    """Reviewer's findings: a power_target added to a one-round audit (it only adds
    runs_needed) and an estimator's verbose or n_threads counted as another test of the claim;
    and an analyses.jsonl that could not be read or written cost the audit its result.json."""
    mech = GaussianMechanismScore(noise_std=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _audit(mech, store=tmp_path).run()
        _audit(mech, store=tmp_path, power_target=3.0).run()
        dv = {
            "dv": DVRenyiEstimator(alpha=2.0, max_epochs=2, hidden_layer_sizes=(4,), random_state=0)
        }
        _audit(mech, store=tmp_path / "dv", estimators=dv).run()
        dv["dv"].set_params(verbose=1, n_threads=1)
        _audit(mech, store=tmp_path / "dv", estimators=dv).run()
    broken = tmp_path / "broken"
    (broken / "analyses.jsonl").mkdir(parents=True)
    with caplog.at_level(logging.WARNING, logger="rdpest.auditing.store"):
        result = _audit(mech, store=broken).run()
    assert AuditResult.from_json(broken / "result.json").summary() == result.summary()
    assert "cannot read" in caplog.text and "cannot record this analysis" in caplog.text


# ------------------------------------------------------------------------------------------------
# 3. records are checked
def _truncate_runs(store, keep: int) -> list[str]:
    lines = (store / "runs.jsonl").read_text().splitlines()
    (store / "runs.jsonl").write_text("".join(line + "\n" for line in lines[:keep]))
    return lines


def test_records_from_another_seed_are_dropped_and_redone(tmp_path, caplog):
    """Bug: a record whose seed is not run_seed(random_state, arm, index) was adopted, so runs
    copied from a --seed 1 store joined a --seed 0 audit."""
    mech = GaussianMechanismScore(noise_std=1.0, noise_scale_bug=0.5)
    seed0, seed1 = tmp_path / "seed0", tmp_path / "seed1"
    _audit(mech, store=seed0).run()
    _audit(mech, store=seed1, random_state=1).run()
    _truncate_runs(seed0, 10)
    foreign = [json.loads(x) for x in (seed1 / "runs.jsonl").read_text().splitlines()]
    with open(seed0 / "runs.jsonl", "a") as handle:
        for record in foreign:
            if record["index"] >= 10:
                handle.write(json.dumps(record) + "\n")
    with caplog.at_level(logging.WARNING, logger="rdpest.auditing.store"):
        resumed = _audit(mech, store=seed0).run()
    assert "seed is not the one this audit derives" in caplog.text
    _same(resumed, _audit(mech).run())


def test_records_from_another_pipelines_store_are_dropped_and_redone(tmp_path, caplog):
    """Reviewer's finding: run seeds depend only on random_state, arm and index, so the runs of a
    buggy pipeline's store copied into the honest pipeline's store (same random_state) were
    adopted, and the honest pipeline's audit said "violation" under its own name."""
    honest = GaussianMechanismScore(noise_std=1.0)
    buggy = GaussianMechanismScore(noise_std=1.0, noise_scale_bug=0.25)
    _audit(buggy, store=tmp_path / "buggy").run()
    _audit(honest, store=tmp_path / "honest").run()
    (tmp_path / "honest" / "runs.jsonl").write_bytes(
        (tmp_path / "buggy" / "runs.jsonl").read_bytes()
    )
    with caplog.at_level(logging.WARNING, logger="rdpest.auditing.store"):
        resumed = _audit(honest, store=tmp_path / "honest").run()
    assert "written by another pipeline" in caplog.text
    _same(resumed, _audit(honest).run())
    assert _audit(buggy).run().verdict == "violation"  # what the copied runs would have said
    # Records written before they carried the digest are adopted as they are: none is redone.
    runs = tmp_path / "honest" / "runs.jsonl"
    legacy = [json.loads(line) for line in runs.read_text().splitlines()]
    assert all("pipeline" in record for record in legacy)
    runs.write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k != "pipeline"}) + "\n" for r in legacy)
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rdpest.auditing.store"):
        _same(_audit(honest, store=tmp_path / "honest").run(), resumed)
    assert "dropping" not in caplog.text
    assert len(runs.read_text().splitlines()) == len(legacy)


def _shifted(include_canary, seed, shift=1.0):
    return _mechanism_score(include_canary, seed) + shift


def test_a_number_written_as_1_or_1_0_keeps_the_stores_runs(tmp_path, caplog):
    """Reviewer's finding: the store accepted shift=1.0 as the pipeline it recorded with
    shift=1 (Python's 1 == 1.0), but the records' digest was of the new audit's JSON text, where
    "1" and "1.0" differ: every run was dropped as another pipeline's, and trained again."""
    first = _audit(functools.partial(_shifted, shift=1), store=tmp_path).run()
    lines = (tmp_path / "runs.jsonl").read_text()
    with caplog.at_level(logging.WARNING, logger="rdpest.auditing.store"):
        again = _audit(functools.partial(_shifted, shift=1.0), store=tmp_path).run()
    assert "dropping" not in caplog.text
    assert (tmp_path / "runs.jsonl").read_text() == lines
    _same(again, first)


def test_conflicting_duplicates_are_dropped_with_a_warning(tmp_path, caplog):
    """Bug: two records of one run with different scores resolved 'last wins', silently."""
    mech = GaussianMechanismScore(noise_std=1.0)
    _audit(mech, store=tmp_path).run()
    seed = run_seed(0, 1, 3)
    with open(tmp_path / "runs.jsonl", "a") as handle:
        handle.write(json.dumps({"arm": 1, "index": 3, "seed": seed, "score": 123.0}) + "\n")
    with caplog.at_level(logging.WARNING, logger="rdpest.auditing.store"):
        resumed = _audit(mech, store=tmp_path).run()
    assert "different scores" in caplog.text
    _same(resumed, _audit(mech).run())


def test_a_store_with_runs_but_no_configuration_is_refused(tmp_path):
    """Bug: a missing config.json adopted any runs.jsonl."""
    mech = GaussianMechanismScore()
    _audit(mech, store=tmp_path).run()
    (tmp_path / "config.json").unlink()
    with pytest.raises(ValueError, match=r"no config\.json"):
        _audit(mech, store=tmp_path).run()


# ------------------------------------------------------------------------------------------------
# 12. odd records and damaged files
@pytest.mark.parametrize(
    "line",
    [
        '{"arm": 1e400, "index": 0, "seed": 1, "score": 0.5}',
        "[" * 100_000 + "]" * 100_000,
        '{"arm": true, "index": 0, "seed": 1, "score": 0.5}',
        '{"arm": 1, "index": -1, "seed": 1, "score": 0.5}',
        '{"arm": 1, "index": 0, "seed": 1, "score": "0.5"}',
        '{"arm": 1, "index": 0, "seed": 1, "score": NaN}',
        "[1, 2, 3]",
        '{"arm": 1, "index": 0, "seed": 1, "score": 1' + "0" * 400 + "}",
    ],
    ids=[
        "overflow",
        "deeply-nested",
        "bool-arm",
        "negative-index",
        "string-score",
        "nan",
        "list",
        "long-integer-score",
    ],
)
def test_an_odd_record_is_dropped_and_its_run_redone(tmp_path, caplog, line):
    """Bug: {"arm": 1e400} raised OverflowError and a deeply nested line RecursionError, making
    the whole store unloadable; so did a score written as a 401-digit integer (math.isfinite
    cannot convert it to a float)."""
    mech = GaussianMechanismScore(noise_std=1.0)
    _audit(mech, store=tmp_path).run()
    lines = _truncate_runs(tmp_path, 2 * N_RUNS - 1)
    with open(tmp_path / "runs.jsonl", "a") as handle:
        handle.write(line + "\n")
    with caplog.at_level(logging.WARNING, logger="rdpest.auditing.store"):
        resumed = _audit(mech, store=tmp_path).run()
    assert "dropping a damaged run record" in caplog.text
    _same(resumed, _audit(mech).run())
    assert len((tmp_path / "runs.jsonl").read_text().splitlines()) == len(lines)


def test_a_damaged_configuration_names_its_file(tmp_path):
    mech = GaussianMechanismScore()
    _audit(mech, store=tmp_path, n_runs=10).run()
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"config\.json is damaged"):
        _audit(mech, store=tmp_path, n_runs=10).run()


def test_from_json_validates_its_payload(tmp_path):
    """Bug: any string not starting with '{' was read as a path (a FileNotFoundError), and
    missing keys or wrong types surfaced as KeyError/TypeError."""
    text = _audit(GaussianMechanismScore(), n_runs=10).run().to_json()
    payload = json.loads(text)
    with pytest.raises(ValueError, match="neither"):
        AuditResult.from_json("not json and not a file")
    with pytest.raises(ValueError, match="'verdict'"):
        AuditResult.from_json(json.dumps({k: v for k, v in payload.items() if k != "verdict"}))
    with pytest.raises(ValueError, match="'alpha' must be a number"):
        AuditResult.from_json(json.dumps({**payload, "alpha": "two"}))
    with pytest.raises(ValueError, match="list of numbers"):
        AuditResult.from_json(json.dumps({**payload, "losses_with_canary": ["a"]}))
    with pytest.raises(ValueError, match="not valid JSON"):
        AuditResult.from_json("{broken")
    path = tmp_path / "r.json"
    path.write_text(text)
    assert AuditResult.from_json(str(path)).verdict == AuditResult.from_json(path).verdict


def _edited(payload: dict, path: str, value) -> str:
    """The payload as JSON with the entry at ``path`` (keys joined by '/') replaced."""
    edited = json.loads(json.dumps(payload))
    *parents, last = path.split("/")
    node = edited
    for key in parents:
        node = node[next(iter(node))] if key == "*" else node[key]
    node[last] = value
    return json.dumps(edited)


@pytest.mark.parametrize(
    ("path", "value", "match"),
    [
        ("estimates/*/beta", None, "beta must be a number"),
        ("estimates/*/divergence", "x", "must be numbers"),
        ("estimates/*/certified", "yes", "certified must be true or false"),
        ("verdict", "banana", "'verdict' must be one of"),
        ("alpha", 0.5, "'alpha' must be a finite number > 1"),
        ("beta", 7, "'beta' must be in"),
        ("claimed_epsilon", -1, "claimed_epsilon"),
        ("losses_with_canary", [[1.0, 2.0]], "flat list"),
        ("losses_with_canary", [1.0, 2.0], "one loss per run"),
        ("losses_with_canary", ["1.5"], "flat list"),
        ("power", {}, "needs power 'max_certifiable'"),
        ("power/max_certifiable", "big", "max_certifiable"),
        ("config/rounds_planned", 5, "rounds_planned"),
        ("config/earlier_analyses", 5, "earlier_analyses"),
        # integers too long for a float raised OverflowError; infinite alpha passed and summary()
        # then failed
        pytest.param("claimed_epsilon", 10**400, "claimed_epsilon", id="claim-401-digits"),
        pytest.param("alpha", 10**400, "'alpha' must be a finite", id="alpha-401-digits"),
        pytest.param("alpha", float("inf"), "'alpha' must be a finite", id="alpha-inf"),
        pytest.param("losses_with_canary", [10**400] * 10, "finite numbers", id="loss-401-digits"),
        ("rounds", [], "needs its 'rounds'"),  # with rounds_planned [10, 20], below
    ],
)
def test_from_json_refuses_what_summary_could_not_print(path, value, match):
    """Bug: from_json accepted wrong types inside the payload (a null beta, a string estimate,
    an empty power record for an underpowered verdict, a sequential plan without rounds, nested
    or unequal losses, a verdict of "banana", a number for the earlier analyses) and summary()
    then failed with a bare TypeError or IndexError, or printed wrong run counts."""
    result = _audit(GaussianMechanismScore(), n_runs=10).run()
    payload = json.loads(result.to_json())
    payload["verdict"] = "underpowered"  # so that the power record's check applies
    payload["power"]["max_certifiable"] = payload["claimed_epsilon"]
    assert AuditResult.from_json(json.dumps(payload)).summary()
    if path == "rounds":  # a sequential plan without its rounds
        payload["config"]["rounds_planned"] = [10, 20]
    with pytest.raises(ValueError, match=match):
        AuditResult.from_json(_edited(payload, path, value))


# ------------------------------------------------------------------------------------------------
# 8 (score values) and 14 (files)
@pytest.mark.parametrize("value", ["1.5", True, None, [1.0]], ids=["str", "bool", "none", "list"])
def test_scores_that_are_not_real_numbers_are_refused(value):
    """Bug: a score_fn returning "1.5" or True was coerced with float()."""

    def score(include_canary, seed):
        return value

    with pytest.raises(ValueError, match="must return a real number"):
        _audit(score, n_runs=10).run()


def test_a_one_element_array_score_is_refused_with_a_hint_naming_arrays():
    """Auditor review: np.array([1.0]) was refused with "(a torch tensor? return
    tensor.item())"; the hint names what was returned."""
    torch = pytest.importorskip("torch")
    for value, hint in [
        (np.array([1.0]), r"\(a one-element array\? return array\.item\(\)\)"),
        (torch.tensor([1.0]), r"\(a one-element tensor\? return tensor\.item\(\)\)"),
    ]:

        def score(include_canary, seed, value=value):
            return value

        with pytest.raises(ValueError, match=hint):
            _audit(score, n_runs=10).run()


def test_numpy_scalars_are_scores():
    def score(include_canary, seed):
        return np.float32(_mechanism_score(include_canary, seed))

    assert _audit(score, n_runs=10).run().n_runs == 10


def test_store_files_have_the_umask_mode_and_links_are_refused(tmp_path):
    """Bug: config.json, result.json and a repaired runs.jsonl were created 0600 (mkstemp), and a
    symlinked runs.jsonl was followed."""
    previous = os.umask(0o022)
    try:
        mech = GaussianMechanismScore()
        _audit(mech, store=tmp_path, n_runs=10).run()
        _truncate_runs(tmp_path, 5)
        with open(tmp_path / "runs.jsonl", "a") as handle:
            handle.write("{damaged\n")  # forces a repair (a rewrite) of runs.jsonl
        _audit(mech, store=tmp_path, n_runs=10).run()
    finally:
        os.umask(previous)
    for name in ("config.json", "runs.jsonl", "result.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644, name
    target = tmp_path / "elsewhere.jsonl"
    target.write_text("")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "runs.jsonl").symlink_to(target)
    with pytest.raises(ValueError, match="symbolic link"):
        _audit(GaussianMechanismScore(), store=linked, n_runs=10).run()
    assert target.read_text() == ""


def test_result_records_versions_and_time(tmp_path):
    _audit(GaussianMechanismScore(), store=tmp_path, n_runs=10).run()
    provenance = json.loads((tmp_path / "result.json").read_text())["provenance"]
    assert set(provenance) >= {"rdpest", "python", "torch", "opacus", "created_utc"}
    assert provenance["created_utc"].endswith("+00:00")
    assert AuditResult.from_json(tmp_path / "result.json").provenance == provenance


def test_estimator_settings_an_audit_overrides_are_no_new_test(tmp_path):
    """Sequential/membership reviewer's finding: an estimator's beta and direction, which an
    audit sets itself (its share of β, both directions), made a repeat with beta=0.01 instead of
    0.05 another analysis and warned that the levels add up, for an identical fit. Another
    setting the fit uses (test_fraction) is still another test."""
    mech = GaussianMechanismScore(noise_std=1.0)

    def audit(**params):
        estimators = {"bernoulli": BernoulliTPRFPRBaseline(alpha=2.0, random_state=0, **params)}
        return _audit(mech, store=tmp_path, estimators=estimators).run()

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first = audit()
        again = audit(beta=0.01, direction="reverse")
    assert again.estimates["bernoulli"] == first.estimates["bernoulli"]
    with pytest.warns(UserWarning, match="under 1 other setting"):
        audit(test_fraction=0.3)
