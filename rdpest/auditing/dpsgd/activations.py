"""Activations and pooling of stacked networks, computed faster with the same values.

torch 2.13's CPU ``tanh`` kernel is several times slower than its ``sigmoid``, and in a stacked
MLP the hidden layer's ``tanh`` was a large share of a DP-SGD step. :class:`StackedTanh` computes
the same function through the identity

    tanh(x) = 2·sigmoid(2x) − 1      (since sigmoid(2x) = 1 / (1 + e^{−2x}))

with one allocation and three in-place passes, and its derivative 1 − tanh(x)² from the saved
output, as torch's own ``tanh`` backward does (inside a stack, in the memory of the gradient it
receives: see ``reuse_grad``). The two differ by float rounding: a few float32 units in the last
place of 1 (under 3e-7) in absolute terms. Unlike ``torch.tanh``, the identity does not keep
relative accuracy for inputs of magnitude below about 1e-6, whose tanh it returns within that
absolute error of 0. Stacking (:func:`rdpest.auditing.dpsgd.stacking.stack_model`)
puts it in place of ``nn.Tanh``; on other devices it is ``torch.tanh``.

Likewise torch's ``avg_pool2d`` and its backward are slow on the many small maps of a stacked
CNN, on the CPU and on a GPU (where the backward took a fifth of a stacked digits CNN's step).
:class:`StackedAvgPool2d` computes a 2×2 average pooling of stride 2 over even-sized maps as
((x[2i, 2j] + x[2i, 2j+1]) + (x[2i+1, 2j] + x[2i+1, 2j+1]))·¼, two passes over strided views,
and its backward, ¼ of the output gradient in each of the four positions of its window, as four
strided copies on the CPU and one copy of a broadcast view on a GPU: the same values up to the
order of the sum's float rounding. Stacking puts it in place of such an ``nn.AvgPool2d``; other
sizes and devices take ``avg_pool2d``.
Models per second with both: ``python benchmarks/bench_auditing.py --throughput`` (the CPU) and
``python benchmarks/bench_cuda.py`` (a GPU).
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["StackedAvgPool2d", "StackedTanh", "is_two_by_two_average"]


class _SigmoidTanh(torch.autograd.Function):
    """tanh through 2·sigmoid(2x) − 1; backward from the saved output, 1 − y²."""

    @staticmethod
    def forward(ctx, x, reuse_grad):
        y = x.mul(2)
        y.sigmoid_()
        y.mul_(2).sub_(1)
        ctx.save_for_backward(y)
        ctx.reuse_grad = reuse_grad
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        # torch's own tanh backward, grad·(1 − y²), from the output; written over the incoming
        # gradient where StackedTanh's reuse_grad says nothing else reads it, where it is laid
        # out as y (dense, as every new elementwise result is, so no two elements share memory)
        # and where no second-order graph records the backward (grad mode is off).
        if (
            ctx.reuse_grad
            and not torch.is_grad_enabled()
            and grad.shape == y.shape
            and grad.stride() == y.stride()
            and grad.dtype == y.dtype
        ):
            return torch.ops.aten.tanh_backward.grad_input(grad, y, grad_input=grad), None
        return torch.ops.aten.tanh_backward(grad, y), None


class StackedTanh(nn.Module):
    """``nn.Tanh`` with the CPU forward computed as 2·sigmoid(2x) − 1 (module docstring).

    Parameters
    ----------
    reuse_grad : bool, default=False
        Compute the backward pass in the memory of the gradient it receives (one fresh tensor
        fewer per step, which on the CPU is mostly fewer page faults). Only where nothing else
        reads that gradient: :func:`~rdpest.auditing.dpsgd.stacking.stack_model` sets it for a
        tanh followed by a trainable layer, whose input-gradient product is what arrives here.
        Never for a tanh whose output a caller differentiates with a gradient of their own, or
        whose output gradient a hook keeps: both would find it overwritten.

    Examples
    --------
    >>> x = torch.linspace(-30, 30, 1001)
    >>> bool(torch.allclose(StackedTanh()(x), torch.tanh(x), rtol=0, atol=3e-7))
    True
    """

    def __init__(self, reuse_grad: bool = False):
        super().__init__()
        self.reuse_grad = bool(reuse_grad)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type != "cpu" or not x.is_floating_point():
            return torch.tanh(x)
        return _SigmoidTanh.apply(x, self.reuse_grad)

    def extra_repr(self) -> str:
        return "reuse_grad=True" if self.reuse_grad else ""


def is_two_by_two_average(module: nn.Module) -> bool:
    """Whether ``module`` is an ``nn.AvgPool2d`` with 2×2 windows, stride 2, no padding and no
    divisor override: on even-sized maps, the plain mean of each window (``ceil_mode`` and
    ``count_include_pad`` then change nothing)."""
    if type(module) is not nn.AvgPool2d:
        return False
    pair = nn.modules.utils._pair
    return (
        pair(module.kernel_size) == (2, 2)
        and pair(module.stride if module.stride is not None else module.kernel_size) == (2, 2)
        and pair(module.padding) == (0, 0)
        and module.divisor_override is None
    )


class _WindowMean(torch.autograd.Function):
    """The mean of each 2×2 window of stride 2 over even-sized maps (module docstring)."""

    @staticmethod
    def forward(ctx, x):
        pairs = x[..., 0::2] + x[..., 1::2]  # (.., H, W/2): sums of horizontal pairs
        ctx.input_shape = x.shape
        return (pairs[..., 0::2, :] + pairs[..., 1::2, :]).mul_(0.25)

    @staticmethod
    def backward(ctx, grad):
        return _spread_quarters(grad * 0.25, ctx.input_shape, strided=grad.device.type == "cpu")


def _spread_quarters(quarter: torch.Tensor, shape, strided: bool) -> torch.Tensor:
    """``quarter`` (.., H/2, W/2) copied into all four positions of each 2×2 window of a new
    ``shape`` tensor: as four strided copies (``strided``, the faster on the CPU) or as one
    copy of a broadcast view (one kernel, for GPUs)."""
    if not strided:
        h, w = shape[-2:]
        spread = quarter.unsqueeze(-1).unsqueeze(-3)  # (.., H/2, 1, W/2, 1)
        return spread.expand(*quarter.shape[:-2], h // 2, 2, w // 2, 2).reshape(shape)
    out = quarter.new_empty(shape)
    for row in (0, 1):
        for column in (0, 1):
            out[..., row::2, column::2] = quarter
    return out


class StackedAvgPool2d(nn.Module):
    """An ``nn.AvgPool2d`` with 2×2 windows, stride 2 and no padding
    (:func:`is_two_by_two_average`), computed for stacked networks on the CPU and CUDA as the
    module docstring says; maps of odd size, other devices and non-float input take the pooling
    itself.

    Parameters
    ----------
    pool : nn.AvgPool2d
        The pooling replaced (its ``ceil_mode`` matters on odd sizes).

    Examples
    --------
    >>> x = torch.randn(3, 2, 6, 4)
    >>> pool = nn.AvgPool2d(2)
    >>> bool(torch.allclose(StackedAvgPool2d(pool)(x), pool(x), rtol=0, atol=1e-6))
    True
    """

    def __init__(self, pool: nn.AvgPool2d):
        super().__init__()
        if not is_two_by_two_average(pool):
            raise ValueError(f"StackedAvgPool2d replaces a 2x2 average of stride 2, got {pool!r}")
        self.pool = pool

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if (
            x.device.type not in ("cpu", "cuda")
            or not x.is_floating_point()
            or x.ndim not in (3, 4)
            or x.shape[-1] % 2
            or x.shape[-2] % 2
            or x.shape[-1] == 0
            or x.shape[-2] == 0
        ):
            return self.pool(x)
        return _WindowMean.apply(x)
