"""Checks of an audit's given scores: O and O′ as equally long 1-D arrays of finite numbers."""

from __future__ import annotations

import numpy as np

__all__ = ["checked_scores"]


def _scores(values, name: str) -> np.ndarray:
    """``values`` (1-D, or a single column) as a 1-D float array of finite numbers, or a
    ValueError naming ``name``."""
    if isinstance(values, str | bytes | dict) or values is None:
        raise ValueError(f"{name} must be a 1-D array of scores, got {type(values).__name__}")
    try:
        array = np.asarray(values)
    except ValueError as exc:  # a ragged nested list
        raise ValueError(f"{name} must be a 1-D array of scores (ragged input: {exc})") from None
    if array.dtype == object or array.dtype.kind not in "biuf" or array.dtype.kind == "b":
        raise ValueError(f"{name} must hold real numbers, got an array of dtype {array.dtype}")
    if array.ndim == 2 and array.shape[1] == 1:  # a column: one score per run, as the CLI reads
        array = array[:, 0]
    if array.ndim != 1:
        raise ValueError(
            f"{name} must be a 1-D array of scores (or a single column), got shape {array.shape}"
        )
    if array.size == 0:
        raise ValueError(f"{name} is empty")
    array = array.astype(np.float64)
    bad = ~np.isfinite(array)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{name} holds {int(bad.sum())} non-finite score(s) (NaN or inf), the first at index "
            f"{first}: {array[first]}"
        )
    return array


def checked_scores(without, with_, names=("losses_without_canary", "losses_with_canary")):
    """O and O′ as 1-D float arrays of finite numbers of equal length, or a ValueError naming
    the side at fault (given scores, for :func:`rdpest.auditing.evaluate` and
    :meth:`Auditor.evaluate`)."""
    without, with_ = _scores(without, names[0]), _scores(with_, names[1])
    if len(without) != len(with_):
        raise ValueError(
            f"{names[0]} has {len(without)} scores but {names[1]} has {len(with_)}: an audit has "
            "as many runs with the canary as without (its power and record are per side); pass "
            "equally long samples"
        )
    return without, with_
