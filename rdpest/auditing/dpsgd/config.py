"""The settings of one DP-SGD training, validated once and passed down whole.

A DP-SGD run is determined by a handful of numbers (σ, C, steps, learning rate, sampling rate,
the public batch-size constant, how Opacus computes per-example gradients) plus its seed. They
travel together as one frozen :class:`DPSGDConfig` from :class:`~rdpest.auditing.DPSGDAuditor`
through :class:`~rdpest.auditing.dpsgd.run.DPSGDRun` to the training functions, which trust it:
the checks run once, when the object is made.

Learning-rate convention: ``learning_rate`` is the step size on the *mean* noisy clipped
gradient, i.e. the parameters move by ``learning_rate / expected_batch_size`` times the summed
clipped per-example gradients plus N(0, σ²C²I) noise. ``expected_batch_size`` is a public
constant: an audit gives both neighbouring runs the size of the data set WITHOUT the canary, so
that the step size itself does not reveal whether the canary is present.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

from rdpest.utils.validation import check_positive, check_sample_rate, check_steps

__all__ = ["GRAD_SAMPLE_MODES", "DPSGDConfig"]

logger = logging.getLogger(__name__)

#: How Opacus computes per-example gradient norms: its general hooks, PyTorch's ExpandedWeights,
#: ghost clipping, or "auto" (the fastest that provably applies to the model).
GRAD_SAMPLE_MODES = ("auto", "hooks", "ew", "ghost")


@dataclass(frozen=True)
class DPSGDConfig:
    """DP-SGD settings of a training run (everything but the seed, the data and the model).

    Parameters
    ----------
    noise_multiplier : float >= 0
        σ, the standard deviation of the Gaussian noise relative to the clipping norm.
    max_grad_norm : float > 0, default 1.0
        C, the per-example clipping norm.
    steps : int >= 1, default 100
        Number of DP-SGD steps (with ``sample_rate=1`` each is one full-batch pass).
    learning_rate : float > 0, default 1.0
        Step size on the mean noisy clipped gradient (see the module docstring).
    sample_rate : float in (0, 1], default 1.0
        Poisson sampling rate q; 1 is full batch (every example in every step).
    expected_batch_size : float > 0, optional
        The public constant the summed noisy gradient is divided by; ``None`` means
        ``max(1, round(sample_rate * n))`` for the data it trains on (:meth:`batch_size_for`).
    grad_sample_mode : {"auto", "hooks", "ew", "ghost"}, default "auto"
        How Opacus clips per-example gradients (see
        :func:`rdpest.auditing.dpsgd.training.train_dp_sgd`).
    noise_scale_bug : float >= 0, default 1.0
        FAULT INJECTION FOR TESTS ONLY: the noise actually added is
        ``noise_multiplier * noise_scale_bug`` while the claim keeps ``noise_multiplier``,
        simulating a buggy trainer that an audit should catch. Leave at 1.0 for real training.

    Raises
    ------
    ValueError
        Naming the first setting that is out of range.

    Examples
    --------
    >>> config = DPSGDConfig(noise_multiplier=1.0, steps=10)
    >>> config.full_batch, config.batch_size_for(900)
    (True, 900.0)
    >>> DPSGDConfig(noise_multiplier=-1.0)
    Traceback (most recent call last):
    ...
    ValueError: noise_multiplier must be >= 0, got -1.0
    """

    noise_multiplier: float
    max_grad_norm: float = 1.0
    steps: int = 100
    learning_rate: float = 1.0
    sample_rate: float = 1.0
    expected_batch_size: float | None = None
    grad_sample_mode: str = "auto"
    noise_scale_bug: float = 1.0

    def __post_init__(self) -> None:
        checked = {
            "noise_multiplier": check_positive(
                self.noise_multiplier, "noise_multiplier", allow_zero=True
            ),
            "max_grad_norm": check_positive(self.max_grad_norm, "max_grad_norm"),
            "steps": check_steps(self.steps),
            "learning_rate": check_positive(self.learning_rate, "learning_rate"),
            "sample_rate": check_sample_rate(self.sample_rate),
            "noise_scale_bug": check_positive(
                self.noise_scale_bug, "noise_scale_bug", allow_zero=True
            ),
        }
        if self.expected_batch_size is not None:
            checked["expected_batch_size"] = check_positive(
                self.expected_batch_size, "expected_batch_size"
            )
        if self.grad_sample_mode not in GRAD_SAMPLE_MODES:
            raise ValueError(
                f"grad_sample_mode must be one of {list(GRAD_SAMPLE_MODES)}, "
                f"got {self.grad_sample_mode!r}"
            )
        for name, value in checked.items():  # store plain Python numbers
            object.__setattr__(self, name, value)

    @property
    def full_batch(self) -> bool:
        """Whether every step uses every example (``sample_rate == 1``)."""
        return self.sample_rate >= 1.0

    @property
    def effective_noise_multiplier(self) -> float:
        """The σ the training really uses: ``noise_multiplier * noise_scale_bug``."""
        return self.noise_multiplier * self.noise_scale_bug

    def batch_size_for(self, n_examples: int) -> float:
        """The public batch-size constant for a data set of ``n_examples`` rows."""
        if self.expected_batch_size is not None:
            return self.expected_batch_size
        return max(1.0, float(round(self.sample_rate * n_examples)))

    def with_batch_size_of(self, n_examples: int) -> DPSGDConfig:
        """This configuration with ``expected_batch_size`` fixed for ``n_examples`` rows."""
        return dataclasses.replace(self, expected_batch_size=self.batch_size_for(n_examples))

    def warn_if_faulty(self, where: str) -> None:
        """Log a warning when the fault injection ``noise_scale_bug`` is active."""
        if self.noise_scale_bug != 1.0:
            logger.warning(
                "%s: noise_scale_bug=%g injects a deliberate fault (noise multiplier %g used "
                "instead of the claimed %g); for tests only",
                where,
                self.noise_scale_bug,
                self.effective_noise_multiplier,
                self.noise_multiplier,
            )
