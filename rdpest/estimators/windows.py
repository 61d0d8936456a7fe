"""The DV estimator's point estimate: its clipping window, chosen on the critic's training rows,
and its form on the held-out rows.

By default the point estimate is the bracket α/(α−1)·log mean_P e^{(α−1)g} − log mean_Q e^{αg}
of the trained critic g, clipped to a window [lo, hi], on rows the critic did not train on. Any
window that is a fixed function of the training rows keeps the clipped critic a fixed function,
so the bracket still lower-bounds D_α(P‖Q) in population (the variational bracket of Birrell et
al. 2021 holds for every bounded g; see rdpest.stats.certificates); the window only trades the
estimate's bias and variance. The certificate chooses its own window (rdpest.stats.certificates).

Rules (``point_window`` of :class:`~rdpest.estimators.DVRenyiEstimator`):

``"range"``
    [min, max] of g over the training rows of P and Q together.
``"balanced"``
    The same lower end; the upper end is the widest of a few candidates (the range's top, the
    top of g over Q's training rows, and Q's training quantiles ``_Q_LEVELS``) whose moment
    imbalance is within two standard errors of the smallest. The imbalance of a candidate is
    abs(Δ), Δ = log mean_P e^{(α−1)g̃} − log mean_Q e^{αg̃} on the training rows, with g clipped and
    normalised on Q (g̃ = g − log mean_Q e^g). For the true log ratio L = log p/q the two
    moments agree, E_P[e^{(α−1)L}] = E_Q[e^{αL}] = e^{(α−1)D_α} (a change of measure), so Δ is
    near 0 for a critic close to L. Where P and Q are well separated, a classifier's logit keeps
    rising through regions that hold P's training rows but none of Q's (nothing there bounds
    it), beyond the log ratio when the ratio levels off; Q's sample then misses the mass that
    would balance e^{αg}, and the bracket overshoots, by a factor of 10 or more at α ≥ 8 on a
    Laplace shift. Clipping where Q's sample stops removes that overshoot and the imbalance.
    The tolerance of two standard errors (each moment's delta-method error
    sd(w)/(mean(w)·√n)) keeps the wide window unless the evidence against it is clear.
``"guarded"`` (the default)
    "range", unless the range window's imbalance Δ on the training rows exceeds
    ``_GUARD_NATS`` (4 nats); then "balanced". The bracket splits exactly into its P-form part
    and the imbalance: α/(α−1)·a − b = a/(α−1) + (a − b), with a and b the two log moments
    above. So Δ is what the Q moment fails to cancel of the P moment, and an estimate more
    than 4 nats from the P-form estimate of the same critic rests on rows that Q's sample
    cannot corroborate. The threshold was chosen among 2, 4 and 8 nats on the known-divergence
    benchmark (benchmarks/results/point_estimates/windows/, which counts where it fired): it
    rarely fires at α ≤ 2, removes the Laplace-shift overshoots at α ≥ 4, and raises the error
    by more than a tenth in a few cells (Gaussian mixtures at α ≥ 16, D = 4, among them).

Which rule is right cannot be read from the samples alone: in a region that P's sample reaches
and Q's does not, a log ratio that levels off (a Laplace mechanism, any pure ε-DP mechanism:
bounded privacy loss) and one that keeps rising (Gaussian and subsampled Gaussian mechanisms,
DP-SGD) leave the same counts. "balanced" only ever lowers the estimate. On the known-divergence
benchmark (benchmarks/results/point_estimates/windows/) it removes the overshoots of pairs with a
bounded or slowly growing log ratio (Laplace and Student-t shifts) and lowers the estimate where
the ratio keeps rising beyond Q's sample (subsampled Gaussians, Gaussian mixtures, Poisson rates
at D = 4), where "range" was already low. "guarded", the default, departs from "range" only
where its imbalance is gross, which keeps the gains of "balanced" on the overshooting pairs at a
fraction of its losses (the benchmark's table counts both); "balanced" is for mechanisms whose
privacy loss is known to be bounded.

Forms (``point_form`` of :class:`~rdpest.estimators.DVRenyiEstimator`), on the held-out rows with
the window applied and g normalised on Q's rows (g̃ = g − log mean_Q e^g; the bracket does not
change under a shift of g), so that the bracket splits into its P-form and the imbalance:
α/(α−1)·A − B = A/(α−1) + Δ, with A = log mean_P e^{(α−1)g̃}, B = log mean_Q e^{αg̃}, Δ = A − B.

``"bracket"`` (the default)
    A/(α−1) + Δ. Stationary at g = log p/q: a critic's error moves it only to second order,
    since the two moments' first-order changes cancel (both are expectations under the same
    tilted law p^α q^{1−α}/e^{(α−1)D_α}). But Δ is not divided by α − 1, so at high orders the
    sampling error of the heavy-tailed Q moment e^{αg̃} passes into the estimate undiluted.
``"shrunk"``
    A/(α−1) + λ·Δ with λ = max(0, 1 − s²/Δ²), s the delta-method standard error of Δ on the same
    rows (the two moments' errors, as for the windows, in quadrature). Δ² − s² estimates the
    squared mean of Δ without bias, so λ is the positive-part James–Stein estimate of the share
    of Δ's mean square that is signal, the weight that minimises the squared error of a noisy
    correction (James & Stein 1961). Where Δ stands far out of its noise the estimate is about
    the bracket; where abs(Δ) ≤ s (small divergences at high orders, where e^{αg̃} is heavy-tailed)
    it is the Q-normalised P-form 1/(α−1)·log mean_P e^{(α−1)g̃}, whose sampling error is A's
    divided by α − 1. Unlike the bracket, the P-form is not a lower bound in population: for a
    noisy critic it lies above D_α = 0 when P = Q and α ≥ 2 (Jensen's inequality), so there
    "shrunk" trades the bracket's downward bias for some upward bias. ``lower_bound_`` does not
    depend on the form.
"""

