"""Black-box Rényi DP auditing: the generic :class:`Auditor` and its Opacus specialisation.

Kim, Varshney & Alabi (2026), Algorithm 3 and Sec. 4: train many times with and without a canary,
record the canary's score, estimate D_α between the two score distributions, and compare a
certified lower bound with the claimed ε_α.

Importing the generic part (:class:`Auditor`, :class:`AuditResult`, :class:`RunStore`, the
synthetic mechanisms) loads no Opacus; :class:`DPSGDAuditor` lives in :mod:`rdpest.auditing.dpsgd`,
the only package whose import does, and is imported from there on first use. (A result's
summary converts the claim to (ε, δ) with Opacus's RDP analysis, loaded then.)
"""

from rdpest.auditing.auditor import Auditor, check_audit_settings, default_estimators, run_seed
from rdpest.auditing.evaluate import evaluate
from rdpest.auditing.result import AuditResult
from rdpest.auditing.store import RunStore
from rdpest.auditing.synthetic import GaussianMechanismScore

__all__ = [
    "AuditResult",
    "Auditor",
    "DPSGDAuditor",
    "GaussianMechanismScore",
    "RunStore",
    "check_audit_settings",
    "default_estimators",
    "evaluate",
    "run_seed",
]


def __getattr__(name: str):
    # Opacus (and the DP-SGD machinery) load only when DPSGDAuditor is asked for.
    if name == "DPSGDAuditor":
        from rdpest.auditing.dpsgd import DPSGDAuditor

        return DPSGDAuditor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
