"""Privacy losses as functions of samples: a user's log ratio, or a Gaussian fit of it.

The privacy-loss estimators (:mod:`rdpest.estimators.privacy_loss`) and the threshold baseline
evaluate functions of the samples that users supply (an exact log ratio, a score). This module
calls them safely (:func:`call_on_samples`: shapes, real and finite values, 1-D functions on 1-D
samples) and provides the fallback privacy loss, the log ratio of two Gaussians fitted to the
training split (not a certificate: see :class:`rdpest.MarkovRenyiBound`).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import solve_triangular

__all__ = ["call_on_samples"]

# Relative ridge added to each fitted covariance (times the average pooled variance): keeps the
# Gaussian fit positive definite for tiny or degenerate training samples.
_RIDGE = 1e-6


def call_on_samples(func, A: np.ndarray, name: str, what: str = "log_ratio") -> np.ndarray:
    """``func`` evaluated on the (n, d) array ``A``: a finite float array of shape (n,).

    The (n, d) array is tried first; for d = 1 a failing call or a wrong output shape is retried
    with the (n,) array, so that functions written for 1-D samples work unchanged.
    """
    n, d = A.shape
    attempts = [A] if d > 1 else [A, A[:, 0]]
    failure: str | None = None
    error: Exception | None = None
    for arg in attempts:
        try:
            raw = np.asarray(func(arg))
        except Exception as exc:  # a 1-D function may fail on 2-D input in any way
            failure, error = f"raised {type(exc).__name__}: {exc}", exc
            continue
        if raw.dtype.kind not in "biuf":
            # Casting would silently drop an imaginary part or parse strings.
            raise ValueError(
                f"{what} must return real numbers on the samples of {name}, got dtype {raw.dtype}"
            )
        out = raw.astype(np.float64)
        if out.shape == (n,) or (d == 1 and out.shape == (n, 1)):
            out = out.reshape(n)
            if np.isnan(out).any():
                raise ValueError(f"{what} returned NaN on the samples of {name}")
            if not np.isfinite(out).all():
                raise ValueError(
                    f"{what} returned an infinite value on the samples of {name}; it must be "
                    "finite (an infinite privacy loss means P and Q have different supports and "
                    "D_α is infinite in one direction)"
                )
            return out
        failure, error = f"returned shape {out.shape}", None
    shapes = f"({n}, {d})" if d > 1 else f"({n}, 1) or ({n},)"
    raise ValueError(
        f"{what} must map the samples of {name}, an array of shape {shapes}, to an array of "
        f"shape ({n},); it {failure}"
    ) from error


class _DirectedLogRatio:
    """The user's log p/q (a callable, or an estimator's ``log_ratio``) times ``sign``.

    ``sign`` is −1 in the reverse direction: the base class swaps P and Q there, and the privacy
    loss of D_α(Q‖P) is log q/p = −log p/q.
    """

    def __init__(self, source, sign: float):
        self.source = source
        self.sign = sign

    def __call__(self, A: np.ndarray, name: str) -> np.ndarray:
        func = self.source.log_ratio if hasattr(self.source, "log_ratio") else self.source
        return self.sign * call_on_samples(func, A, name)


class _GaussianLogRatio:
    """log N(x; μ_p, Σ_p) − log N(x; μ_q, Σ_q) for Gaussians fitted to two training samples."""

    def __init__(self, P: np.ndarray, Q: np.ndarray, names: tuple[str, str] = ("X", "Y")):
        pooled = np.concatenate([P, Q])
        if np.ptp(pooled, axis=0).any():
            # A constant training sample fits a point mass: with only the ridge as its variance,
            # the log density ratio is of order 1/ridge (e.g. −3.9e6 for ones against zeros)
            # and every estimate built on it is meaningless.
            for A, name in zip((P, Q), names, strict=True):
                if not np.ptp(A, axis=0).any():
                    what = "one row" if len(A) == 1 else f"constant ({len(A)} identical rows)"
                    raise ValueError(
                        f"the Gaussian estimate of the privacy loss is degenerate: the training "
                        f"part of {name} is {what}, so its fitted density is a point mass; pass "
                        "log_ratio explicitly (the exact privacy loss), give more samples, or "
                        "use DVRenyiEstimator"
                    )
        with np.errstate(over="ignore", invalid="ignore"):
            cov_p, cov_q, cov_pooled = (_covariance(A) for A in (P, Q, pooled))
        for cov, name in ((cov_p, names[0]), (cov_q, names[1]), (cov_pooled, " and ".join(names))):
            if not np.isfinite(cov).all():
                raise ValueError(
                    "the Gaussian estimate of the privacy loss overflowed: the variance of the "
                    f"training part of {name} is not finite in float64 (the samples' magnitudes "
                    "are too large); rescale the samples, pass log_ratio explicitly, or use "
                    "DVRenyiEstimator"
                )
        scale = float(np.trace(cov_pooled)) / pooled.shape[1]
        ridge = _RIDGE * scale if scale > 0.0 else 1.0
        self.mean_p, self.chol_p, self.log_det_p = _gaussian_fit(P, cov_p, ridge)
        self.mean_q, self.chol_q, self.log_det_q = _gaussian_fit(Q, cov_q, ridge)

    def __call__(self, A: np.ndarray, name: str) -> np.ndarray:
        out = _log_density(A, self.mean_p, self.chol_p, self.log_det_p) - _log_density(
            A, self.mean_q, self.chol_q, self.log_det_q
        )
        if not np.isfinite(out).all():
            raise ValueError(
                f"the Gaussian estimate of the privacy loss overflowed on the samples of {name}; "
                "pass log_ratio explicitly"
            )
        return out


def _covariance(A: np.ndarray) -> np.ndarray:
    """The (d, d) sample covariance of the rows of ``A`` (zero for a single row)."""
    d = A.shape[1]
    return np.atleast_2d(np.cov(A, rowvar=False)) if len(A) > 1 else np.zeros((d, d))


def _gaussian_fit(
    A: np.ndarray, cov: np.ndarray, ridge: float
) -> tuple[np.ndarray, np.ndarray, float]:
    """Mean, Cholesky factor of the ridged covariance and its log-determinant."""
    chol = np.linalg.cholesky(cov + ridge * np.eye(A.shape[1]))
    return A.mean(axis=0), chol, 2.0 * float(np.sum(np.log(np.diag(chol))))


def _log_density(A, mean, chol, log_det) -> np.ndarray:
    # The −d/2 · log 2π term is common to both densities and cancels in the ratio.
    white = solve_triangular(chol, (A - mean).T, lower=True)
    return -0.5 * np.sum(white * white, axis=0) - 0.5 * log_det
