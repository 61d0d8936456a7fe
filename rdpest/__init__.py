"""rdpest: estimate Rényi divergences and audit Rényi differential privacy claims.

The estimators follow Kim, Varshney & Alabi (2026), "Optimal Guarantees for Auditing Rényi
Differentially Private Machine Learning": a Donsker–Varadhan variational estimator with a bounded
neural critic, Markov and Hoeffding confidence bounds, and a Bernoulli TPR/FPR baseline.
"""

from rdpest._version import __version__
from rdpest.estimators import (
    BernoulliTPRFPRBaseline,
    DVRenyiEstimator,
    HoeffdingRenyiBound,
    MarkovRenyiBound,
    neg_critic_loss,
)

__all__ = [
    "BernoulliTPRFPRBaseline",
    "DVRenyiEstimator",
    "HoeffdingRenyiBound",
    "MarkovRenyiBound",
    "__version__",
    "neg_critic_loss",
]
