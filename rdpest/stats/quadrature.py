"""Stable quadrature for Rényi moments: the excess φ_β in log space and log-space integration.

The machinery behind :func:`rdpest.stats.divergences.renyi_divergence_quadrature` and the
subsampled Gaussian and Bernoulli divergences. A Rényi moment E = E_Q[(p/q)^α] can be
astronomically large (so it is integrated in log space, rescaled by the integrand's peak) or
within rounding of 1 (so E − 1 = E_Q[φ_α(u)] is integrated directly, with u = p/q − 1 and the
nonnegative excess φ_β(u) = (1+u)^β − 1 − βu, valid because E_Q[u] = 0).

:func:`renyi_divergence_quadrature` is re-exported by :mod:`rdpest.stats.divergences`, where it
is documented.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import integrate, special

from rdpest.utils.validation import check_alpha, check_finite_array, check_real, finite_result

__all__ = ["renyi_divergence_quadrature"]

# Relative accuracy requested from quadrature (a little below the documented 1e-10).
_QUAD_EPSREL = 1e-12
# What the callers document: a relative error of about 1e-10 in the divergence.
_PROMISED_RTOL = 1e-10
_ROUNDING = 1e-15  # a bound on the relative rounding of a moment summed over the pieces


def _quad(
    integrand: Callable[[float], float], a: float, b: float, **options: Any
) -> tuple[float, float]:
    """``scipy.integrate.quad`` returning (value, error estimate) without its warnings.

    QUADPACK warns whenever it cannot reach the requested ``epsrel``, which happens routinely when
    the integrand is a difference of large terms (at α in the thousands its relative rounding noise
    is about 1e-10, far below what the callers need but above the 1e-12 asked for). Whether the
    result is good enough is decided from the error estimate by :func:`_checked_log_total`.
    """
    result = integrate.quad(integrand, a, b, full_output=1, **options)
    return float(result[0]), float(result[1])


def _checked_log_total(h_max: float, total: float, abserr: float) -> float:
    """log ∫ = h_max + log(total) for an integrand rescaled by e^{−h_max}; −inf if total <= 0.

    Warns when quadrature's error estimate misses the documented accuracy. An absolute error
    ``abserr`` in ``total`` moves the logarithm by about δ = abserr/total. Callers turn log ∫ into
    a divergence either as D = log ∫/(α−1) or as D = log1p(∫)/(α−1) for an excess moment; in both
    the relative error of D is at most about δ / max(1, log ∫), so δ ≤ 1e-10 · max(1, log ∫) keeps
    the promised relative error of 1e-10.
    """
    if not total > 0.0:
        return -math.inf
    log_value = h_max + math.log(total)
    delta = abserr / total
    if not delta <= _PROMISED_RTOL * max(1.0, log_value):
        warnings.warn(
            f"numerical integration reached a relative accuracy of only {delta:.1e} in the "
            f"Rényi moment (log moment {log_value:.6g}), worse than the {_PROMISED_RTOL:.0e} aimed "
            "for; the divergence may be inaccurate for these arguments",
            RuntimeWarning,
            stacklevel=3,
        )
    return log_value


# ---------------------------------------------------------------------------------------------
# The excess φ_β(u) = (1+u)^β − 1 − βu, in log space
# ---------------------------------------------------------------------------------------------

# Below |u| <= _SERIES_RADIUS / max(1, |β|) the binomial series Σ_{k>=2} C(β, k) u^k is summed
# (consecutive terms shrink by a factor <= _SERIES_RADIUS, so there is no cancellation); above it
# the direct formula loses at most about 1e-13 to cancellation.
_SERIES_RADIUS = 0.25
_SERIES_TERMS = 32


def _log_abs_expm1(v: np.ndarray) -> np.ndarray:
    """log |e^v − 1| without overflow for large v or loss of precision for small |v|."""
    v = np.asarray(v, dtype=np.float64)
    out = np.empty_like(v)
    positive = v > 0.0
    with np.errstate(divide="ignore"):
        out[positive] = v[positive] + np.log(-np.expm1(-v[positive]))
        out[~positive] = np.log(-np.expm1(v[~positive]))
    return out


def _log_excess(
    beta: float, log1p_u: np.ndarray, log_abs_u: np.ndarray, sign_u: np.ndarray
) -> np.ndarray:
    """log φ_β(u) where φ_β(u) = (1+u)^β − 1 − βu >= 0 (β outside [0, 1], u >= −1).

    ``u`` is given redundantly as log(1+u), log|u| and sign(u) so that each can be computed
    accurately by the caller even when u overflows or is tiny.
    """
    log1p_u, log_abs_u, sign_u = (
        np.asarray(a, dtype=np.float64) for a in (log1p_u, log_abs_u, sign_u)
    )
    out = np.full(log1p_u.shape, -np.inf)
    log_radius = math.log(_SERIES_RADIUS / max(1.0, abs(beta)))
    series = log_abs_u <= log_radius

    # Small |u|: φ = β(β−1)/2 · u² · (1 + Σ_{k>=3} Π_{j=3..k} (β−j+1)/j · u).
    u = sign_u[series] * np.exp(log_abs_u[series])
    term = np.ones_like(u)
    total = np.ones_like(u)
    for k in range(3, _SERIES_TERMS):
        term = term * ((beta - k + 1.0) / k) * u
        total = total + term
    out[series] = math.log(abs(beta * (beta - 1.0) / 2.0)) + 2.0 * log_abs_u[series] + np.log(total)

    direct = ~series
    near = _near_linear(beta)
    if near is not None:  # within _NEAR_LINEAR of β = 1 or 0, e^a − w below would cancel
        out[direct] = _log_excess_near_linear(
            near, beta, log1p_u[direct], log_abs_u[direct], sign_u[direct]
        )
        return out

    # Larger |u|: φ = e^a − w with a = β log(1+u) and w = 1 + βu, each in log space.
    log_first = beta * log1p_u[direct]
    log_abs_bu = math.log(abs(beta)) + log_abs_u[direct]
    bu_positive = (math.copysign(1.0, beta) * sign_u[direct]) > 0.0
    # w = 1 + |βu| when βu > 0, else w = 1 − |βu| = −expm1(log|βu|).
    log_abs_w = np.where(bu_positive, np.logaddexp(0.0, log_abs_bu), _log_abs_expm1(log_abs_bu))
    w_positive = bu_positive | (log_abs_bu < 0.0)
    # w > 0: φ = e^a − e^{log w}, and convexity gives log w < a; w <= 0: φ = e^a + |w|.
    out[direct] = np.where(
        w_positive,
        _log_difference(log_first, log_abs_w),
        np.logaddexp(log_first, log_abs_w),
    )
    return out


# Within this distance of β = 1 or β = 0 (α near 1), φ_β is computed in the forms of
# _log_excess_near_linear: e^a − w loses about eps/|β − 1| (or eps/|β|) of its relative precision
# there (0.64 nats of a Bernoulli divergence at α = 1 + 2^-52).
_NEAR_LINEAR = 0.01


def _near_linear(beta: float) -> str | None:
    """ "one" or "zero" where β is within _NEAR_LINEAR of 1 or 0, else None."""
    if abs(beta - 1.0) < _NEAR_LINEAR:
        return "one"
    if abs(beta) < _NEAR_LINEAR:
        return "zero"
    return None


def _log_difference(log_big, log_small):
    """log(e^big − e^small) for big >= small (the guard only stops rounding from making the
    difference non-positive)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = np.minimum(np.asarray(log_small) - log_big, -np.finfo(np.float64).tiny)
        return log_big + np.log(-np.expm1(gap))


