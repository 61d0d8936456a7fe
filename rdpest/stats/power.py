"""What an audit could have detected: the power of a threshold certificate under a reference model.

An audit that finds no violation has refuted nothing; what it says about the claim depends on what
it could have seen. This module predicts, for a reference model of the scores, the probability
that a threshold test certified with Clopper–Pearson limits (the certificate of the Bernoulli
baseline and of the DV estimator's ``certificate="threshold"``) gives a bound above the claim,
and the smallest divergence detected with a target probability.

Reference model ``"gaussian_location"``: the scores without the canary are N(0, 1) and with it
N(μ, 1) (after any affine rescaling, which no threshold test sees). Its Rényi divergence is
D_α = α μ² / 2 in both directions (Gil, Alajaji & Linder 2013, the Gaussian case), and its privacy
loss is the shape of DP-SGD's: the Gaussian mechanism's (Mironov 2017, Prop. 7), which full-batch
DP-SGD with a canary composes (Dong, Roth & Su 2022, μ-GDP).

Two certificates are modelled, each with the model's exact log ratio as critic and an oracle
choice (the threshold, or the clipping window, that does best; one chosen on a training split does
slightly worse): the threshold test, by Monte Carlo over its two binomial counts with common random
numbers (so the probability is smooth in μ and in the threshold), and the variational bracket, in
a normal approximation (:class:`_BracketDesign`). How an audit's estimators and directions combine
them is :mod:`rdpest.auditing.power`'s; the prediction is checked against realised power in
benchmarks/results/auditing/power.md.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import special, stats

from rdpest.stats.bounds import MEAN_BOUND_METHODS, _clopper_pearson
from rdpest.stats.threshold_tests import bernoulli_divergences
from rdpest.utils.validation import (
    check_alpha,
    check_int,
    check_open_unit,
    check_option,
    check_positive,
    check_seed,
)

__all__ = [
    "REFERENCE_MODELS",
    "bracket_power",
    "detectable_divergence",
    "detectable_divergence_of",
    "threshold_divergence_floor",
    "threshold_power",
]

REFERENCE_MODELS = ("gaussian_location",)

# Thresholds tried (in units of the null's standard deviation, shifted with μ/2) and Monte Carlo
# draws of the counts: 2000 draws give a standard error of at most 0.011 on a probability.
_THRESHOLDS = np.linspace(-1.0, 4.0, 21)
_DRAWS = 2000


# The largest certifying sample per side the threshold power takes (the runs an audit's power
# target is searched up to, rdpest.auditing.power).
_MAX_THRESHOLD_N = 10_000_000


def _checked_claim(claim) -> float:
    return check_positive(claim, "claim", allow_zero=True)


def _checked_threshold(*design) -> tuple:
    """A threshold test's design (certifying sizes, Clopper–Pearson levels, and optionally the
    sizes of the training split that chooses the threshold), checked."""
    if len(design) not in (4, 6):
        raise ValueError(
            "threshold must be (n_p, n_q, level_p, level_q) or (n_p, n_q, level_p, level_q, "
            f"n_train_p, n_train_q), got {design!r}"
        )
    sizes = [
        check_int(n, name, 1) for n, name in zip(design[:2] + design[4:], _SIZE_NAMES, strict=False)
    ]
    if max(sizes) > _MAX_THRESHOLD_N:
        raise ValueError(
            f"n_p and n_q must be at most {_MAX_THRESHOLD_N:,} for the threshold power, got "
            f"{', '.join(str(n) for n in sizes)}"
        )
    levels = check_open_unit(design[2], "level_p"), check_open_unit(design[3], "level_q")
    return (*sizes[:2], *levels, *sizes[2:])


_SIZE_NAMES = ("n_p", "n_q", "n_train_p", "n_train_q")


def _checked_bracket(*design) -> tuple[int, int, float, str, float]:
    """A bracket certificate's design (certifying sizes, level, method, critic bound), checked."""
    if len(design) != 5:
        raise ValueError(f"bracket must be (n_p, n_q, level, method, critic_bound), got {design!r}")
    n_p, n_q, level, method, critic_bound = design
    return (
        check_int(n_p, "n_p", 2),
        check_int(n_q, "n_q", 2),
        check_open_unit(level, "level"),
        check_option(method, MEAN_BOUND_METHODS, "method"),
        check_positive(critic_bound, "critic_bound"),
    )


