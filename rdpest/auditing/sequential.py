"""Sequential audits: train in rounds and stop as soon as the audit can decide.

A sequential audit fixes its schedule before any training: the runs per side after each round,
``n_runs``, then about ``growth`` times more each round (whole groups of runs for a score
function that trains several at once), up to ``max_runs``. Each round refits every estimator to
all runs so far, at level β/K for K rounds, and the audit stops at the first round whose
certified bound exceeds the claim. By a union bound over the K rounds the probability of a false
"violation" is at most K · β/K = β, whatever the stopping rule (each round's test is valid at its
level on its own, and the critic may be retrained at every round). An audit that does not stop
early spends only the rounds it ran; its power at the last round is reported at β/K.

The audit may also stop WITHOUT a violation once its power target is met: ``power_target``,
the ε_α it should detect with 80% probability (:mod:`rdpest.auditing.power`). Stopping for power
never raises the false-violation probability (it only forgoes later rounds). A round whose
scores are perfectly separated yet certify no violation never stops for power: its verdict is
"underpowered", and more runs may decide.

Rounds are computed from stored runs: a killed sequential audit resumes from its store, refits
the rounds and reaches the same verdict, bit for bit where the estimators are seeded (the
defaults are, from the audit's ``random_state``; an estimator passed with ``random_state=None``
draws fresh randomness at every fit, so its resumed estimates differ).
"""

from __future__ import annotations

import math
from numbers import Integral, Real

__all__ = ["round_sizes"]


def round_sizes(n_runs: int, max_runs: int, growth: float = 1.5, group: int = 1) -> list[int]:
    """Runs per side after each round: ``n_runs``, then ×``growth`` (rounded up to whole groups
    of ``group`` runs) until ``max_runs``.

    Examples
    --------
    >>> round_sizes(500, 5000)
    [500, 750, 1125, 1688, 2532, 3798, 5000]
    >>> round_sizes(500, 500)
    [500]
    >>> round_sizes(100, 1000, growth=2.0, group=16)
    [100, 208, 416, 832, 1000]
    """
    for name, value in (("n_runs", n_runs), ("max_runs", max_runs), ("group", group)):
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if max_runs < n_runs:
        raise ValueError(f"max_runs={max_runs} must be >= n_runs={n_runs}")
    if not (isinstance(growth, Real) and 1.0 < growth < math.inf):
        raise ValueError(f"round growth must be a finite number > 1, got {growth!r}")
    sizes = [n_runs]
    while sizes[-1] < max_runs:
        nxt = math.ceil(sizes[-1] * growth)
        nxt = math.ceil(nxt / group) * group
        sizes.append(min(max(nxt, sizes[-1] + 1), max_runs))
    return sizes
