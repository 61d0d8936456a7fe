"""What the certificates share: the certificate record, how two confidence statements combine,
and the log-mean-exp of a sample.

A certificate makes one one-sided confidence statement per sample (a lower bound for a moment or
rate of P, an upper one for Q) and combines them into one (1 − β) statement about the pair:
``"bonferroni"`` spends β/2 on each; ``"joint"`` takes one region from the product of the two
p-values (:func:`joint_level`), which lets the two trade level against each other.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy.special import logsumexp

from rdpest.utils.validation import check_beta, check_option, finite_result

__all__ = ["CONFIDENCE_REGIONS", "Certificate", "joint_level", "log_mean_exp"]

#: How the two one-sided confidence statements (one per sample) are combined: "joint" (one
#: confidence region from the product of the two p-values) or "bonferroni" (beta/2 each).
CONFIDENCE_REGIONS = ("joint", "bonferroni")
# Grid of the joint region's boundary: s in {0, 1/J, ..., 1}, see _joint_minimum.
_JOINT_GRID = 16


@dataclass(frozen=True)
class Certificate:
    """A certified lower bound and what produced it.

    Attributes
    ----------
    lower_bound : float
        The certified lower bound on D_α.
    window : tuple of float or None
        ``kind="bracket"``: the clipping window (lo, hi) of the critic's values; None otherwise.
    mean_p_lower : float
        ``kind="bracket"``: the lower confidence limit of E_P[e^{(α−1)(g − hi)}], g the critic
        clipped to the window (lo, hi);
        ``kind="threshold"``: the Clopper–Pearson lower limit TPR_lo.
    mean_q_upper : float
        ``kind="bracket"``: the upper confidence limit of E_Q[e^{α(g − hi)}];
        ``kind="threshold"``: the Clopper–Pearson upper limit FPR_hi.
    kind : {"bracket", "threshold"}, default="bracket"
        The certificate that gave the bound.
    threshold : tuple of (float, str) or None, default=None
        ``kind="threshold"``: the threshold's value and side.
    """

    lower_bound: float
    window: tuple[float, float] | None
    mean_p_lower: float
    mean_q_upper: float
    kind: str = "bracket"
    threshold: tuple[float, str] | None = None


@finite_result()
def joint_level(beta: float) -> float:
    """The cut-off c of the product test: c (1 − log c) = β.

    For independent p-values p₁, p₂ that are valid (super-uniform) at the true parameters,
    P(p₁ p₂ <= c) <= c (1 − log c), the distribution function of a product of two independent
    uniforms (the two-sample case behind Fisher's combination of p-values, R. A. Fisher,
    Statistical Methods for Research Workers, 4th ed., 1932). So {(a, b): p₁(a) p₂(b) > c} is a
    (1 − β) joint confidence region for the two parameters: one region for both samples,
    instead of a box of two separate (1 − β/2) intervals (Bonferroni). The region lets the two
    confidence statements trade level against each other, and the certified bounds over it are
    typically tighter than over the box (see benchmarks/results/estimators/).

    Examples
    --------
    >>> c = joint_level(0.05)
    >>> round(c, 6), round(c * (1 - math.log(c)), 12)
    (0.008705, 0.05)
    """
    return _joint_level(check_beta(beta))


@functools.lru_cache(maxsize=256)
def _joint_level(beta: float) -> float:
    """:func:`joint_level` unchecked and cached: its root finding would otherwise run on every
    certificate, always for the same few levels."""
    c = float(
        optimize.brentq(
            lambda c: c * (1.0 - math.log(c)) - beta, 1e-300, beta, xtol=1e-300, rtol=1e-15
        )
    )
    # c (1 − log c) increases in c: step down past rounding so the region's level is >= 1 − β.
    while c * (1.0 - math.log(c)) > beta:
        c = math.nextafter(c, 0.0)
    return c


def _joint_minimum(lower_at, upper_at, objective, beta: float) -> tuple[float, float, float]:
    """Minimum of ``objective(a, b)`` over the joint region {p_A(a) p_B(b) > c}, conservatively.

    ``objective`` increases in a and decreases in b; ``lower_at(levels)`` and ``upper_at(levels)``
    return nested one-sided bounds for a and for b (the bounds of ONE p-value function each). On
    the region's boundary p_A = c^s and p_B = c^(1−s) for some s in [0, 1]. For s in
    [s_j, s_{j+1}] of a grid, a point of the region has a >= lower_at(c^{s_{j+1}}) and
    b <= upper_at(c^{1−s_j}) (a larger p-value means a bound at a larger level, nested), so the
    minimum over j of objective at those two limits is a valid lower bound for every point of the
    region: gridding only makes it more conservative. Returns (bound, a, b) at the minimiser.
    """
    c = _joint_level(beta)
    s = np.linspace(0.0, 1.0, _JOINT_GRID + 1)
    a = np.asarray(lower_at(c ** s[1:]), dtype=float)  # levels c^{s_{j+1}}, j = 0..J-1
    b = np.asarray(upper_at(c ** (1.0 - s[:-1])), dtype=float)  # levels c^{1-s_j}
    values = np.array([objective(float(ai), float(bi)) for ai, bi in zip(a, b, strict=True)])
    j = int(np.argmin(values))
    return float(values[j]), float(a[j]), float(b[j])


def _check_region(region: str) -> str:
    return check_option(region, CONFIDENCE_REGIONS, "region")


def log_mean_exp(values: np.ndarray) -> float:
    """log(mean(e^v)) of a 1-D array without overflow: ``logsumexp(v) - log(n)``.

    The sample moments of the variational bracket and of the privacy-loss estimators
    (E[e^{(α−1)g}], E[e^{αL}]) are computed in logs: e^{αL} leaves the double range for large
    privacy losses.

    Examples
    --------
    >>> round(log_mean_exp(np.array([0.0, math.log(3.0)])), 12) == round(math.log(2.0), 12)
    True
    """
    values = np.asarray(values)
    if values.size == 0:
        raise ValueError(
            "log_mean_exp needs at least one value: the mean of no values is undefined"
        )
    if np.isnan(values).any():  # max(0.0, nan) downstream would read a NaN as 0
        raise ValueError(f"log_mean_exp got {int(np.isnan(values).sum())} NaN value(s)")
    return float(logsumexp(values) - math.log(values.size))