from __future__ import annotations

import numpy as np

from rdpest.stats.certificates import _dv_bracket
from rdpest.stats.regions import log_mean_exp

__all__ = ["POINT_FORMS", "WINDOW_RULES", "point_estimate", "point_estimate_window"]

WINDOW_RULES = ("range", "balanced", "guarded")
POINT_FORMS = ("bracket", "shrunk")

# Quantile levels of the critic on Q's training rows that "balanced" considers as upper ends.
_Q_LEVELS = (0.9999, 0.999, 0.995, 0.99, 0.98, 0.95)
# Standard errors of tolerance of "balanced" (see the module docstring).
_TOLERANCE_SE = 2.0
# The imbalance (nats) of the range window above which "guarded" takes "balanced".
_GUARD_NATS = 4.0


def point_estimate_window(
    g_p: np.ndarray, g_q: np.ndarray, alpha: float, rule: str = "guarded"
) -> tuple[float, float]:
    """The point estimate's clipping window from the critic's values on its training rows.

    Parameters
    ----------
    g_p, g_q : ndarray of shape (n_p,) and (n_q,)
        The critic on the training rows of P and of Q (non-empty, finite).
    alpha : float
        The order α > 1.
    rule : {"range", "balanced", "guarded"}
        See the module docstring.

    Returns
    -------
    (lo, hi) : tuple of float, lo ≤ hi

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> g_q = rng.normal(-0.5, 1.0, 2000)  # the exact log ratio of N(1, 1) against N(0, 1)
    >>> g_p = rng.normal(0.5, 1.0, 2000)
    >>> point_estimate_window(g_p, g_q, 2.0, "range") == (min(g_p.min(), g_q.min()),
    ...                                                   max(g_p.max(), g_q.max()))
    True
    """
    if rule not in WINDOW_RULES:
        raise ValueError(f"point window rule must be one of {WINDOW_RULES}, got {rule!r}")
    g_p, g_q = np.asarray(g_p, dtype=float), np.asarray(g_q, dtype=float)
    lo = float(min(g_p.min(), g_q.min()))
    top = float(max(g_p.max(), g_q.max()))
    if rule == "range":
        return lo, top
    if rule == "guarded":
        imbalance, _ = _imbalance(g_p, g_q, alpha)  # the range window clips nothing
        return point_estimate_window(
            g_p, g_q, alpha, "balanced" if imbalance > _GUARD_NATS else "range"
        )
    candidates = [top, float(g_q.max()), *np.quantile(g_q, _Q_LEVELS).tolist()]
    imbalances, errors = zip(
        *(_imbalance(np.clip(g_p, lo, hi), np.clip(g_q, lo, hi), alpha) for hi in candidates),
        strict=True,
    )
    smallest = min(imbalances)
    for hi, imbalance, error in zip(candidates, imbalances, errors, strict=True):
        if imbalance <= smallest + _TOLERANCE_SE * error:
            return lo, max(lo, float(hi))
    raise AssertionError("unreachable: the smallest imbalance is within its own tolerance")


