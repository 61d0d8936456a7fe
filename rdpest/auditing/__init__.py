"""Black-box Rényi DP auditing: the generic :class:`Auditor` and its Opacus specialisation.

Kim, Varshney & Alabi (2026), Algorithm 3 and Sec. 4: train many times with and without a canary,
record the canary's score, estimate D_α between the two score distributions, and compare a
certified lower bound with the claimed ε_α.
"""

from rdpest.auditing.auditor import Auditor, default_estimators, run_seed
from rdpest.auditing.dpsgd import DPSGDAuditor
from rdpest.auditing.result import AuditResult
from rdpest.auditing.store import RunStore
from rdpest.auditing.synthetic import GaussianMechanismScore

__all__ = [
    "AuditResult",
    "Auditor",
    "DPSGDAuditor",
    "GaussianMechanismScore",
    "RunStore",
    "default_estimators",
    "run_seed",
]
