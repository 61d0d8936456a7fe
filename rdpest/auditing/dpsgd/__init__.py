"""Auditing DP-SGD trained with Opacus: the only part of rdpest that imports Opacus.

- :mod:`~rdpest.auditing.dpsgd.config`: :class:`DPSGDConfig`, the DP-SGD settings, validated once.
- :mod:`~rdpest.auditing.dpsgd.training`: pretraining θ₀ and single or stacked DP-SGD runs.
- :mod:`~rdpest.auditing.dpsgd.stacking`: many full-batch runs trained as one network
  (its convolutions: :mod:`~rdpest.auditing.dpsgd.stacked_conv`).
- :mod:`~rdpest.auditing.dpsgd.run`: :class:`DPSGDRun`, the audit's picklable score function.
- :mod:`~rdpest.auditing.dpsgd.canaries`, :mod:`~rdpest.auditing.dpsgd.models`,
  :mod:`~rdpest.auditing.dpsgd.data`: canaries and their loss, built-in models, data loading.
- :mod:`~rdpest.auditing.dpsgd.auditor`: :class:`DPSGDAuditor`, the whole audit.
- :mod:`~rdpest.auditing.dpsgd.adapter`: :class:`OpacusTraining`, :func:`with_canary` and
  :func:`epsilon_alpha_from_opacus`, to audit a user's own Opacus training function.
"""

from rdpest.auditing.dpsgd.adapter import OpacusTraining, epsilon_alpha_from_opacus, with_canary
from rdpest.auditing.dpsgd.auditor import DPSGDAuditor

__all__ = ["DPSGDAuditor", "OpacusTraining", "epsilon_alpha_from_opacus", "with_canary"]