def _log_excess_near_linear(near: str, beta: float, log1p_u, log_abs_u, sign_u):
    """log φ_β(u) for β near 1 or 0 (see _NEAR_LINEAR), without dividing out a cancellation.

    Near 1, with γ = β − 1: φ = (1+u)·(e^{γℓ} − 1) − γu, ℓ = log(1+u); near 0: φ = (e^{βℓ} − 1)
    − βu. Both are φ rewritten exactly; each term is computed to full relative precision
    (expm1), and the two terms differ by a fraction of themselves bounded away from 0 outside
    the series branch (|u| > the series radius), so their difference keeps its precision.
    """
    log1p_u, log_abs_u, sign_u = (
        np.asarray(a, dtype=np.float64) for a in (log1p_u, log_abs_u, sign_u)
    )
    linear = (
        math.log(abs(beta - 1.0) if near == "one" else abs(beta)) + log_abs_u
    )  # log|γu|, log|βu|
    if near == "one":
        with np.errstate(divide="ignore"):
            curved = log1p_u + _log_abs_expm1((beta - 1.0) * log1p_u)
        # γ > 0 here (β > 1): (1+u)(e^{γℓ} − 1) >= γu for u > 0 and <= for u < 0 (convexity).
        curved_bigger = (sign_u > 0.0) == (beta > 1.0)
    else:
        curved = _log_abs_expm1(beta * log1p_u)
        # β < 0 here: e^{βℓ} − 1 − βu >= 0 with e^{βℓ} − 1 > 0 exactly when u < 0.
        curved_bigger = (sign_u < 0.0) == (beta < 0.0)
    return np.where(curved_bigger, _log_difference(curved, linear), _log_difference(linear, curved))


