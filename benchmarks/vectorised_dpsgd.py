"""A yardstick for the throughput benchmark: full-batch DP-SGD of K linear models or one-hidden-
layer tanh MLPs written directly in torch, without Opacus, autograd or hooks.

It is what this machine allows for these models: per-example norms in closed form
(‖∇W_i‖² + ‖∇b_i‖² = ‖δ_i‖²(‖x_i‖² + 1) per linear layer, Goodfellow 2015), clipped sums as batched
matrix products, one noise draw per stack and parameter. It is never used to audit: it only
times the same arithmetic as an audit's training (Abadi et al. 2016's DP-SGD: clip at C, add
N(0, σ²C²), step lr / n on the sum), so the benchmark can say how close the Opacus-based training
comes to it on the same machine in the same run.

:func:`sgd_models_per_second` times a second reference: the same model trained without privacy
(plain full-batch SGD through autograd: no per-example gradients, clipping or noise), one model
at a time or as rdpest's stacked network: what ordinary torch training of the model reaches on
this machine. It is a reference, not a bound on DP-SGD: autograd's generic backward pass can be
slower than a DP-SGD trainer's specialised one.
"""

from __future__ import annotations

import statistics
import time

import torch
from torch import nn


def _stacked(layer: nn.Linear, copies: int) -> tuple[torch.Tensor, torch.Tensor]:
    weight = layer.weight.detach().unsqueeze(0).repeat(copies, 1, 1).clone()
    bias = layer.bias.detach().unsqueeze(0).repeat(copies, 1).clone()
    return weight, bias


def _tanh(z: torch.Tensor) -> torch.Tensor:
    """tanh(z) = 2·sigmoid(2z) − 1 in place, the form the stacked training uses on the CPU
    (rdpest.auditing.dpsgd.activations: torch 2.13's CPU tanh kernel is several times slower)."""
    return z.mul_(2).sigmoid_().mul_(2).sub_(1)


def train_vectorised(
    net: nn.Sequential,
    X: torch.Tensor,
    y: torch.Tensor,
    copies: int,
    *,
    steps: int,
    noise_multiplier: float,
    max_grad_norm: float = 1.0,
    learning_rate: float = 1.0,
    seed: int = 0,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Train ``copies`` DP-SGD runs of ``net`` (``Linear`` or ``Linear, Tanh, Linear``) on (X, y),
    full batch; returns the stacked (weight, bias) of each layer."""
    linears = [m for m in net if isinstance(m, nn.Linear)]
    if len(linears) not in (1, 2):
        raise ValueError("the yardstick trains Linear or Linear-Tanh-Linear networks")
    params = [_stacked(layer, copies) for layer in linears]
    n = X.shape[0]
    # Rows along the last dimension, (copies, features, n): every product is a plain batched
    # matrix product and the softmax runs over a non-last dimension, the layouts torch's CPU
    # kernels are fastest at (a last-dimension softmax over 10 classes is several times slower).
    x_t = X.t().contiguous().unsqueeze(0).repeat(copies, 1, 1)
    x = x_t.transpose(1, 2)
    x_sq = (X * X).sum(dim=1) + 1.0  # ‖x_i‖² + 1, the same for every step
    onehot_t = nn.functional.one_hot(y, linears[-1].out_features).to(X.dtype).t()
    generator = torch.Generator().manual_seed(seed)
    std = noise_multiplier * max_grad_norm
    step = learning_rate / n
    for _ in range(steps):
        if len(params) == 2:
            (w1, b1), (w2, b2) = params
            h_t = _tanh(torch.baddbmm(b1.unsqueeze(2), w1, x_t))
            z_t = torch.baddbmm(b2.unsqueeze(2), w2, h_t)
        else:
            ((w2, b2),) = params
            z_t = torch.baddbmm(b2.unsqueeze(2), w2, x_t)
        delta_t = torch.softmax(z_t, dim=1) - onehot_t  # ∂loss_i/∂logits, (copies, classes, n)
        if len(params) == 2:
            back_t = torch.bmm(w2.transpose(1, 2), delta_t) * (1.0 - h_t * h_t)
            squared = (delta_t * delta_t).sum(1) * ((h_t * h_t).sum(1) + 1.0)
            squared += (back_t * back_t).sum(1) * x_sq
            pairs = [(back_t, x), (delta_t, h_t.transpose(1, 2))]
        else:
            squared = (delta_t * delta_t).sum(1) * x_sq
            pairs = [(delta_t, x)]
        coeff = (max_grad_norm / (squared.sqrt() + 1e-6)).clamp(max=1.0).unsqueeze(1)
        for (weight, bias), (delta, a) in zip(params, pairs, strict=True):
            clipped = delta * coeff
            grad_w = torch.bmm(clipped, a)
            grad_b = clipped.sum(dim=2)
            grad_w += torch.randn(grad_w.shape, generator=generator) * std
            grad_b += torch.randn(grad_b.shape, generator=generator) * std
            weight -= step * grad_w
            bias -= step * grad_b
    return params


def _one_thread_rate(copies: int, repeats: int, train) -> float:
    """Models per second of ``train()`` (one training of ``copies`` models) on one thread of this
    machine: the median of ``repeats`` timings."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            train()
            times.append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    return copies / statistics.median(times)


def models_per_second(
    net: nn.Sequential, X, y, copies: int, *, steps: int, noise_multiplier: float, repeats: int = 3
) -> float:
    """Models per second of :func:`train_vectorised` on one thread of this machine (median of
    ``repeats`` timings of one stack)."""
    X = torch.as_tensor(X, dtype=torch.float32)
    y = torch.as_tensor(y, dtype=torch.long)
    return _one_thread_rate(
        copies,
        repeats,
        lambda: train_vectorised(net, X, y, copies, steps=steps, noise_multiplier=noise_multiplier),
    )


def train_sgd(
    net: nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    copies: int,
    *,
    steps: int,
    learning_rate: float = 1.0,
) -> nn.Module:
    """Full-batch SGD without privacy: ``copies`` 1 trains ``net`` itself; above 1, rdpest's
    stacked network of ``copies`` copies of ``net`` (the network the audit trains) on the data
    repeated once per copy. Each copy's step is lr times its mean cross-entropy gradient, the
    step DP-SGD takes before clipping and noise."""
    from rdpest.auditing.dpsgd.stacking import stack_model

    model = net if copies == 1 else stack_model(net, copies)
    rows = X if copies == 1 else X.repeat(copies, *([1] * (X.ndim - 1)))
    targets = y if copies == 1 else y.repeat(copies)
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate / X.shape[0])
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(rows), targets, reduction="sum").backward()
        optimizer.step()
    return model


def sgd_models_per_second(
    net: nn.Module, X, y, copies: int, *, steps: int, repeats: int = 3
) -> float:
    """Models per second of :func:`train_sgd` (non-private) on one thread of this machine
    (median of ``repeats`` timings, each from a fresh copy of ``net``)."""
    import copy

    X = torch.as_tensor(X, dtype=torch.float32)
    y = torch.as_tensor(y, dtype=torch.long)
    fresh = iter([copy.deepcopy(net) for _ in range(repeats)])
    return _one_thread_rate(
        copies, repeats, lambda: train_sgd(next(fresh), X, y, copies, steps=steps)
    )
