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

The prediction fixes the test's threshold at the value that maximises the power (an oracle
choice; a threshold chosen on a training split does slightly worse), and certifies one direction
with Bonferroni limits (β/2 per rate); a real audit also certifies the reverse direction, may use
the joint confidence region and the variational bracket, all of which only add power. The
probability is computed by Monte Carlo over the two binomial counts with common random numbers,
so it is smooth in μ and in the threshold.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import stats

from rdpest.stats.bounds import _clopper_pearson
from rdpest.stats.threshold_tests import bernoulli_divergences
from rdpest.utils.validation import check_alpha, check_int, check_open_unit

__all__ = ["REFERENCE_MODELS", "detectable_divergence", "threshold_power"]

REFERENCE_MODELS = ("gaussian_location",)

# Thresholds tried (in units of the null's standard deviation, shifted with μ/2) and Monte Carlo
# draws of the counts: 2000 draws give a standard error of at most 0.011 on a probability.
_THRESHOLDS = np.linspace(-1.0, 4.0, 21)
_DRAWS = 2000


def _bounds_of_counts(k_p, n_p, k_q, n_q, alpha, level_p, level_q) -> np.ndarray:
    """The threshold certificate's bound from counts (vectorised): D_α between the Clopper–Pearson
    lower limit of the TPR and the upper limit of the FPR (0 unless the first is larger)."""
    tpr_lo = _clopper_pearson(k_p, n_p, level_p, "lower")
    fpr_hi = _clopper_pearson(k_q, n_q, level_q, "upper")
    return bernoulli_divergences(tpr_lo, fpr_hi, alpha)


def _checked_design(n_p, n_q, alpha, level_p, level_q, claim) -> tuple:
    """The certificate's design (sizes, order, levels, claim), each checked."""
    claim = float(claim)
    if not (math.isfinite(claim) and claim >= 0.0):
        raise ValueError(f"claim must be a finite number >= 0, got {claim!r}")
    return (
        check_int(n_p, "n_p", 1),
        check_int(n_q, "n_q", 1),
        check_alpha(alpha),
        check_open_unit(level_p, "level_p"),
        check_open_unit(level_q, "level_q"),
        claim,
    )


def _uniforms(random_state: int) -> tuple[np.ndarray, np.ndarray]:
    """The common random numbers that drive the two counts."""
    rng = np.random.default_rng(random_state)
    return rng.random(_DRAWS), rng.random(_DRAWS)


def _power_at(mu, n_p, n_q, alpha, level_p, level_q, claim, uniforms) -> float:
    """Largest probability over the thresholds that the bound exceeds ``claim`` at shift μ."""
    u_p, u_q = uniforms
    best = 0.0
    for offset in _THRESHOLDS:
        t = mu / 2 + offset
        tpr, fpr = stats.norm.sf(t - mu), stats.norm.sf(t)
        k_p = stats.binom.ppf(u_p, n_p, tpr).astype(int)
        k_q = stats.binom.ppf(u_q, n_q, fpr).astype(int)
        bounds = _bounds_of_counts(k_p, n_p, k_q, n_q, alpha, level_p, level_q)
        best = max(best, float(np.mean(bounds > claim)))
    return best


def threshold_power(
    divergence: float,
    n_p: int,
    n_q: int,
    alpha: float,
    level_p: float,
    level_q: float,
    claim: float,
    random_state: int = 0,
) -> float:
    """Probability that a threshold test certifies a bound above ``claim`` when the scores follow
    the Gaussian location model at D_α = ``divergence``.

    ``n_p``, ``n_q``: the certifying sample sizes; ``level_p``, ``level_q``: the Clopper–Pearson
    levels of the two rates.

    Examples
    --------
    >>> low = threshold_power(0.5, 250, 250, 2.0, 0.0125, 0.0125, claim=0.25)
    >>> high = threshold_power(2.0, 250, 250, 2.0, 0.0125, 0.0125, claim=0.25)
    >>> 0.0 <= low < high <= 1.0
    True
    """
    design = _checked_design(n_p, n_q, alpha, level_p, level_q, claim)
    if not divergence >= 0.0:
        raise ValueError(f"divergence must be >= 0, got {divergence!r}")
    mu = math.sqrt(2.0 * divergence / design[2])
    return _power_at(mu, *design, _uniforms(random_state))


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
    design = _checked_design(n_p, n_q, alpha, level_p, level_q, claim)
    power = check_open_unit(power, "power")
    return _detectable(*design, power, int(random_state))


@functools.lru_cache(maxsize=128)
def _detectable(n_p, n_q, alpha, level_p, level_q, claim, power, random_state) -> float:
    """:func:`detectable_divergence` checked; deterministic, so cached (audits of one design)."""
    # Perfect separation is the most any sample gives: at or below the claim, nothing is seen.
    ceiling = float(_bounds_of_counts(n_p, n_p, 0, n_q, alpha, level_p, level_q))
    if ceiling <= claim:
        return math.inf
    uniforms = _uniforms(random_state)

    def enough(mu: float) -> bool:
        return _power_at(mu, n_p, n_q, alpha, level_p, level_q, claim, uniforms) >= power

    lo, hi = 0.0, max(1.0, math.sqrt(2.0 * claim / alpha))
    while not enough(hi):
        lo, hi = hi, 2.0 * hi
        if hi > 64.0:  # D_α > 2000 α: the rates are 0 and 1 in every draw already
            return math.inf
    while hi - lo > 0.01 * hi:  # D ∝ μ², so 1% in μ is 2% in D
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return alpha * hi**2 / 2.0