# ---------------------------------------------------------------------------------------------
# Quadrature
# ---------------------------------------------------------------------------------------------


def _log_abs_expm1_scalar(v: float) -> float:
    """Scalar twin of :func:`_log_abs_expm1` (quad calls its integrand one point at a time)."""
    if v > 0.0:
        return v + math.log(-math.expm1(-v))
    if v == 0.0:
        return -math.inf
    return math.log(-math.expm1(v))


def _logaddexp_scalar(a: float, b: float) -> float:
    high, low = (a, b) if a >= b else (b, a)
    if low == -math.inf:
        return high
    return high + math.log1p(math.exp(low - high))


def _log_excess_scalar(beta: float, log1p_u: float, log_abs_u: float, sign_u: float) -> float:
    """Scalar twin of :func:`_log_excess`, same branches, pure ``math`` for speed inside quad."""
    if log_abs_u <= math.log(_SERIES_RADIUS / max(1.0, abs(beta))):
        if log_abs_u == -math.inf:
            return -math.inf
        u = math.copysign(math.exp(log_abs_u), sign_u)
        term = total = 1.0
        for k in range(3, _SERIES_TERMS):
            term *= (beta - k + 1.0) / k * u
            total += term
        return math.log(abs(beta * (beta - 1.0) / 2.0)) + 2.0 * log_abs_u + math.log(total)
    near = _near_linear(beta)
    if near is not None:
        return float(_log_excess_near_linear(near, beta, [log1p_u], [log_abs_u], [sign_u])[0])
    log_first = beta * log1p_u
    log_abs_bu = math.log(abs(beta)) + log_abs_u
    if math.copysign(1.0, beta) * sign_u > 0.0:
        log_abs_w, w_positive = _logaddexp_scalar(0.0, log_abs_bu), True
    else:
        log_abs_w, w_positive = _log_abs_expm1_scalar(log_abs_bu), log_abs_bu < 0.0
    if not w_positive:
        return _logaddexp_scalar(log_first, log_abs_w)
    if log_abs_w == -math.inf:
        return log_first
    gap = min(log_abs_w - log_first, -np.finfo(np.float64).tiny)
    return log_first + math.log(-math.expm1(gap))


# Parts of an integrand more than e^{-60} below its peak are left out of the integration range:
# with Gaussian-like tails they hold less than 1e-20 of the integral.
_TRIM_LOG = -60.0


def _log_integral(
    log_integrand: Callable[[np.ndarray], np.ndarray],
    log_integrand_scalar: Callable[[float], float],
    lower: float,
    upper: float,
    *,
    scale: float,
    points: Sequence[float] = (),
    refine: bool = False,
) -> float:
    """log ∫_lower^upper exp(h(x)) dx without overflow.

    ``log_integrand`` is h vectorised, ``log_integrand_scalar`` the same for one float. The peak of
    h is located on a grid fine relative to ``scale`` (the narrowest feature width), the range is
    trimmed to where h is within e^{-60} of the peak, and exp(h − h_max) is integrated with
    ``scipy.integrate.quad`` (break points at the peak and at ``points``); h_max is added back.

    ``refine`` (for integrands of unknown shape): ``points`` join the grid, so a spike named there
    but narrower than the grid sets the peak and is kept by the trimming; and each jump of h
    between neighbouring grid points (a density's edge) is located by bisection and made a break
    point, since quad's error estimate does not see a discontinuity inside an interval.
    """
    n_grid = int(min(max(2001, math.ceil(8.0 * (upper - lower) / scale)), 200_001))
    grid = np.linspace(lower, upper, n_grid)
    h = np.asarray(log_integrand(grid), dtype=np.float64)
    jumps: list[float] = []
    if refine and not np.any(np.isnan(h)):
        jumps = _jumps(grid, h, log_integrand_scalar)
        inside = np.array([p for p in points if lower < p < upper], dtype=np.float64)
        if inside.size:
            grid = np.concatenate([grid, inside])
            h = np.concatenate([h, np.asarray(log_integrand(inside), dtype=np.float64)])
            order = np.argsort(grid, kind="stable")
            grid, h = grid[order], h[order]
            n_grid = grid.size
    if np.any(np.isnan(h)):
        raise ValueError("the log-densities returned NaN inside [lower, upper]")
    if np.any(h == np.inf):
        return math.inf
    peak = int(np.argmax(h))
    h_max = float(h[peak])
    if h_max == -np.inf:
        return -math.inf
    alive = np.flatnonzero(h >= h_max + _TRIM_LOG)
    a = float(grid[max(alive[0] - 1, 0)])
    b = float(grid[min(alive[-1] + 1, n_grid - 1)])
    breaks = sorted({p for p in (*points, *jumps, float(grid[peak])) if a < p < b})

    def integrand(x: float) -> float:
        return math.exp(log_integrand_scalar(x) - h_max)

    try:
        total, abserr = _quad(
            integrand, a, b, points=breaks or None, epsabs=0.0, epsrel=_QUAD_EPSREL, limit=500
        )
    except OverflowError:
        if not refine:
            raise
        raise ValueError(
            "the integrand p^alpha q^(1-alpha) rises far above its largest value on a grid of "
            f"{n_grid} points over [{lower:g}, {upper:g}]: a peak narrower than the grid's "
            "spacing; name its location in points"
        ) from None
    return _checked_log_total(h_max, total, abserr)


