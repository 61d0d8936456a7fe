"""A synthetic mechanism with a known Rényi DP guarantee, for examples, tests and benchmarks.

The Gaussian mechanism releases the canary's contribution plus Gaussian noise: its score is
``include_canary * sensitivity + N(0, noise_std²)``, so D_α between the two arms is exactly
α·Δ²/(2σ²) (Mironov 2017, Prop. 7). ``noise_scale_bug`` multiplies the noise actually added while
the claim keeps the nominal σ: a deliberate fault, to check that an audit catches under-noising.
"""

from __future__ import annotations

import numpy as np

from rdpest.stats.conversions import rdp_of_gaussian_mechanism
from rdpest.utils.validation import check_alpha, check_positive

__all__ = ["GaussianMechanismScore"]


class GaussianMechanismScore:
    """Picklable ``score_fn(include_canary, seed) -> float`` of a Gaussian mechanism.

    Parameters
    ----------
    sensitivity : float, default=1.0
    noise_std : float, default=1.0
        The noise the mechanism CLAIMS to add.
    noise_scale_bug : float, default=1.0
        The noise actually added is ``noise_std * noise_scale_bug`` (fault injection; 1 = honest).

    Examples
    --------
    >>> score = GaussianMechanismScore(sensitivity=1.0, noise_std=2.0)
    >>> score.claimed_epsilon(alpha=2.0)
    0.25
    >>> score(True, seed=0) == score(True, seed=0)
    True
    """

    def __init__(self, sensitivity: float = 1.0, noise_std: float = 1.0, noise_scale_bug=1.0):
        self.sensitivity = check_positive(sensitivity, "sensitivity")
        self.noise_std = check_positive(noise_std, "noise_std")
        self.noise_scale_bug = check_positive(noise_scale_bug, "noise_scale_bug")

    def __call__(self, include_canary: bool, seed: int) -> float:
        noise = np.random.default_rng(seed).normal(0.0, self.noise_std * self.noise_scale_bug)
        return float(self.sensitivity * bool(include_canary) + noise)

    def claimed_epsilon(self, alpha: float) -> float:
        """ε_α the mechanism claims (with its nominal noise)."""
        return rdp_of_gaussian_mechanism(check_alpha(alpha), self.sensitivity, self.noise_std)

    def true_epsilon(self, alpha: float) -> float:
        """ε_α of the noise actually added."""
        actual = self.noise_std * self.noise_scale_bug
        return rdp_of_gaussian_mechanism(check_alpha(alpha), self.sensitivity, actual)

    def describe(self) -> dict:
        """The configuration that identifies this mechanism in an audit store."""
        return {
            "mechanism": "gaussian",
            "sensitivity": self.sensitivity,
            "noise_std": self.noise_std,
            "noise_scale_bug": self.noise_scale_bug,
        }