def _checked_divergence(divergence) -> float:
    return check_positive(divergence, "divergence", allow_zero=True)


def _uniforms(random_state: int) -> tuple[np.ndarray, np.ndarray]:
    """The common random numbers that drive the two counts."""
    rng = np.random.default_rng(random_state)
    return rng.random(_DRAWS), rng.random(_DRAWS)


class _Design:
    """One certificate design: a draw's bound is its two counts' Clopper–Pearson limits and one
    divergence. The limits are computed for the counts the draws reach only (at most
    :data:`_DRAWS` per side and shift, instead of a table of all n + 1 counts, which dominated
    the search for the runs an audit needs at millions of runs)."""

    def __init__(self, n_p, n_q, alpha, level_p, level_q, claim, random_state, train=()):
        self.n_p, self.n_q, self.alpha, self.claim = n_p, n_q, alpha, claim
        self.level_p, self.level_q = level_p, level_q
        self.u_p, self.u_q = _uniforms(random_state)
        # A threshold chosen on a training split of these sizes (empty: the oracle threshold).
        self.train = tuple(train)
        if self.train:
            rng = np.random.default_rng([random_state, 1])
            self.train_u = rng.random((2, _THRESHOLDS.size, _DRAWS))

    def tpr_lo(self, counts: np.ndarray) -> np.ndarray:
        return _limits(counts, self.n_p, self.level_p, "lower")

    def fpr_hi(self, counts: np.ndarray) -> np.ndarray:
        return _limits(counts, self.n_q, self.level_q, "upper")

    def ceiling(self) -> float:
        """The bound of perfect separation (counts n_p and 0): the most any sample gives."""
        tpr, fpr = self.tpr_lo(np.array([self.n_p])), self.fpr_hi(np.array([0]))
        return float(bernoulli_divergences(tpr, fpr, self.alpha)[0])

    def power_at(self, mu: float, offsets=_THRESHOLDS) -> tuple[float, float]:
        """Largest probability over the thresholds that the bound exceeds the claim at shift μ,
        and the threshold offset that gives it; with a training split, the probability for the
        threshold that split chooses (:meth:`chosen_power_at`, offset NaN)."""
        if self.train:
            return self.chosen_power_at(mu), math.nan
        best, best_offset = -1.0, float(offsets[0])
        for offset in offsets:
            t = mu / 2 + offset
            tpr, fpr = stats.norm.sf(t - mu), stats.norm.sf(t)
            k_p = stats.binom.ppf(self.u_p, self.n_p, tpr).astype(int)
            k_q = stats.binom.ppf(self.u_q, self.n_q, fpr).astype(int)
            bounds = bernoulli_divergences(self.tpr_lo(k_p), self.fpr_hi(k_q), self.alpha)
            power = float(np.mean(bounds > self.claim))
            if power > best:
                best, best_offset = power, float(offset)
        return max(best, 0.0), best_offset

    def chosen_power_at(self, mu: float) -> float:
        """Probability that the bound exceeds the claim at shift μ when each draw's threshold and
        side are the ones its training split certifies best (the Bernoulli baseline's
        ``threshold="split"`` search; here over the model's grid of thresholds, both sides).

        The oracle threshold of :meth:`power_at` overstated such audits' power: realised 0.73
        where it stated 0.80 (benchmarks/results/auditing/power.md); and a model that kept the
        side the shift favours overstated it where the training split is a few rows, which
        choose the wrong side about a fifth of the time. Each draw's training counts above the
        grid's thresholds are nested, as one sample's are: drawn from the highest threshold
        down, each adding a binomial count of the rows left between two thresholds (common
        random numbers, so the probability stays smooth in μ)."""
        t = mu / 2 + _THRESHOLDS
        n_tp, n_tq = self.train
        above_p = _nested_counts(n_tp, stats.norm.sf(t - mu), self.train_u[0])
        above_q = _nested_counts(n_tq, stats.norm.sf(t), self.train_u[1])
        # Rows: the "upper" tests (s > t says P), then the "lower" ones (s <= t says P).
        counts_p, counts_q = (
            np.vstack([above_p, n_tp - above_p]),
            np.vstack([above_q, n_tq - above_q]),
        )
        lo = _limits(counts_p, n_tp, self.level_p, "lower")
        hi = _limits(counts_q, n_tq, self.level_q, "upper")
        trained = bernoulli_divergences(lo.ravel(), hi.ravel(), self.alpha).reshape(lo.shape)
        # The search's ties go to the larger margin TPR_lo − FPR_hi, then the first threshold
        # and the "upper" side.
        key = np.where(np.isfinite(trained), trained, -np.inf)
        best = np.argmax(key + 1e-12 * (lo - hi), axis=0)
        chosen, upper = t[best % t.size], best < t.size
        tpr = np.where(upper, stats.norm.sf(chosen - mu), stats.norm.cdf(chosen - mu))
        fpr = np.where(upper, stats.norm.sf(chosen), stats.norm.cdf(chosen))
        k_p = stats.binom.ppf(self.u_p, self.n_p, tpr).astype(int)
        k_q = stats.binom.ppf(self.u_q, self.n_q, fpr).astype(int)
        bounds = bernoulli_divergences(self.tpr_lo(k_p), self.fpr_hi(k_q), self.alpha)
        return float(np.mean(bounds > self.claim))