# A step of h between neighbouring grid points is taken for a jump when it is more than
# _JUMP_RATIO times both neighbouring steps (a smooth h changes its slope little from one grid
# step to the next, at any steepness) and above _JUMP_MIN nats, or when h turns finite or -inf
# there (a support's edge). Only steps where h is within e^{-60} of its peak count (elsewhere the
# integrand is trimmed away), at most _MAX_JUMPS of the largest.
_JUMP_RATIO = 4.0
_JUMP_MIN = 1e-3
_MAX_JUMPS = 64


def _jumps(grid: np.ndarray, h: np.ndarray, h_scalar: Callable[[float], float]) -> list[float]:
    """Where h jumps between neighbouring grid points, each located by bisection to the last
    bit: the point at which h is on the right-hand side of its step."""
    alive = np.isfinite(h)
    if not alive.any():
        return []
    finite = np.where(alive, h, -1e300)
    edge = alive[:-1] != alive[1:]
    steps = np.abs(np.diff(np.where(alive, h, 0.0)))
    steps[edge] = 0.0  # edges are jumps by themselves, not compared with neighbouring steps
    neighbours = np.maximum(np.r_[0.0, steps[:-1]], np.r_[steps[1:], 0.0])
    sharp = (steps > _JUMP_MIN) & (steps > _JUMP_RATIO * neighbours)
    kept = np.maximum(finite[:-1], finite[1:]) >= finite.max() + _TRIM_LOG
    candidates = np.flatnonzero((edge | sharp) & kept)
    if candidates.size > _MAX_JUMPS:
        size = np.where(edge, np.inf, steps)[candidates]
        candidates = candidates[np.argsort(size)[-_MAX_JUMPS:]]
    located = []
    for i in candidates:
        left, right = float(grid[i]), float(grid[i + 1])
        h_left, h_right = finite[i], finite[i + 1]
        middle, rising = 0.5 * (h_left + h_right), h_right > h_left
        for _ in range(80):  # halves the interval to the spacing of doubles
            x = 0.5 * (left + right)
            if not left < x < right:
                break
            value = h_scalar(x)
            value = value if math.isfinite(value) else -1e300
            if (value > middle) == rising:
                right = x
            else:
                left = x
        located.append(right)
    return located