def _imbalance(g_p: np.ndarray, g_q: np.ndarray, alpha: float) -> tuple[float, float]:
    """abs(Δ) of the module docstring for one clipped critic, and its delta-method standard
    error."""
    p_moment, q_moment, se_p, se_q = _normalised_moments(g_p, g_q, alpha)
    return abs(p_moment - q_moment), float(np.hypot(se_p, se_q))


def _normalised_moments(g_p, g_q, alpha: float) -> tuple[float, float, float, float]:
    """A and B of the module docstring (g normalised on Q's rows) and each one's delta-method
    standard error."""
    shift = log_mean_exp(g_q)
    a, b = (alpha - 1.0) * (g_p - shift), alpha * (g_q - shift)
    return log_mean_exp(a), log_mean_exp(b), _log_mean_se(a), _log_mean_se(b)


def _log_mean_se(x: np.ndarray) -> float:
    """Delta-method standard error of log mean e^x: sd(e^x) / (mean(e^x)·√n)."""
    w = np.exp(x - x.max())
    return float(w.std() / (w.mean() * np.sqrt(len(x))))


def _clipped_bracket(g_p, g_q, window, alpha) -> float:
    """The bracket of the critic values clipped to ``window``."""
    lo, hi = window
    return _dv_bracket(np.clip(g_p, lo, hi), np.clip(g_q, lo, hi), float(alpha))


def point_estimate(
    g_p: np.ndarray, g_q: np.ndarray, window: tuple[float, float], alpha: float, form: str
) -> float:
    """The point estimate of D_α from a critic's values on held-out rows of P and Q.

    Parameters
    ----------
    g_p, g_q : ndarray of shape (n_p,) and (n_q,)
        The critic on held-out rows of P and of Q (non-empty, finite).
    window : (lo, hi)
        The clipping window (:func:`point_estimate_window` on the training rows).
    alpha : float
        The order α > 1.
    form : {"bracket", "shrunk"}
        See the module docstring.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> g_p, g_q = rng.normal(0.5, 1.0, 2000), rng.normal(-0.5, 1.0, 2000)
    >>> bracket = point_estimate(g_p, g_q, (-4.0, 4.0), 2.0, "bracket")
    >>> bool(bracket == _clipped_bracket(g_p, g_q, (-4.0, 4.0), 2.0))
    True
    """
    if form not in POINT_FORMS:
        raise ValueError(f"point form must be one of {POINT_FORMS}, got {form!r}")
    if form == "bracket":
        return _clipped_bracket(g_p, g_q, window, alpha)
    lo, hi = window
    alpha = float(alpha)
    g_p, g_q = np.clip(g_p, lo, hi), np.clip(g_q, lo, hi)
    p_moment, q_moment, se_p, se_q = _normalised_moments(g_p, g_q, alpha)
    delta = p_moment - q_moment
    noise = se_p**2 + se_q**2
    weight = max(0.0, 1.0 - noise / delta**2) if delta != 0.0 else 0.0
    return float(p_moment / (alpha - 1.0) + weight * delta)
