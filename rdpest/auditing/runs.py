"""The training runs of an audit as joblib tasks: their seeds, their checked scores, and the
guard that keeps a failing run from taking the runs finished beside it down with it."""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import pickle
import traceback
from collections.abc import Iterable, Mapping, Set
from numbers import Integral, Real

import numpy as np

__all__ = ["WITHOUT_CANARY", "WITH_CANARY", "run_seed", "runs_per_call", "worker_options"]

WITHOUT_CANARY, WITH_CANARY = 0, 1


def first_runs(finished: Mapping, n: int) -> tuple[np.ndarray, np.ndarray]:
    """O (without the canary) and O′ (with it): the scores of the first ``n`` runs of each arm
    in ``finished`` ({(arm, index): score}), in order; a KeyError where one is missing."""
    without = np.array([finished[(WITHOUT_CANARY, i)] for i in range(n)])
    with_ = np.array([finished[(WITH_CANARY, i)] for i in range(n)])
    return without, with_


def run_seed(random_state: int, arm: int, index: int) -> int:
    """The seed of run ``index`` of ``arm`` (0: without canary, 1: with), independent of n_jobs.

    Examples
    --------
    >>> run_seed(0, 1, 5) == run_seed(0, 1, 5) != run_seed(0, 0, 5)
    True
    """
    return int(
        np.random.SeedSequence([int(random_state), int(arm), int(index)]).generate_state(1)[0]
    )


def worker_options() -> dict:
    """Extra ``Parallel`` arguments for an audit's training runs: under joblib's loky backend
    (the default), workers that end with the auditing process (Linux's ``PR_SET_PDEATHSIG``,
    :func:`rdpest.utils.processes.end_with_parent`), so an audit killed with SIGKILL leaves no
    idle worker behind; nothing under other backends, or where the user's
    ``parallel_config`` already names a worker initializer."""
    from joblib.parallel import LokyBackend, get_active_backend

    from rdpest.utils.processes import end_with_parent

    backend, _ = get_active_backend()
    # joblib before 1.5 has no backend_kwargs (nor Parallel(**backend_kwargs)): nothing to pass.
    configured = getattr(backend, "backend_kwargs", None)
    if type(backend) is not LokyBackend or configured is None or "initializer" in configured:
        return {}
    return {"initializer": end_with_parent, "initargs": (os.getpid(),)}


def results_as_finished(n_jobs: int, tasks):
    """Run joblib ``tasks`` (an iterable, read lazily) on the active backend; yield each result
    as soon as it can be stored.

    Backends that hand results back as they finish (loky, threading, Dask, Ray) run them all in
    one ``Parallel`` call, in the order they finish. Those that cannot (joblib's
    ``multiprocessing`` backend refuses ``return_as="generator"``) run them a round of
    ``effective_n_jobs`` tasks at a time, so that an interrupted audit still keeps each finished
    round. Results do not depend on the backend: every run's seed is fixed by its index.
    """
    from joblib import Parallel, effective_n_jobs
    from joblib.parallel import get_active_backend

    backend, _ = get_active_backend()
    try:
        if getattr(backend, "supports_return_generator", True):
            yield from Parallel(n_jobs=n_jobs, return_as="generator_unordered", **worker_options())(
                tasks
            )
            return
        tasks = iter(tasks)
        with Parallel(n_jobs=n_jobs, **worker_options()) as parallel:  # one pool for every round
            while chunk := list(itertools.islice(tasks, max(1, effective_n_jobs(n_jobs)))):
                yield from parallel(chunk)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        # loky says PicklingError; the multiprocessing backend passes on pickle's TypeError
        # ("cannot pickle '_thread.lock' object") or AttributeError ("Can't pickle local object")
        if not isinstance(exc, pickle.PicklingError) and "pickle" not in str(exc):
            raise
        exc.add_note(
            f"with n_jobs={n_jobs} the score function is sent to worker processes, so it must be "
            "picklable (no open files, locks or live connections among its attributes); or use "
            "n_jobs=1"
        )
        raise