@finite_result(allow_inf=True)
def renyi_divergence_quadrature(
    alpha: float,
    logpdf_p: Callable[[np.ndarray], np.ndarray],
    logpdf_q: Callable[[np.ndarray], np.ndarray],
    lower: float,
    upper: float,
    points: Sequence[float] | None = None,
) -> float:
    """Rényi divergence D_α(P‖Q) of two 1-D densities by numerical integration.

    Computes 1/(α−1) · log ∫ exp(α log p(x) + (1−α) log q(x)) dx over [lower, upper] in log space
    (peak located first, integrand rescaled by its maximum), so that neither huge nor tiny
    moments overflow.

    Parameters
    ----------
    alpha : float
        Rényi order, > 1.
    logpdf_p, logpdf_q : callable
        Vectorised log-densities: take a float array, return an array of the same shape
        (``-inf`` outside the support).
    lower, upper : float
        Finite integration range; it must hold all but a negligible part of the integrand
        p^α q^{1−α} (whose spread can be much wider than that of P or Q).
    points : sequence of float, optional
        Locations of kinks or narrow features of the integrand, passed on as break points (a
        density's jumps are found without them: each step between neighbouring grid points is
        located by bisection).

    Returns
    -------
    float
        The divergence; ``math.inf`` if p > 0 somewhere on the grid where q = 0. A truncated range
        or rounding can make a divergence near 0 come out slightly negative.

    Raises
    ------
    ValueError
        On bad arguments, log-densities that return NaN or one number for an array, p = 0 on
        the whole range, or a peak narrower than the grid's spacing that ``points`` does not
        name (the integrand then overflows beside it).

    Warns
    -----
    RuntimeWarning
        When the quadrature's own error estimate puts the moment's relative error above 1e-10
        (for example a density with features finer than ``(upper − lower)/1000`` not named in
        ``points``), or when the log moment, about (α−1)·D, is below 1e-5 (α close to 1, or
        a tiny divergence), where the moment's rounding alone may cost D more than 1e-10 of
        its relative accuracy; the value is still returned.

    Examples
    --------
    >>> from scipy import stats
    >>> d = renyi_divergence_quadrature(
    ...     2.0, stats.norm(1, 1).logpdf, stats.norm(0, 1).logpdf, lower=-40, upper=40)
    >>> round(d, 9)  # α Δμ² / (2σ²)
    1.0
    """
    alpha = check_alpha(alpha)
    lower = check_real(lower, "lower")
    upper = check_real(upper, "upper")
    if not lower < upper:
        raise ValueError(f"lower must be < upper, got lower={lower!r}, upper={upper!r}")
    if not callable(logpdf_p):
        raise ValueError("logpdf_p must be a callable returning log-densities")
    if not callable(logpdf_q):
        raise ValueError("logpdf_q must be a callable returning log-densities")
    breaks = [] if points is None else check_finite_array(points, "points", ndim=1).tolist()

    def log_integrand(x: np.ndarray) -> np.ndarray:
        log_p = np.asarray(logpdf_p(x), dtype=np.float64)
        log_q = np.asarray(logpdf_q(x), dtype=np.float64)
        for name, value in (("logpdf_p", log_p), ("logpdf_q", log_q)):
            if value.shape != x.shape:  # one number for every x would be integrated as such
                raise ValueError(
                    f"{name} must return an array of its input's shape {x.shape}, got shape "
                    f"{value.shape}: vectorise it (e.g. with numpy functions)"
                )
        # Where p = 0 the integrand is 0 whatever q is (avoids −inf + inf); where q = 0 < p it is
        # +inf (P not absolutely continuous w.r.t. Q).
        with np.errstate(invalid="ignore"):
            out = alpha * log_p + (1.0 - alpha) * log_q
        return np.where(log_p == -np.inf, -np.inf, out)

    # The feature scale is unknown for arbitrary densities: use a 1/1000 of the range.
    def log_integrand_scalar(x: float) -> float:
        return float(log_integrand(np.array([x]))[0])

    log_moment = _log_integral(
        log_integrand,
        log_integrand_scalar,
        lower,
        upper,
        scale=(upper - lower) / 1000.0,
        points=breaks,
        refine=True,
    )
    if log_moment == -math.inf:
        raise ValueError("logpdf_p is -inf on the whole of [lower, upper]; widen the range")
    # D = log M / (α−1) with log M ≈ (α−1)·D: the moment's rounding in the sum of the pieces
    # (measured at most about 7e-16 relative on Gaussian and Laplace pairs from α = 1 + 1e-13 to
    # 2, D from 1e-9 to 13) is a relative error of about that over abs(log M) in D (4.4e-4 at
    # α = 1 + 1e-12, D = 0.5), which the quadrature's own error estimate does not see.
    if 0.0 < abs(log_moment) < _ROUNDING / _PROMISED_RTOL:
        warnings.warn(
            f"the log moment is only {log_moment:.1e} (about (α − 1)·D, with α − 1 = "
            f"{alpha - 1.0:.1e}), so the moment's rounding may leave the divergence a relative "
            f"accuracy of only about {_ROUNDING / abs(log_moment):.0e}, worse than the "
            f"{_PROMISED_RTOL:.0e} aimed for; at orders this close to 1 the Kullback–Leibler "
            "divergence (the limit α → 1), and for any tiny divergence a closed form, is the "
            "better number",
            RuntimeWarning,
            stacklevel=2,
        )
    return log_moment / (alpha - 1.0)


