"""Rényi divergence estimators with a scikit-learn interface (everything that has ``fit``).

- :class:`~rdpest.estimators.base.RenyiEstimatorBase`: the contract every estimator keeps.
- :class:`~rdpest.estimators.dv.DVRenyiEstimator`: the Donsker–Varadhan estimator with a bounded
  neural critic (Kim, Varshney & Alabi 2026, Sec. 3).
- :class:`~rdpest.estimators.privacy_loss.MarkovRenyiBound`,
  :class:`~rdpest.estimators.privacy_loss.HoeffdingRenyiBound`: bounds from a privacy loss.
- :class:`~rdpest.estimators.threshold.BernoulliTPRFPRBaseline`: the threshold-test baseline.
- :func:`~rdpest.estimators.scoring.neg_critic_loss`: a ``scoring=`` criterion for choosing the DV
  estimator's settings by its critic's held-out loss.
"""

from rdpest.estimators.base import DirectionResult, RenyiEstimatorBase
from rdpest.estimators.dv import DVRenyiEstimator
from rdpest.estimators.privacy_loss import HoeffdingRenyiBound, MarkovRenyiBound
from rdpest.estimators.scoring import neg_critic_loss
from rdpest.estimators.threshold import BernoulliTPRFPRBaseline

__all__ = [
    "BernoulliTPRFPRBaseline",
    "DVRenyiEstimator",
    "DirectionResult",
    "HoeffdingRenyiBound",
    "MarkovRenyiBound",
    "RenyiEstimatorBase",
    "neg_critic_loss",
]
