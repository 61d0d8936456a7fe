"""Auditing DP-SGD trained with Opacus: the only part of rdpest that imports Opacus.

- :mod:`~rdpest.auditing.dpsgd.config`: :class:`DPSGDConfig`, the DP-SGD settings, validated once.
- :mod:`~rdpest.auditing.dpsgd.training`: pretraining θ₀ and single or stacked DP-SGD runs.
- :mod:`~rdpest.auditing.dpsgd.stacking`: many full-batch runs trained as one network.
- :mod:`~rdpest.auditing.dpsgd.run`: :class:`DPSGDRun`, the audit's picklable score function.
- :mod:`~rdpest.auditing.dpsgd.canaries`, :mod:`~rdpest.auditing.dpsgd.models`,
  :mod:`~rdpest.auditing.dpsgd.data`: canaries and their loss, built-in models, data loading.
- :mod:`~rdpest.auditing.dpsgd.auditor`: :class:`DPSGDAuditor`, the whole audit.
"""

from rdpest.auditing.dpsgd.auditor import DPSGDAuditor

__all__ = ["DPSGDAuditor"]