def _log_excess_moment_real_line(
    alpha: float,
    log_q: Callable[[np.ndarray], np.ndarray],
    log_ratio: Callable[[np.ndarray], np.ndarray],
    log_q_scalar: Callable[[float], float],
    log_ratio_scalar: Callable[[float], float],
    points: Sequence[float],
    width: float = 1.0,
) -> float:
    """log (E_Q[(p/q)^α] − 1) = log ∫ q φ_α(p/q − 1) over the whole real line, without overflow.

    ``log_q`` is log q and ``log_ratio`` the privacy loss L = log p/q (vectorised; the ``_scalar``
    twins take one float). The peak of the integrand is located on a grid of step ``width``/8 over
    [min(points) − 40·width, max(points) + 40·width]; the integrand, rescaled by that peak, is
    integrated with ``scipy.integrate.quad`` over (−∞, p₀], [p₀, p₁], …, [p_k, ∞), the break
    points being ``points``, the grid's peak, and offsets ±``width``·4^j around each (quad maps the
    two infinite pieces to finite ones, so polynomial tails such as Student's are integrated, not
    truncated). ``width`` is the narrowest feature of the integrand. Returns −inf when P = Q.
    """
    low, high = min(points) - 40.0 * width, max(points) + 40.0 * width
    grid = np.linspace(low, high, int(min(max(2001, 8.0 * (high - low) / width), 200_001)))
    loss = np.asarray(log_ratio(grid), dtype=np.float64)
    h = np.asarray(log_q(grid), dtype=np.float64) + _log_excess(
        alpha, loss, _log_abs_expm1(loss), np.sign(loss)
    )
    if np.any(np.isnan(h)):
        raise ValueError("the log-densities returned NaN")
    h_max = float(np.max(h))
    if h_max == -np.inf:
        return -math.inf
    if h_max == np.inf:
        return math.inf

    def integrand(x: float) -> float:
        value = log_ratio_scalar(x)
        excess = _log_excess_scalar(
            alpha, value, _log_abs_expm1_scalar(value), math.copysign(1.0, value)
        )
        return math.exp(log_q_scalar(x) + excess - h_max)

    # Break points at each anchor (``points`` and the grid's peak) and at distances width·4^j on
    # either side: quad then never faces a long piece whose only mass is a narrow spike at one
    # end (it samples such a piece sparsely and can miss the spike altogether).
    anchors = {*(float(p) for p in points), float(grid[int(np.argmax(h))])}
    offsets = width * 4.0 ** np.arange(int(math.log((high - low) / width, 4.0)) + 2)
    breaks = sorted({a + s * o for a in anchors for s in (-1.0, 1.0) for o in offsets} | anchors)
    edges = [-math.inf, *breaks, math.inf]
    total = abserr = 0.0
    for a, b in itertools.pairwise(edges):
        if a < b:
            piece, piece_err = _quad(
                integrand, a, b, epsabs=1e-15 * width, epsrel=_QUAD_EPSREL, limit=500
            )
            total += piece
            abserr += piece_err
    return _checked_log_total(h_max, total, abserr)


def _sampled_gaussian_log_moment(alpha: int, q: float, sigma: float) -> float:
    """log E_Q[(p/q)^α] of the sampled Gaussian mechanism for an integer α, by the binomial sum
    of Mironov, Talwar & Zhang (2019), "Rényi Differential Privacy of the Sampled Gaussian
    Mechanism", Sec. 3.3: E = Σ_k C(α, k) (1−q)^{α−k} q^k exp((k² − k)/(2σ²)), all terms
    positive, summed in log space (exact for any σ, where the quadrature cannot resolve a peak
    of width σ). For 0 < q < 1."""
    k = np.arange(alpha + 1, dtype=np.float64)
    log_binomial = (
        special.gammaln(alpha + 1.0) - special.gammaln(k + 1.0) - special.gammaln(alpha - k + 1.0)
    )
    log_terms = (
        log_binomial
        + (alpha - k) * math.log1p(-q)
        + k * math.log(q)
        + (k * k - k) / (2.0 * sigma**2)
    )
    return float(special.logsumexp(log_terms))
