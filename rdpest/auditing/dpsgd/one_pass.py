"""One backward pass per DP-SGD step for a stack of linear layers: the clipped sums in closed form.

Opacus's ghost clipping (Li et al. 2022, "Large Language Models Can Be Strong Differentially
Private Learners") runs two backward passes per step. The first gives each example's gradient
norm from the inputs a_r and output gradients g_r of every layer, which its hooks keep; the
second forms the gradient of Σ_r c_r·loss_r, with the clipping factors
c_r = min(1, C / (‖∇loss_r‖ + 1e-6)) held constant.

For a network whose rows never interact (what :func:`~rdpest.auditing.dpsgd.stacking.stackable`
admits), row r's loss depends on row r's activations alone, so the second pass's output gradient
at row r of any layer is c_r·g_r. The clipped sum of a linear layer is then Σ_r c_r·g_r·a_rᵀ for
the weight and Σ_r c_r·g_r for the bias; for a stacked linear layer, one batched matrix product
over its copies, from tensors the first pass already kept. Where every trainable parameter
belongs to such a layer, :class:`OnePassTensor` computes these sums instead of the second pass:
the vectorised form of per-example clipping (Abadi et al. 2016), with per-example norms
‖g_r a_rᵀ‖ = ‖g_r‖·‖a_r‖ (Goodfellow 2015, "Efficient per-example gradient computations").
For a stacked convolution the clipped sum is the weight gradient of its grouped convolution at
the output gradients c_r·g_r (and Σ_r c_r·g_r summed over positions for the bias): one
weight-only convolution backward instead of the whole second pass through every layer. Anything
else (another layer type, a loss Opacus must reshape) runs Opacus's own two passes.

Everything else is Opacus's: its hooks compute the norms, its module the clipping factors, its
optimizer the noise and the step. The criterion is the same cross-entropy, computed on the CPU with
the logits laid out classes first (a transposed copy, unless a stacked first layer already produced
them so), whose kernel is several times faster there for few classes; losses and gradients equal
torch's to float rounding (tested).
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from opacus.utils.fast_gradient_clipping_utils import (
    DPLossFastGradientClipping,
    DPTensorFastGradientClipping,
)
from opacus.utils.module_utils import requires_grad
from torch import nn

__all__ = ["OnePassLoss", "OnePassTensor", "one_pass_layers", "row_cross_entropy"]


class _TransposedCrossEntropy(torch.autograd.Function):
    """Per-row cross-entropy of (rows, classes) logits, computed over classes laid out first.

    Forward: log p = log_softmax over the first dimension of the transposed logits, loss_r =
    −log p[y_r, r]. Backward: the gradient (p − onehot(y))·grad_r, returned transposed (no copy
    back). The same formulas as torch's cross-entropy; only the memory layout differs.
    """

    @staticmethod
    def forward(ctx, logits, target):
        log_p = F.log_softmax(logits.t().contiguous(), dim=0)
        index = target.unsqueeze(0)
        ctx.save_for_backward(log_p, index)
        return -log_p.gather(0, index).squeeze(0)

    @staticmethod
    def backward(ctx, grad):
        log_p, index = ctx.saved_tensors
        gradient = log_p.exp()
        gradient.scatter_add_(0, index, torch.full_like(index, -1, dtype=gradient.dtype))
        gradient.mul_(grad.unsqueeze(0))
        return gradient.t(), None


def row_cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-row cross-entropy, ``F.cross_entropy(logits, target, reduction="none")``.

    On the CPU it is computed with the classes laid out first: torch's last-dimension
    log-softmax is slow for few classes (about 13 ms against 1 ms for 57,600 rows of 10 logits
    on one thread, torch 2.13). Losses and gradients are torch's to float rounding (tested).

    Examples
    --------
    >>> z, t = torch.randn(6, 3), torch.tensor([0, 1, 2, 0, 1, 2])
    >>> bool(torch.allclose(row_cross_entropy(z, t), F.cross_entropy(z, t, reduction="none")))
    True
    """
    if logits.device.type != "cpu" or logits.ndim != 2 or target.ndim != 1:
        return F.cross_entropy(logits, target, reduction="none")
    return _TransposedCrossEntropy.apply(logits, target)


def _plain_cross_entropy(criterion) -> bool:
    """Whether ``criterion`` is ``nn.CrossEntropyLoss`` with no weights and no smoothing."""
    return (
        type(criterion) is nn.CrossEntropyLoss
        and criterion.weight is None
        and criterion.label_smoothing == 0.0
    )


def one_pass_layers(module: nn.Module) -> list[nn.Module] | None:
    """The stacked linear and convolution layers of an Opacus-wrapped stack that train, when
    they hold every trainable parameter (the one-pass sums then apply); otherwise None."""
    from rdpest.auditing.dpsgd.stacking import StackedConv2d, StackedLinear

    layers = [
        m
        for m in module.modules()
        if type(m) in (StackedLinear, StackedConv2d) and requires_grad(m, recurse=True)
    ]
    covered = {id(p) for m in layers for p in m.parameters() if p.requires_grad}
    trainable = [p for p in module.parameters() if p.requires_grad]
    if not layers or len(covered) != len(trainable) or any(id(p) not in covered for p in trainable):
        return None
    return layers


class OnePassTensor(DPTensorFastGradientClipping):
    """Opacus's ghost-clipping loss tensor whose ``backward`` takes one pass (module docstring).

    Arithmetic on it (``loss / 2``) returns Opacus's own tensor, whose backward takes Opacus's
    two passes: slower, the same gradients.
    """

    def backward(self):
        layers = one_pass_layers(self.module)
        if layers is None:
            return super().backward()
        if self.loss_reduction == "mean":
            reduced = torch.mean(self.loss_per_sample, dim=0)
        elif self.loss_reduction == "sum":
            reduced = torch.sum(self.loss_per_sample, dim=0)
        else:  # pragma: no cover - Opacus's wrapper refuses other reductions first
            raise ValueError(f"loss_reduction must be 'mean' or 'sum', got {self.loss_reduction!r}")
        for layer in layers:
            layer.keep_rows = True
        try:
            # The norms need the output gradients only, not the (unclipped) parameter gradients:
            # accumulating into one parameter lets autograd skip the other weight products.
            first = layers[0]
            target = first.bias if first.bias is not None and first.bias.requires_grad else None
            with warnings.catch_warnings():
                # torch notes that the first layer's hook fires with no input gradient: the
                # data needs none, and the hook reads the output gradient only.
                warnings.filterwarnings("ignore", "Full backward hook is firing", UserWarning)
                reduced.backward(inputs=[target] if target is not None else None)
            coeff = self.module.get_clipping_coef()
            self.optimizer.zero_grad(set_to_none=True)
            for layer in layers:
                layer.clipped_sums(coeff)
        finally:
            for layer in layers:
                layer.keep_rows = False
                layer.kept_rows = None


class OnePassLoss(DPLossFastGradientClipping):
    """Opacus's ghost-clipping criterion wrapper returning :class:`OnePassTensor` for a plain
    cross-entropy (computed by :func:`row_cross_entropy`); anything else is Opacus's own."""

    def __call__(self, *args, shape=None, **kwargs) -> DPTensorFastGradientClipping:
        plain = shape is None and not kwargs and len(args) == 2
        if not plain or not _plain_cross_entropy(self.criterion):
            return super().__call__(*args, shape=shape, **kwargs)
        per_row = row_cross_entropy(*args)
        return OnePassTensor(self.module, self.optimizer, per_row, self.loss_reduction)
