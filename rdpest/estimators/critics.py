"""Torch critic networks for the DV estimator, their input standardisation and their evaluation.

The critic maps a raw sample x to g(x) = M · tanh(h(z)/M), where z is x standardised with
statistics of the training split (stored as float64 buffers, so the module is self-contained) and
h is an MLP. ``INPUT_TRANSFORMS`` name the three standardisations: "standard",
z = (x − mean)/sd; "asinh", z = asinh((x − median)/s) with s the interquartile range scaled to a
normal's standard deviation; "quadratic", z followed by the products z_i·z_j (i ≤ j).

"asinh" is for heavy tails: a ReLU network is piecewise linear in z, so beyond the bulk of the
training rows it grows like log|x| instead of linearly in x (a log ratio that levels off, as a
Student-t or Laplace shift's does, is not extrapolated into a steep ramp), and a few far outliers
no longer set the scale and squeeze the bulk of the rows together.

"quadratic" is for the opposite case, log ratios that keep growing like a quadratic. The log
ratio of two Gaussians (a scale change, correlated coordinates) is a quadratic form in x, hence
linear in these inputs, and a ReLU network on them keeps following it beyond the bulk of Q's
rows, where a classifier fed z alone levels off near the last value it saw there. The price is
width (d + d(d+1)/2 inputs for d features) and, on heavy tails, a steeper extrapolation.

The standardisation runs in float64 and only z is cast to the network's float32, so an affine
change of the samples (an offset of 1e8, a scale of 1e-13) leaves z, and the critic, unchanged:
casting x to float32 first would round such samples to a few distinct values. The bound M keeps
the Donsker–Varadhan objective finite: with an unbounded critic the empirical objective is
unbounded above on finite samples (a critic that grows without limit on the P points drives its
log-mean-exponential term to infinity), while M · tanh(·/M) is the identity for
|h| << M.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy import stats
from torch import nn

__all__ = ["ACTIVATIONS", "INPUT_TRANSFORMS", "BoundedMLP"]

_Z_LIMIT = 1e9  # standardised inputs are clamped here (BoundedMLP.standardise)
ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "elu": nn.ELU, "gelu": nn.GELU}
INPUT_TRANSFORMS = ("standard", "asinh", "quadratic")


class BoundedMLP(nn.Module):
    """MLP critic with standardised inputs and output bounded in (−M, M).

    Parameters
    ----------
    input_mean, input_scale : torch.Tensor of shape (d,)
        Standardisation statistics (from the training split).
    hidden_layer_sizes : tuple of int
        Width of each hidden layer; empty for a linear critic.
    activation : str
        One of ``ACTIVATIONS``.
    output_bound : float
        M in g = M · tanh(h / M).
    inputs : {"standard", "asinh", "quadratic"}, default="standard"
        z = (x − input_mean) / input_scale, asinh of it, or z with its pairwise products
        appended (see the module docstring).

    Examples
    --------
    >>> critic = BoundedMLP(torch.zeros(2), torch.ones(2), (8,), "relu", 5.0)
    >>> critic(torch.zeros(3, 2)).shape
    torch.Size([3])
    """

    def __init__(
        self,
        input_mean,
        input_scale,
        hidden_layer_sizes,
        activation,
        output_bound,
        inputs="standard",
    ):
        super().__init__()
        if inputs not in INPUT_TRANSFORMS:
            raise ValueError(f"critic inputs must be one of {INPUT_TRANSFORMS}, got {inputs!r}")
        self.inputs = inputs
        self.register_buffer("input_mean", torch.as_tensor(input_mean, dtype=torch.float64))
        self.register_buffer("input_scale", torch.as_tensor(input_scale, dtype=torch.float64))
        self.output_bound = float(output_bound)
        layers: list[nn.Module] = []
        width = self.input_mean.numel()
        if inputs == "quadratic":
            width += width * (width + 1) // 2
        for size in hidden_layer_sizes:
            layers += [nn.Linear(width, int(size)), ACTIVATIONS[activation]()]
            width = int(size)
        layers.append(nn.Linear(width, 1))
        self.net = nn.Sequential(*layers)

    def standardise(self, x: torch.Tensor) -> torch.Tensor:
        """z = (x − mean) / scale (its asinh, or z and its products z_i·z_j, i ≤ j) computed in
        float64, returned in float32 (the net's dtype)."""
        z = (x.to(torch.float64) - self.input_mean) / self.input_scale
        inputs = getattr(self, "inputs", "standard")  # critics pickled before the option
        if inputs == "asinh":
            z = torch.asinh(z)
        else:
            # A row 1e39 standard deviations out was inf in float32 (its products z_i·z_j from
            # 1.8e19), and the net's inf − inf a NaN critic, estimate and score. Clamped at
            # 1e9 (training rows lie within √n of the mean), the inputs and products stay
            # finite in float32 through the net, and the critic is a fixed function of the row.
            z = z.clamp(-_Z_LIMIT, _Z_LIMIT)
        if inputs == "quadratic":
            i, j = torch.triu_indices(z.shape[-1], z.shape[-1], device=z.device)
            z = torch.cat([z, z[..., i] * z[..., j]], dim=-1)
        return z.to(torch.float32)

    def head(self, z: torch.Tensor) -> torch.Tensor:
        """The bounded MLP on already standardised inputs z (float32)."""
        h = self.net(z).squeeze(-1)
        return self.output_bound * torch.tanh(h / self.output_bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.standardise(x))


def _standardisation(pooled: np.ndarray, inputs: str = "standard") -> tuple[np.ndarray, np.ndarray]:
    """Per-feature float64 centre and scale of the pooled training samples.

    ``inputs="standard"`` (and ``"quadratic"``, which standardises as it does): the mean and the
    standard deviation, except for a constant feature (all its rows equal, whose computed spread
    is only the mean's rounding noise): that one is divided by its largest magnitude (1 if it
    is all zeros), so it standardises to ~0 at any magnitude. Any other feature is
    standardised, however small its spread against its magnitude (values 1e14 + N(0, 1) vary
    by 64 float64 steps per standard deviation, and were once taken for constant). Samples near
    the float64 limit, whose sum or squares overflow, are pre-divided by their largest
    magnitude.

    ``inputs="asinh"``: the median and the interquartile range divided by 2·Φ⁻¹(3/4) ≈ 1.349 (a
    normal's standard deviation, robust to outliers), except for a feature whose interquartile
    range is 0 (over half of its rows share one value), which keeps the standard centre and
    scale.
    """
    peak = np.abs(pooled).max(axis=0)
    # Dividing the rows by their largest magnitude (1 for an all-zero feature) keeps sums,
    # squares and quantiles finite near the float64 limit.
    safe_peak = np.where(peak > 0.0, peak, 1.0)
    with np.errstate(over="ignore", invalid="ignore"):
        mean, scale = pooled.mean(axis=0), pooled.std(axis=0)
    if not (np.isfinite(mean).all() and np.isfinite(scale).all()):
        unit = pooled / safe_peak
        mean, scale = unit.mean(axis=0) * peak, unit.std(axis=0) * peak
    constant = np.all(pooled == pooled[:1], axis=0) | ~(scale > 0.0)
    scale = np.where(constant, safe_peak, scale)
    if inputs != "asinh":  # "standard" and "quadratic"
        return mean, scale
    unit = pooled / safe_peak
    median = np.median(unit, axis=0) * safe_peak
    spread = stats.iqr(unit, axis=0, scale="normal") * safe_peak
    robust = np.isfinite(spread) & (spread > 0.0)
    return np.where(robust, median, mean), np.where(robust, spread, scale)


# Rows per forward pass when a fitted critic is evaluated (bounds the memory of one pass).
_EVAL_CHUNK = 65536


def _evaluate(critic: BoundedMLP, A: np.ndarray) -> np.ndarray:
    """The critic's float64 values on the rows of A (:func:`_evaluate_parts` of one part)."""
    return _evaluate_parts(critic, A)[0]


def _evaluate_parts(critic: BoundedMLP, *parts: np.ndarray) -> list[np.ndarray]:
    """The critic's float64 values on each part: one function of the network's input, whatever
    part a row is in.

    A float32 network's value for a row may change in its last bits with the size of the batch
    and the row's place in it (matrix products compute leftover rows with other kernels). The
    training and certifying parts of P and Q, evaluated as four batches of different sizes, gave
    the same input values a few ulps apart, and the threshold certificate, which compares exactly
    at a tied training value, read that as separation: positive bounds at P = Q (a point mass,
    1000 against 14 values; or rows that differ in float64 but standardise to the same float32
    input, as N(0, 1) values do beside an outlier of 1e10). Here all parts are standardised, and
    each DISTINCT float32 input is evaluated once, in one pass over the sorted distinct inputs
    (chunks of _EVAL_CHUNK rows): equal inputs share one value, and no value depends on which
    sample or part its row came from.
    """
    device = next(critic.parameters()).device
    pooled = np.concatenate(parts)
    n = len(pooled)
    with torch.no_grad():
        z = [
            critic.standardise(torch.as_tensor(pooled[i : i + _EVAL_CHUNK]).to(device)).cpu()
            for i in range(0, n, _EVAL_CHUNK)
        ]
        z = torch.cat(z).numpy().reshape(n, -1) if z else np.empty((0, 1), dtype=np.float32)
        distinct, inverse = np.unique(z, axis=0, return_inverse=True)
        values = np.empty(len(distinct))
        for i in range(0, len(distinct), _EVAL_CHUNK):
            chunk = torch.as_tensor(distinct[i : i + _EVAL_CHUNK]).to(device)
            values[i : i + _EVAL_CHUNK] = critic.head(chunk).double().cpu().numpy()
    values = values[inverse.reshape(-1)]
    return np.split(values, np.cumsum([len(a) for a in parts])[:-1])


def _classifier_loss(g_p, g_q):
    # Logistic loss with each class averaged separately: the minimiser's logit is log p/q whatever
    # the two sample sizes (with pooled averaging it would be shifted by log(n_p / n_q)).
    return 0.5 * (
        torch.nn.functional.softplus(-g_p).mean() + torch.nn.functional.softplus(g_q).mean()
    )


#: The critic bounds M a float32 critic can hold at full precision: its normal numbers (below,
#: M loses digits, and below about 7e-46 it is 0 and M·tanh(h/M) NaN).
CRITIC_BOUND_RANGE = (float(np.finfo(np.float32).tiny), float(np.finfo(np.float32).max))


def _cyclic(step: int, half: int, n: int, device) -> torch.Tensor:
    """Indices step*half ... (step+1)*half - 1 wrapped around n (the smaller sample cycles)."""
    return torch.arange(step * half, (step + 1) * half, device=device) % n