def _nested_counts(n: int, survival: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Counts of one sample of size n above increasing thresholds (survival probabilities
    ``survival``, decreasing), one column per draw: the count above the highest threshold, then
    each lower one adds the rows between, Binomial(rows left, conditional probability)."""
    counts = np.empty(uniforms.shape, dtype=np.int64)
    above, above_p = np.zeros(uniforms.shape[1], dtype=np.int64), 0.0
    for k in range(survival.size - 1, -1, -1):
        step = 0.0 if above_p >= 1.0 else (survival[k] - above_p) / (1.0 - above_p)
        above = above + stats.binom.ppf(uniforms[k], n - above, min(max(step, 0.0), 1.0)).astype(
            np.int64
        )
        above_p, counts[k] = survival[k], above
    return counts


def _limits(counts: np.ndarray, n: int, level: float, side: str) -> np.ndarray:
    """Clopper–Pearson limits of an array of counts, computed once per distinct count."""
    unique, where = np.unique(counts, return_inverse=True)
    return _clopper_pearson(unique, n, level, side)[where].reshape(counts.shape)


def _log_normal_mass(a, b):
    """log(Φ(b) − Φ(a)) for a ≤ b elementwise, accurate in both tails (−inf where a = b)."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
    # Below the median take the CDFs, above it the survival functions (Φ(b) − Φ(a) =
    # S(a) − S(b)), so the larger term is never 1 − (a tiny number).
    upper = a > 0.0
    big = np.where(upper, special.log_ndtr(-a), special.log_ndtr(b))
    small = np.where(upper, special.log_ndtr(-b), special.log_ndtr(a))
    with np.errstate(divide="ignore"):
        return big + np.log1p(-np.exp(small - big))


class _BracketDesign:
    """The variational bracket certified with the exact log-ratio critic of the Gaussian location
    model, in a normal approximation.

    The critic g = log p/q is clipped to a window [lo, hi]; the certificate bounds the means of
    A = e^{(α−1)(g−hi)} over P and B = e^{α(g−hi)} over Q (rdpest.stats.certificates). Their
    moments are closed forms (the clipped log-normal); each confidence radius is the bound's own
    at the population variance (Hoeffding; empirical Bernstein's; for betting, empirical
    Bernstein's leading term with a range term of a third, which betting matches or beats at these
    sizes); the certified bound's spread is the delta method's. The window is the one with the
    largest expected bound (an oracle choice, like the threshold's).
    """

    def __init__(self, n_p, n_q, alpha, level, method, critic_bound, claim):
        self.n_p, self.n_q, self.alpha, self.claim = n_p, n_q, alpha, claim
        self.level, self.method, self.bound = level, method, critic_bound

    @staticmethod
    def _moments(c, mean, sd, lo, hi):
        """E[e^{c·clip(Z, lo, hi)}] and E[e^{2c·clip(Z, lo, hi)}] for Z ~ N(mean, sd²)."""

        def moment(k):
            a, b = (lo - mean) / sd, (hi - mean) / sd
            # The unclipped part e^{k·mean + (k·sd)²/2}·(Φ(b − k·sd) − Φ(a − k·sd)), in logs: at
            # large divergences its first factor overflows while the second underflows (their
            # product, at most e^{k·hi}, is finite), and inf·0 was NaN, read as power 0.
            log_inside = k * mean + (k * sd) ** 2 / 2 + _log_normal_mass(a - k * sd, b - k * sd)
            return (
                stats.norm.cdf(a) * np.exp(k * lo) + stats.norm.sf(b) * np.exp(k * hi)
            ) + np.exp(log_inside)

        return moment(c), moment(2 * c)

    def _radius(self, variance, low, n):
        """The confidence radius of a mean of n values in [low, 1] with this variance."""
        span, log_term = 1.0 - low, math.log(1.0 / self.level)
        if self.method == "hoeffding":
            return span * np.sqrt(log_term / (2.0 * n))
        if self.method == "bernstein":
            log_term = math.log(2.0 / self.level)
            return np.sqrt(2.0 * variance * log_term / n) + 7.0 * span * log_term / (3.0 * (n - 1))
        return np.sqrt(2.0 * variance * log_term / n) + span * log_term / (3.0 * n)

    def power_at(self, mu: float) -> float:
        alpha, half = self.alpha, mu * mu / 2
        if mu <= 0.0:
            return 0.0
        z = np.linspace(-3.0, 3.0, 13)
        his = np.clip(half + mu * z, -self.bound, self.bound)[:, None]
        los = np.clip(-half + mu * z, -self.bound, self.bound)[None, :]
        his, los = np.broadcast_arrays(his, los)
        ok = his - los > 1e-6
        his, los = his[ok], los[ok]
        # A = e^{(α−1)(g−hi)} over P (g ~ N(μ²/2, μ²)); B = e^{α(g−hi)} over Q (N(−μ²/2, μ²)).
        a1, a2 = self._moments(alpha - 1.0, half - his, mu, los - his, 0.0)
        b1, b2 = self._moments(alpha, -half - his, mu, los - his, 0.0)
        var_a, var_b = np.maximum(a2 - a1**2, 0.0), np.maximum(b2 - b1**2, 0.0)
        a_low = a1 - self._radius(var_a, np.exp((alpha - 1.0) * (los - his)), self.n_p)
        b_high = b1 + self._radius(var_b, np.exp(alpha * (los - his)), self.n_q)
        usable = (a_low > 0.0) & (b_high > 0.0)
        if not np.any(usable):
            return 0.0
        a_low, b_high = a_low[usable], np.minimum(b_high[usable], 1.0)
        mean = alpha / (alpha - 1.0) * np.log(a_low) - np.log(b_high)
        spread = np.sqrt(
            (alpha / (alpha - 1.0)) ** 2 * var_a[usable] / (self.n_p * a_low**2)
            + var_b[usable] / (self.n_q * b_high**2)
        )
        best = int(np.argmax(mean))
        return float(stats.norm.cdf((mean[best] - self.claim) / max(spread[best], 1e-12)))


def threshold_power(
    divergence: float,
    n_p: int,
    n_q: int,
    alpha: float,
    level_p: float,
    level_q: float,
    claim: float,
    random_state: int = 0,
    training: tuple | None = None,
) -> float:
    """Probability that a threshold test certifies a bound above ``claim`` when the scores follow
    the Gaussian location model at D_α = ``divergence``.

    ``n_p``, ``n_q``: the certifying sample sizes; ``level_p``, ``level_q``: the Clopper–Pearson
    levels of the two rates. ``training``: None for the best threshold (an oracle choice), or
    (n_train_p, n_train_q), the sizes of a training split on which the threshold is chosen (as
    the Bernoulli baseline's ``threshold="split"`` does; lower power).

    Examples
    --------
    >>> low = threshold_power(0.5, 250, 250, 2.0, 0.0125, 0.0125, claim=0.25)
    >>> high = threshold_power(2.0, 250, 250, 2.0, 0.0125, 0.0125, claim=0.25)
    >>> 0.0 <= low < high <= 1.0
    True
    >>> chosen = threshold_power(2.0, 250, 250, 2.0, 0.0125, 0.0125, 0.25, training=(250, 250))
    >>> chosen <= high
    True
    """
    alpha, claim = check_alpha(alpha), _checked_claim(claim)
    design = _checked_threshold(n_p, n_q, level_p, level_q, *(training or ()))
    mu = math.sqrt(2.0 * _checked_divergence(divergence) / alpha)
    seed = check_seed(random_state, "random_state")
    return _Design(*design[:2], alpha, *design[2:4], claim, seed, design[4:]).power_at(mu)[0]


def bracket_power(
    divergence: float,
    n_p: int,
    n_q: int,
    alpha: float,
    level: float,
    claim: float,
    method: str = "betting",
    critic_bound: float = 20.0,
) -> float:
    """Probability (normal approximation) that the variational bracket with the exact log-ratio
    critic certifies a bound above ``claim`` when the scores follow the Gaussian location model
    at D_α = ``divergence`` (:class:`_BracketDesign`). ``level``: each moment's confidence level
    (β/2 for the Bonferroni region; the joint region's design point, the square root of
    :func:`rdpest.stats.regions.joint_level`, for the joint one).

    Examples
    --------
    >>> bracket_power(1.5, 1000, 1000, 2.0, 0.00625, claim=1.0) < 0.5
    True
    >>> bracket_power(4.0, 1000, 1000, 2.0, 0.00625, claim=1.0) > 0.99
    True
    """
    alpha, claim = check_alpha(alpha), _checked_claim(claim)
    n_p, n_q, level, method, critic_bound = _checked_bracket(n_p, n_q, level, method, critic_bound)
    design = _BracketDesign(n_p, n_q, alpha, level, method, critic_bound, claim)
    return design.power_at(math.sqrt(2.0 * _checked_divergence(divergence) / alpha))


def detectable_divergence(
    n_p: int,
    n_q: int,
    alpha: float,
    level_p: float,
    level_q: float,
    claim: float,
    power: float = 0.8,
    random_state: int = 0,
) -> float:
    """The smallest D_α of the Gaussian location model that a threshold test certifies above
    ``claim`` with probability at least ``power``; ``inf`` if no divergence is (the claim is at
    or above what these sample sizes can certify).

    Computed by bisection on the shift μ (the probability grows with μ) to a relative precision
    of 2% in D_α.

    Examples
    --------
    >>> d = detectable_divergence(250, 250, 2.0, 0.0125, 0.0125, claim=1.0)
    >>> 1.0 < d < 20.0
    True
    >>> detectable_divergence(5, 5, 2.0, 0.0125, 0.0125, claim=1.0)
    inf
    """
    return detectable_divergence_of(
        alpha, claim, threshold=(n_p, n_q, level_p, level_q), power=power, random_state=random_state
    )


def detectable_divergence_of(
    alpha: float,
    claim: float,
    threshold: tuple | None = None,
    bracket: tuple | None = None,
    power: float = 0.8,
    random_state: int = 0,
) -> float:
    """The smallest D_α of the Gaussian location model that an estimator certifies above
    ``claim`` with probability at least ``power``, through whichever of its certificates does
    better at each divergence.

    ``threshold``: (n_p, n_q, level_p, level_q), a threshold test with Clopper–Pearson limits
    at the best threshold, or (n_p, n_q, level_p, level_q, n_train_p, n_train_q), at the
    threshold a training split of those sizes chooses (:func:`threshold_power`'s ``training``);
    ``bracket``: (n_p, n_q, level, method, critic_bound), the variational bracket with the exact
    log-ratio critic, each moment at confidence level ``level`` (:class:`_BracketDesign`'s
    normal approximation). ``inf`` if neither can.

    Examples
    --------
    >>> thr = detectable_divergence_of(2.0, 1.0, threshold=(1000, 1000, 0.00625, 0.00625))
    >>> both = detectable_divergence_of(2.0, 1.0, threshold=(1000, 1000, 0.00625, 0.00625),
    ...                                 bracket=(1000, 1000, 0.00625, "betting", 20.0))
    >>> 1.0 < both <= thr
    True
    """
    alpha, claim = check_alpha(alpha), _checked_claim(claim)
    power = check_open_unit(power, "power")
    threshold = None if threshold is None else _checked_threshold(*threshold)
    bracket = None if bracket is None else _checked_bracket(*bracket)
    return _detectable(
        threshold, bracket, alpha, claim, power, check_seed(random_state, "random_state")
    )


def threshold_divergence_floor(alpha: float, claim: float) -> float:
    """A D_α of the Gaussian location model below which the model's threshold tests never
    certify above ``claim``, at any number of runs: there, every threshold the model tries
    separates Bernoulli laws whose D_α is at most the claim, so a valid certificate exceeds
    the claim with probability at most its level (both Clopper–Pearson limits hold, and the
    bound is then at most that divergence). ``inf`` beyond a shift of 64 standard deviations.

    Parameters
    ----------
    alpha : float
        Rényi order, > 1.
    claim : float
        The claimed ε_α, >= 0.

    Returns
    -------
    float
        The floor, to a relative 1e-3 in the shift (the bisection's lower end, where the
        thresholds' largest divergence is still at most the claim).

    Examples
    --------
    >>> floor = threshold_divergence_floor(2.0, 1.0)
    >>> 1.0 < floor < 3.0
    True
    """
    return _threshold_floor(check_alpha(alpha), _checked_claim(claim))


@functools.lru_cache(maxsize=256)
def _threshold_floor(alpha: float, claim: float) -> float:
    """:func:`threshold_divergence_floor` checked. The largest Bernoulli divergence over the
    thresholds (:data:`_THRESHOLDS`) grows with the shift μ (each threshold's TPR rises and FPR
    falls), so a bisection in μ finds where it passes the claim."""

    def largest(mu: float) -> float:
        t = mu / 2 + _THRESHOLDS
        return float(bernoulli_divergences(stats.norm.sf(t - mu), stats.norm.sf(t), alpha).max())

    lo, hi = 0.0, 1.0
    while largest(hi) <= claim:
        lo, hi = hi, 2.0 * hi
        if hi > 64.0:
            return math.inf
    while hi - lo > 1e-3 * hi:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if largest(mid) > claim else (mid, hi)
    return alpha * lo**2 / 2.0


@functools.lru_cache(maxsize=256)
def _detectable(threshold, bracket, alpha, claim, power, random_state) -> float:
    """:func:`detectable_divergence_of` checked; deterministic, so cached (audits of one design
    ask again every round)."""
    thr = (
        None
        if threshold is None
        else _Design(*threshold[:2], alpha, *threshold[2:4], claim, random_state, threshold[4:])
    )
    brk = None if bracket is None else _BracketDesign(*bracket[:2], alpha, *bracket[2:], claim)
    if thr is None and brk is None:
        return math.inf
    if brk is None and thr.ceiling() <= claim:  # perfect separation is the most it can give
        return math.inf
    # The best threshold moves little between nearby shifts: after a search over the whole grid,
    # each step searches the grid's neighbourhood (±3 points) of the last best threshold, and
    # the whole grid again when the best lies on the neighbourhood's edge.
    last = {"offset": None}

    def threshold_power_at(mu: float) -> float:
        if thr.train:  # the training split chooses among the whole grid
            return thr.chosen_power_at(mu)
        if last["offset"] is not None:
            i = int(np.argmin(np.abs(_THRESHOLDS - last["offset"])))
            near = _THRESHOLDS[max(i - 3, 0) : i + 4]
            value, offset = thr.power_at(mu, near)
            if near[0] < offset < near[-1] or offset in (_THRESHOLDS[0], _THRESHOLDS[-1]):
                last["offset"] = offset
                return value
        value, last["offset"] = thr.power_at(mu)
        return value

    def enough(mu: float) -> bool:
        if brk is not None and brk.power_at(mu) >= power:
            return True
        return thr is not None and threshold_power_at(mu) >= power

    lo, hi = 0.0, max(1.0, math.sqrt(2.0 * claim / alpha))
    while not enough(hi):
        lo, hi = hi, 2.0 * hi
        if hi > 64.0:  # D_α > 2000 α: every draw is perfectly separated already
            return math.inf
    while hi - lo > 0.01 * hi:  # D ∝ μ², so 1% in μ is 2% in D
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return alpha * hi**2 / 2.0
