"""Confidence bounds for means and proportions: the certificates behind every lower bound.

Pure functions with no estimator state. Each bound is one-sided at error level ``beta``: a lower
bound ``L`` computed from i.i.d. variables satisfies ``P(L > E[X]) <= beta``, and likewise for upper
bounds. Variables are assumed to lie in a known interval ``[lower, upper]``.

- Hoeffding (Hoeffding 1963, Thm 2): radius ``(upper - lower) * sqrt(log(1/beta) / (2 n))``.
- Empirical Bernstein (Maurer & Pontil 2009, Thm 4): adapts to the sample variance.
- Betting (Waudby-Smith & Ramdas 2023, "Estimating means of bounded random variables by betting",
  JRSS-B, Sec. 4-5): inverts a nonnegative capital process with predictable plug-in bets;
  usually the tightest of the three.
- Clopper–Pearson (Clopper & Pearson 1934) for binomial proportions, via
  ``scipy.special.betaincinv``.
- Markov's inequality for nonnegative variables with no upper bound (Kim, Varshney & Alabi 2026,
  Thm 3.1 uses it for the Rényi moment).

Examples
--------
>>> import numpy as np
>>> x = np.random.default_rng(0).uniform(size=2000)
>>> lo = mean_lower_bound(x, beta=0.05, method="betting")
>>> round(lo, 2) <= 0.5 <= round(mean_upper_bound(x, beta=0.05), 2)
True
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from rdpest.utils.validation import (
    check_beta,
    check_counts,
    check_finite_array,
    check_levels,
    check_option,
    check_real,
    check_seed,
    finite_result,
)

__all__ = [
    "MEAN_BOUND_METHODS",
    "bernstein_lower_bound",
    "betting_lower_bound",
    "clopper_pearson_lower_bound",
    "clopper_pearson_upper_bound",
    "hoeffding_lower_bound",
    "markov_lower_bound",
    "mean_lower_bound",
    "mean_lower_bounds",
    "mean_upper_bound",
    "mean_upper_bounds",
]

#: Names accepted by ``method`` of :func:`mean_lower_bound` and :func:`mean_upper_bound`.
MEAN_BOUND_METHODS = ("betting", "bernstein", "hoeffding")

# Largest bet as a fraction of the distance to ruin: WSR (2023, Sec. 5.1) truncate predictable
# plug-in bets at c/m with c in {1/2, 3/4}; c < 1 keeps every factor of the capital >= 1 - c > 0.
_BET_TRUNCATION = 0.75
_BISECTION_STEPS = 60


def _checked(x, beta, lower, upper) -> tuple[np.ndarray, float, float, float]:
    """(x, beta, lower, upper) validated, in the order the private bound functions take them."""
    beta = check_beta(beta)
    x, lower, upper = _check_sample(x, lower, upper)
    return x, beta, lower, upper


def _check_sample(x, lower, upper, name: str = "x") -> tuple[np.ndarray, float, float]:
    """Validate samples and their known range [lower, upper] (the public functions' check)."""
    x = check_finite_array(x, name)
    lower = check_real(lower, "lower")
    upper = check_real(upper, "upper")
    if not upper > lower:
        raise ValueError(f"upper must be greater than lower, got lower={lower}, upper={upper}")
    # The bounds rescale by upper − lower and reflect through lower + upper: both must be floats.
    if not (math.isfinite(upper - lower) and math.isfinite(upper + lower)):
        raise ValueError(
            f"the range [lower, upper] = [{lower}, {upper}] is too wide: upper - lower or "
            "lower + upper overflows a float; rescale x and its range"
        )
    # A tiny tolerance absorbs rounding of values computed exactly at an endpoint.
    tol = 1e-12 * max(upper - lower, abs(lower), abs(upper))
    if x.min() < lower - tol or x.max() > upper + tol:
        raise ValueError(
            f"{name} must lie in [lower, upper] = [{lower}, {upper}], "
            f"got values in [{x.min()}, {x.max()}]"
        )
    return x, lower, upper


def _to_unit(x: np.ndarray, lower: float, upper: float) -> np.ndarray:
    """Map values from [lower, upper] onto [0, 1] (clipping the rounding at the endpoints)."""
    return np.clip((x - lower) / (upper - lower), 0.0, 1.0)


# The private bounds below trust their arguments: x a float array inside [lower, upper], beta in
# (0, 1), lower < upper floats. The public functions check and then call them; so do other
# modules of rdpest whose values lie in the range by construction.


def _hoeffding_lower(x: np.ndarray, beta: float, lower: float, upper: float) -> float:
    u = _to_unit(x, lower, upper)
    radius = math.sqrt(math.log(1.0 / beta) / (2.0 * u.size))
    return lower + (upper - lower) * max(0.0, float(u.mean()) - radius)


def _bernstein_lower(x: np.ndarray, beta: float, lower: float, upper: float) -> float:
    u = _to_unit(x, lower, upper)
    n = u.size
    if n < 2:
        raise ValueError("x needs at least 2 values for the empirical Bernstein bound")
    log_term = math.log(2.0 / beta)
    variance = float(u.var(ddof=1))
    radius = math.sqrt(2.0 * variance * log_term / n) + 7.0 * log_term / (3.0 * (n - 1))
    return lower + (upper - lower) * max(0.0, float(u.mean()) - radius)


def _betting_lower(
    x: np.ndarray, beta: float, lower: float, upper: float, random_state: int | None = None
) -> float:
    u = _to_unit(x, lower, upper)
    if random_state is not None:
        u = u[np.random.default_rng(random_state).permutation(u.size)]
    bound = _betting_unit_bounds(u, _predictable_bets(u, beta), np.array([beta]))[0]
    return lower + (upper - lower) * float(bound)


@finite_result()
def hoeffding_lower_bound(x, beta: float, lower: float = 0.0, upper: float = 1.0) -> float:
    """Hoeffding lower confidence bound for the mean of i.i.d. variables in [lower, upper].

    ``P(bound > E[X]) <= beta`` (Hoeffding 1963, Thm 2).

    Examples
    --------
    >>> round(hoeffding_lower_bound([0.5] * 100, beta=0.05), 4)
    0.3776
    """
    return _hoeffding_lower(*_checked(x, beta, lower, upper))


@finite_result()
def bernstein_lower_bound(x, beta: float, lower: float = 0.0, upper: float = 1.0) -> float:
    """Empirical Bernstein lower confidence bound (Maurer & Pontil 2009, Thm 4).

    For variables in [0, 1]: ``mean - sqrt(2 V log(2/beta) / n) - 7 log(2/beta) / (3 (n - 1))``
    with ``V`` the unbiased sample variance; rescaled for [lower, upper]. Needs n >= 2.

    Examples
    --------
    >>> round(bernstein_lower_bound([0.5] * 100, beta=0.05), 4)
    0.4131
    """
    return _bernstein_lower(*_checked(x, beta, lower, upper))


def _betting_log_capital_max(u: np.ndarray, m: float, bets: np.ndarray) -> float:
    """max_t log K_t(m) for K_t(m) = prod_{i<=t} (1 + lambda_i(m) (u_i - m)), lambda_i >= 0."""
    lam = bets if m <= 0.0 else np.minimum(bets, _BET_TRUNCATION / m)
    return float(np.max(np.cumsum(np.log1p(lam * (u - m)))))


def _betting_log_capital_max_many(u: np.ndarray, ms: np.ndarray, bets: np.ndarray) -> np.ndarray:
    """:func:`_betting_log_capital_max` for several candidate means m > 0 at once (same sums)."""
    ms = np.asarray(ms, dtype=float)[None, :]
    lam = np.minimum(bets[:, None], _BET_TRUNCATION / ms)
    return np.max(np.cumsum(np.log1p(lam * (u[:, None] - ms)), axis=0), axis=0)


def _predictable_bets(u: np.ndarray, beta: float) -> np.ndarray:
    """Predictable plug-in bets for a fixed sample size (WSR 2023, eqs. (26)-(27)).

    lambda_t = sqrt(2 log(1/beta) / (n sigma2_{t-1})), where sigma2_{t-1} is a regularised running
    variance of the first t - 1 values (prior mean 1/2, prior variance 1/4).
    """
    n = u.size
    t = np.arange(1, n + 1, dtype=np.float64)
    running_mean = (0.5 + np.cumsum(u)) / (t + 1.0)  # mu_hat_t uses values up to t
    previous_mean = np.concatenate(([0.5], running_mean[:-1]))  # predictable: up to t - 1
    sq = (u - previous_mean) ** 2
    running_var = (0.25 + np.cumsum(sq)) / (t + 1.0)
    previous_var = np.concatenate(([0.25], running_var[:-1]))
    return np.sqrt(2.0 * math.log(1.0 / beta) / (n * previous_var))


@finite_result()
def betting_lower_bound(
    x, beta: float, lower: float = 0.0, upper: float = 1.0, random_state: int | None = None
) -> float:
    """Betting lower confidence bound (Waudby-Smith & Ramdas 2023) for variables in [lower, upper].

    For each candidate mean m a gambler bets on ``X > m`` with the capital process
    ``K_t(m) = prod (1 + lambda_i (X_i - m))``; under ``E[X] <= m`` it is a nonnegative
    supermartingale, so by Ville's inequality ``P(max_t K_t(m) >= 1/beta) <= beta``. The bound is
    the smallest m not rejected (K_t(m) is non-increasing in m, so the rejected set is an interval).

    The bets are predictable, so the values are visited in sequence: in the order given, or
    permuted by a permutation drawn from ``random_state``. Validity needs an i.i.d. SEQUENCE: the
    order of ``x`` must not depend on the values (never pass sorted data). Sorting the values and
    then applying a fixed permutation would make the bound independent of the input order, but it
    makes the sequence a fixed function of the order statistics, no longer exchangeable, and
    breaks the guarantee: Ville's inequality needs the bets to be predictable from the values
    seen so far, and the order statistics reveal the values still to come.

    Examples
    --------
    >>> x = np.random.default_rng(1).beta(2, 5, size=1000)  # mean 2/7
    >>> round(betting_lower_bound(x, beta=0.05), 3) < 2 / 7
    True
    """
    if random_state is not None:
        random_state = check_seed(random_state, "random_state")
    return _betting_lower(*_checked(x, beta, lower, upper), random_state)


def _betting_unit_bounds(u: np.ndarray, bets: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Betting lower bounds on [0, 1] at several levels: the largest m rejected at each level.

    Bisection for every level at once; the capital is non-increasing in m, so each level's
    rejected set is an interval [0, bound).
    """
    thresholds = np.log(1.0 / levels)
    lo = np.zeros(levels.size)
    hi = np.ones(levels.size)
    rejected_at_zero = _betting_log_capital_max(u, 0.0, bets) >= thresholds
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        rejected = _betting_log_capital_max_many(u, mid, bets) >= thresholds
        lo = np.where(rejected, mid, lo)  # mid rejected: the bound lies above it
        hi = np.where(rejected, hi, mid)
    return np.where(rejected_at_zero, lo, 0.0)


_LOWER_BOUNDS = {
    "betting": _betting_lower,
    "bernstein": _bernstein_lower,
    "hoeffding": _hoeffding_lower,
}


def _check_method(method) -> str:
    return check_option(method, MEAN_BOUND_METHODS, "method")


def _check_levels(levels) -> np.ndarray:
    return check_levels(levels)


def _mean_lower(x: np.ndarray, beta: float, lower: float, upper: float, method: str) -> float:
    return _LOWER_BOUNDS[method](x, beta, lower, upper)


def _mean_upper(x: np.ndarray, beta: float, lower: float, upper: float, method: str) -> float:
    # The lower bound of the reflected variables lower + upper − X.
    return lower + upper - _mean_lower(lower + upper - x, beta, lower, upper, method)


def _mean_lowers(
    x: np.ndarray, levels: np.ndarray, lower: float, upper: float, method: str, design: float
) -> np.ndarray:
    if method != "betting":
        return np.array([_LOWER_BOUNDS[method](x, float(lv), lower, upper) for lv in levels])
    u = _to_unit(x, lower, upper)
    bets = _predictable_bets(u, design)  # values in the order given, see betting_lower_bound
    return lower + (upper - lower) * _betting_unit_bounds(u, bets, levels)


def _mean_uppers(
    x: np.ndarray, levels: np.ndarray, lower: float, upper: float, method: str, design: float
) -> np.ndarray:
    reflected = _mean_lowers(lower + upper - x, levels, lower, upper, method, design)
    return lower + upper - reflected


@finite_result()
def mean_lower_bound(
    x, beta: float, lower: float = 0.0, upper: float = 1.0, method: str = "betting"
) -> float:
    """One-sided (1 - beta) lower confidence bound for the mean of i.i.d. variables in [a, b].

    ``method`` is one of ``"betting"`` (default), ``"bernstein"`` or ``"hoeffding"``.

    Examples
    --------
    >>> x = np.full(400, 0.3)
    >>> mean_lower_bound(x, 0.05, method="betting") > mean_lower_bound(x, 0.05, method="hoeffding")
    True
    """
    method = _check_method(method)
    return _mean_lower(*_checked(x, beta, lower, upper), method)


@finite_result()
def mean_upper_bound(
    x, beta: float, lower: float = 0.0, upper: float = 1.0, method: str = "betting"
) -> float:
    """One-sided (1 - beta) upper confidence bound: the lower bound of the reflected variables.

    Examples
    --------
    >>> round(mean_upper_bound([0.5] * 100, beta=0.05, method="hoeffding"), 4)
    0.6224
    """
    method = _check_method(method)
    return _mean_upper(*_checked(x, beta, lower, upper), method)


@finite_result()
def mean_lower_bounds(
    x,
    levels,
    lower: float = 0.0,
    upper: float = 1.0,
    method: str = "betting",
    design_level: float = 0.05,
) -> np.ndarray:
    """Lower confidence bounds at several levels from ONE nested family of bounds.

    Each entry ``i`` is a (1 - ``levels[i]``) lower bound, and the bounds come from a single p-value
    function of the candidate mean, so they are nested (a smaller level gives a smaller bound). That
    is what a joint confidence region built from these bounds needs
    (:func:`rdpest.stats.certificates.joint_level`): one valid p-value per mean, not a separately
    tuned bound per level. Hoeffding's and the empirical Bernstein bounds are nested as they stand.
    The betting bound is made nested by fixing its bets, tuned for ``design_level``, whatever level
    is asked: the p-value of a candidate mean m is then 1 / max_t K_t(m) (Ville's inequality holds
    for any predictable bets, Waudby-Smith & Ramdas 2023, Sec. 4).

    Parameters
    ----------
    x : array-like of shape (n,)
        I.i.d. values in [lower, upper], in an order that does not depend on their values (the
        betting bound visits them in sequence; see :func:`betting_lower_bound`).
    levels : array-like of floats in (0, 1)
        The error levels.
    lower, upper : float
        The known range of the values.
    method : {"betting", "bernstein", "hoeffding"}
    design_level : float in (0, 1), default 0.05
        The level the betting strategy is tuned for (ignored by the other methods).

    Returns
    -------
    numpy.ndarray of shape (len(levels),)

    Examples
    --------
    >>> x = np.random.default_rng(0).uniform(size=500)
    >>> lo = mean_lower_bounds(x, [0.001, 0.01, 0.1])
    >>> bool(lo[0] <= lo[1] <= lo[2] < x.mean())
    True
    """
    levels = _check_levels(levels)
    method = _check_method(method)
    if method == "betting":
        design_level = check_beta(design_level, "design_level")
    x, lower, upper = _check_sample(x, lower, upper)
    return _mean_lowers(x, levels, lower, upper, method, design_level)


@finite_result()
def mean_upper_bounds(
    x,
    levels,
    lower: float = 0.0,
    upper: float = 1.0,
    method: str = "betting",
    design_level: float = 0.05,
) -> np.ndarray:
    """Upper confidence bounds at several levels, nested (:func:`mean_lower_bounds` reflected).

    Examples
    --------
    >>> x = np.random.default_rng(0).uniform(size=500)
    >>> up = mean_upper_bounds(x, [0.001, 0.1])
    >>> bool(up[0] >= up[1] > x.mean())
    True
    """
    levels = _check_levels(levels)
    method = _check_method(method)
    if method == "betting":
        design_level = check_beta(design_level, "design_level")
    x, lower, upper = _check_sample(x, lower, upper)
    return _mean_uppers(x, levels, lower, upper, method, design_level)


# The relative margin by which each Clopper–Pearson limit is moved outwards (about seven times
# the largest error of scipy's incomplete-beta inverses found at extreme n, 1.4e-8 relative at
# n = 1e9; see _clopper_pearson).
_CP_MARGIN = 1e-7


def _clopper_pearson(successes, trials: int, levels, side: str) -> np.ndarray:
    """Clopper–Pearson limits (Clopper & Pearson 1934), vectorised and unchecked.

    The one place the beta quantiles are computed. ``successes`` is an integer or an array of
    counts in [0, trials], ``levels`` a level in (0, 1) or an array of them (broadcast against the
    counts). ``side="lower"``: the ``level`` quantile of Beta(k, n − k + 1), 0 where k = 0;
    ``side="upper"``: the ``1 − level`` quantile of Beta(k + 1, n − k), 1 where k = n. Each is a
    one-sided (1 − level) confidence limit, nested in the level. Returns an array of the
    broadcast shape.
    """
    k, levels = np.broadcast_arrays(np.asarray(successes), np.asarray(levels, dtype=float))
    # The quantiles are computed by scipy.special's inverses of the regularised incomplete beta
    # function, never through 1 − level (it rounds to 1 below 1e-16), nor by stats.beta.ppf
    # (its root finder stopped short below about 1e-90, returning lower limits whose tail
    # exceeded the level up to 4e7-fold). Each limit is computed directly where it is below 1/2
    # and as 1 − its complement (by the symmetry of the beta law) above, so that neither side
    # cancels: 1 − (1 − limit) rounded 4.7e-16 (k = 1 of n = 1e16) to 4.4e-16, not a bound, and
    # a lower limit near 1 taken directly lost its last digits the same way. The inverses are
    # accurate to about 1e-8 relative at extreme n (1.4e-8 off for k = 1 of n = 1e9 at level
    # 0.3, whose tail was then 7e-9 above the level): each limit is moved outwards by
    # _CP_MARGIN (relative) and one float.
    # Below about 1e-200 the inverses can return NaN: read as the trivial limit (0 or 1).
    if side == "lower":
        out = np.zeros(k.shape)
        inside = k > 0
        n_k, lv = trials - k[inside], levels[inside]
        direct = np.nan_to_num(special.betaincinv(k[inside], n_k + 1, lv), nan=0.0)
        complement = np.nan_to_num(special.betainccinv(n_k + 1, k[inside], lv), nan=1.0)
        limit = np.where(
            direct <= 0.5, direct * (1.0 - _CP_MARGIN), 1.0 - complement * (1.0 + _CP_MARGIN)
        )
        out[inside] = np.maximum(0.0, np.nextafter(limit, -1.0))
    else:
        out = np.ones(k.shape)
        inside = k < trials
        n_k, lv = trials - k[inside], levels[inside]
        direct = np.nan_to_num(special.betainccinv(k[inside] + 1, n_k, lv), nan=1.0)
        complement = np.nan_to_num(special.betaincinv(n_k, k[inside] + 1, lv), nan=0.0)
        limit = np.where(
            direct < 0.5, direct * (1.0 + _CP_MARGIN), 1.0 - complement * (1.0 - _CP_MARGIN)
        )
        out[inside] = np.minimum(1.0, np.nextafter(limit, 2.0))
    return out


@finite_result()
def clopper_pearson_lower_bound(successes: int, trials: int, beta: float) -> float:
    """Exact one-sided (1 - beta) lower bound on a binomial proportion (Clopper & Pearson 1934).

    The ``beta`` quantile of Beta(k, n - k + 1); 0 when k = 0.

    Examples
    --------
    >>> round(clopper_pearson_lower_bound(50, 100, 0.05), 4)
    0.4136
    """
    k, n = check_counts(successes, trials)
    beta = check_beta(beta)
    return float(_clopper_pearson(k, n, beta, "lower"))


@finite_result()
def clopper_pearson_upper_bound(successes: int, trials: int, beta: float) -> float:
    """Exact one-sided (1 - beta) upper bound on a binomial proportion (Clopper & Pearson 1934).

    The ``1 - beta`` quantile of Beta(k + 1, n - k); 1 when k = n.

    Examples
    --------
    >>> round(clopper_pearson_upper_bound(50, 100, 0.05), 4)
    0.5864
    """
    k, n = check_counts(successes, trials)
    beta = check_beta(beta)
    return float(_clopper_pearson(k, n, beta, "upper"))


@finite_result()
def markov_lower_bound(x, beta: float) -> float:
    """Markov lower confidence bound for the mean of nonnegative i.i.d. variables: ``beta * mean``.

    Markov's inequality on the sample mean gives ``P(mean >= E[X] / beta) <= beta``. It needs no
    upper bound on the variables, which is why the Rényi-moment bound of Kim, Varshney & Alabi
    (2026, Thm 3.1) uses it: ``log(beta)`` becomes the ``-log(1/beta)/(alpha - 1)`` term.

    Examples
    --------
    >>> markov_lower_bound([1.0, 3.0], beta=0.1)
    0.2
    """
    beta = check_beta(beta)
    x = check_finite_array(x, "x")
    if x.min() < 0:
        raise ValueError("x must be nonnegative for the Markov bound")
    with np.errstate(over="ignore"):
        mean = float(x.mean())
    if not math.isfinite(mean):
        # The sum overflowed: the mean of x / max(x) times max(x) cannot (it is <= max(x)).
        peak = float(x.max())
        mean = min(peak, peak * float(np.mean(x / peak)))
    return beta * mean