def _checked_score(value, arm: int, seed: int) -> float:
    """A run's score as a float: a real number, finite; strings, bools and the like are refused.

    ``float()`` would quietly turn ``"1.5"`` or ``True`` into a score; a score function that
    returns them has a bug the audit should not hide.
    """
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, bool | np.bool_) or not isinstance(value, Real):
        # the hint names what was returned: a one-element array or tensor has .item()
        kind = "array" if isinstance(value, np.ndarray) else "tensor"
        hint = f" (a one-element {kind}? return {kind}.item())" if hasattr(value, "item") else ""
        raise ValueError(
            f"score_fn must return a real number; got {type(value).__name__} {value!r}{hint} "
            f"(include_canary={bool(arm)}, seed={seed})"
        )
    try:
        score = float(value)
    except OverflowError:  # an integer beyond the float range (10**400)
        score = math.inf if value > 0 else -math.inf
    if not math.isfinite(score):
        raise ValueError(
            f"score_fn returned {score} (include_canary={bool(arm)}, seed={seed}); a training run "
            "diverged? Lower the learning rate or clip the score"
        )
    return score


@contextlib.contextmanager
def _naming_the_run(arm: int, seeds):
    """An error of the user's score function, with a note saying which run raised it (the arm
    and seed(s) that reproduce it: ``score_fn(include_canary, seed)``)."""
    try:
        yield
    except Exception as exc:
        exc.add_note(f"raised by score_fn(include_canary={bool(arm)}, seed(s) {seeds})")
        raise


def _one_run(score_fn, arm: int, index: int, seed: int) -> list[tuple[int, int, int, float]]:
    with _naming_the_run(arm, seed):
        value = score_fn(bool(arm), seed)
    return [(arm, index, seed, _checked_score(value, arm, seed))]


def _run_group(
    score_fn, arm: int, indices: list[int], seeds: list[int]
) -> list[tuple[int, int, int, float]]:
    with _naming_the_run(arm, list(seeds)):
        returned = score_fn.score_many(bool(arm), list(seeds))
    # A mapping or set iterates over its keys (a {seed: score} dict gave the seeds as scores) or
    # in no fixed order; a scalar or a string is no sequence of scores.
    if (
        isinstance(returned, Mapping | Set | str | bytes)
        or not isinstance(returned, Iterable)
        or getattr(returned, "ndim", 1) == 0  # a 0-d array or tensor: Iterable, not iterable
    ):
        raise ValueError(
            f"score_fn.score_many must return a sequence of scores, one per seed in the seeds' "
            f"order (a list or 1-D array), got {type(returned).__name__} (include_canary="
            f"{bool(arm)}, seeds {list(seeds)})"
        )
    values = list(returned)
    if len(values) != len(seeds):
        raise ValueError(
            f"score_fn.score_many returned {len(values)} scores for {len(seeds)} seeds "
            f"(include_canary={bool(arm)}, seeds {list(seeds)}): it must return one per seed, "
            "in the seeds' order"
        )
    return [
        (arm, index, seed, _checked_score(value, arm, seed))
        for index, seed, value in zip(indices, seeds, values, strict=True)
    ]


def _guarded(work, parent: int, *args) -> tuple[list, BaseException | None, str | None]:
    """``work(*args)``'s runs, or its error with the traceback as text: a failing run then does
    not take down the runs finished beside it in its joblib batch (they are stored, and the
    error is raised once the runs in flight are in).

    ``parent`` is the auditing process's id: an error raised in another process is sent back
    only if it survives a pickle round trip (an exception whose ``__init__`` takes other
    arguments than it passes on pickles but does not unpickle, and joblib then loses the whole
    pool's results); otherwise it comes back as a RuntimeError naming it. In the auditing
    process itself (``n_jobs=1``, threads) the error is returned as it is.
    """
    try:
        return work(*args), None, None
    except Exception as exc:  # raised again by Auditor._collect
        text = traceback.format_exc()
        if os.getpid() != parent:
            try:
                pickle.loads(pickle.dumps(exc))
            except Exception:  # an error a worker could not send back
                exc = RuntimeError(f"{type(exc).__name__}: {exc}")
        return [], exc, text


def runs_per_call(score_fn) -> int:
    """How many runs the auditor hands ``score_fn`` at once (1 without ``score_many``).

    A score function may train several runs together: it then has a method
    ``score_many(include_canary, seeds) -> sequence of floats`` (one score per seed, each what
    ``score_fn(include_canary, seed)`` would return) and an integer attribute ``runs_per_call``.
    """
    if not callable(getattr(score_fn, "score_many", None)):
        return 1
    group = getattr(score_fn, "runs_per_call", None)
    if isinstance(group, bool) or not isinstance(group, Integral) or group < 1:
        raise ValueError(
            "a score_fn with score_many must have an integer attribute runs_per_call >= 1, got "
            f"{group!r}"
        )
    return int(group)
