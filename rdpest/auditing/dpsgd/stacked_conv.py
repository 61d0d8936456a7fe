"""The stacked convolution (:mod:`rdpest.auditing.dpsgd.stacking`) and the layout its activations
take between convolutions.

Two layouts of a stack's 4-D activations:

- rows, (K·n, c, h, w): row ``k·n + i`` is example i as seen by copy k, the layout of the data,
  of every linear layer and of the loss;
- grouped, (n, K·c, h, w): example i's maps of all copies side by side, copy k's c channels
  forming channel group k. A grouped convolution (``groups = K · layer.groups``) acts on this
  layout directly, group k with copy k's kernels.

A convolution between rows costs two layout changes forward (its input to grouped, its output
back), their two transposes backward and two more in the clipped sums. Where the layers after a
convolution act on each channel map alone (elementwise activations, 2-D pooling) up to the next
convolution or a ``nn.Flatten()``, the stack keeps the grouped layout instead
(:func:`grouped_outputs`): the convolution's output stays grouped, the next convolution takes it
as it is, and :class:`StackedFlatten` lays the last maps out as rows once, at the flattened size
(a fraction of the convolutions' activations). Per-channel layers compute the same numbers in
either layout. The first convolution, over the data that every copy shares, computes its grouped
output directly (``rdpest.auditing.dpsgd._conv``).

Opacus's hooks see a grouped layer's input with n examples in its first dimension instead of
K·n; the per-row norms a grouped layer reports are still laid out as rows (the order of every
other layer's), and it sets Opacus's ``max_batch_len`` to K·n, the loss's batch, which is what
a mean-reduced loss's output gradients are rescaled by.
"""

from __future__ import annotations

import copy

import torch
from opacus.grad_sample.utils import register_norm_sampler
from opacus.utils.module_utils import requires_grad
from torch import nn

from rdpest.auditing.dpsgd import _conv
from rdpest.auditing.dpsgd._rows import _stack_parameters

__all__ = ["StackedConv2d", "StackedFlatten", "grouped_outputs", "numeric_padding"]

# Parameter-free layers that act on each channel map of an example alone, so that they compute
# the same numbers on grouped maps as on rows (the elementwise activations, beside these, are
# given by the caller).
_PER_CHANNEL = (nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveMaxPool2d, nn.AdaptiveAvgPool2d)


def numeric_padding(conv: nn.Conv2d) -> tuple[int, int] | None:
    """A convolution's zero padding per side, as numbers: ``padding="valid"`` is none, and
    ``padding="same"`` is dilation·(kernel − 1)/2 on each side of each axis; None where "same"
    pads one side more than the other (an even kernel at odd dilation).

    Examples
    --------
    >>> numeric_padding(nn.Conv2d(1, 2, (3, 5), padding="same"))
    (1, 2)
    >>> numeric_padding(nn.Conv2d(1, 2, 3, padding="valid")), numeric_padding(nn.Conv2d(1, 2, 3))
    ((0, 0), (0, 0))
    >>> numeric_padding(nn.Conv2d(1, 2, 4, padding="same")) is None
    True
    """
    if not isinstance(conv.padding, str):
        return tuple(int(p) for p in conv.padding)
    if conv.padding == "valid":
        return (0, 0)
    totals = [d * (k - 1) for d, k in zip(conv.dilation, conv.kernel_size, strict=True)]
    if any(total % 2 for total in totals):
        return None
    return tuple(total // 2 for total in totals)


def grouped_outputs(net: nn.Sequential, elementwise: tuple) -> list[bool]:
    """For each layer of a stackable ``net``: whether a convolution there keeps its output in
    the grouped layout, which holds when every layer after it up to the next convolution or an
    ``nn.Flatten()`` is a per-channel layer (an ``elementwise`` activation type or 2-D pooling),
    and a next convolution or flatten is reached. False for every other layer."""
    layers = list(net)
    kept = [False] * len(layers)
    for i, module in enumerate(layers):
        if type(module) is not nn.Conv2d:
            continue
        for after in layers[i + 1 :]:
            kind = type(after)
            if kind is nn.Conv2d or (
                kind is nn.Flatten and (after.start_dim, after.end_dim) == (1, -1)
            ):
                kept[i] = True
                break
            if kind not in elementwise and kind not in _PER_CHANNEL:
                break
    return kept


class StackedFlatten(nn.Module):
    """``nn.Flatten()`` of a stack's grouped maps (n, K·c, h, w), returned as rows (K·n, c·h·w):
    row ``k·n + i`` holds example i's maps of copy k, flattened as ``nn.Flatten`` does.

    Examples
    --------
    >>> maps = torch.randn(5, 3 * 2, 4, 4)  # 5 examples, 3 copies of 2 channels
    >>> rows = StackedFlatten(3)(maps)
    >>> bool(torch.equal(rows[1 * 5 + 4], maps[4, 2:4].flatten()))  # copy 1, example 4
    True
    """

    def __init__(self, copies: int):
        super().__init__()
        self.copies = int(copies)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim < 2 or x.shape[1] % self.copies:
            raise ValueError(
                f"StackedFlatten expects grouped maps (n, copies * channels, ...) with "
                f"{self.copies} copies, got shape {tuple(x.shape)}"
            )
        return _conv.grouped_to_rows(x, self.copies).reshape(self.copies * x.shape[0], -1)

    def extra_repr(self) -> str:
        return f"copies={self.copies}"


class StackedConv2d(nn.Module):
    """K copies of a 2-D convolution, applied as one grouped convolution
    (``groups = K · layer.groups``) whose group k sees only copy k's channels and kernels.

    Its input and output are rows (K·n, c, h, w), row ``k·n + i`` using copy ``k``, unless
    ``grouped_input`` or ``grouped_output`` is set: that side is then in the grouped layout
    (n, K·c, h, w) of the module docstring. :func:`~rdpest.auditing.dpsgd.stacking.stack_model`
    sets them where the layers between convolutions allow.

    Parameters
    ----------
    layer : nn.Conv2d
        The layer whose weights every copy starts from (``padding_mode="zeros"``).
    copies : int
        K.

    Examples
    --------
    >>> layer = nn.Conv2d(2, 3, 3, padding=1)
    >>> stacked = StackedConv2d(layer, 4)
    >>> x = torch.randn(4 * 5, 2, 6, 6)
    >>> bool(torch.allclose(stacked(x), layer(x), atol=1e-6))
    True
    """

    def __init__(self, layer: nn.Conv2d, copies: int):
        super().__init__()
        if type(layer) is not nn.Conv2d or layer.padding_mode != "zeros":
            raise ValueError(
                f"StackedConv2d stacks nn.Conv2d layers with padding_mode='zeros', got {layer!r}"
            )
        padding = numeric_padding(layer)
        if padding is None:
            raise ValueError(
                f"StackedConv2d needs the same zero padding on both sides of each axis; "
                f"padding='same' pads one side more for {layer!r}"
            )
        self.copies = int(copies)
        # The geometry of one copy: Opacus's per-example gradients of a convolution are computed
        # from it (a plain nn.Conv2d kept outside the module tree, so it is never trained).
        self._geometry = [copy.deepcopy(layer).requires_grad_(False).to("meta")]
        self._geometry[0].padding = padding  # string padding as numbers, which every product takes
        self.in_channels, self.out_channels = layer.in_channels, layer.out_channels
        self.grouped_input = False
        self.grouped_output = False
        # As for StackedLinear: set by rdpest.auditing.dpsgd.one_pass for one step; and for a
        # stack's first layer, whose input is the data repeated once per copy, see _conv.
        self.keep_rows = False
        self.kept_rows: tuple[torch.Tensor, torch.Tensor, bool] | None = None
        self.repeated_input = False
        self.repeat_check: tuple[torch.Tensor, int, bool] | None = None
        self.patch_cache: tuple | None = None  # see _conv._shared_patches
        _stack_parameters(self, layer)

    @property
    def geometry(self) -> nn.Conv2d:
        """A plain convolution with one copy's geometry (on the meta device: no data)."""
        return self._geometry[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k, c = self.copies, self.in_channels
        if self.grouped_input:
            if x.ndim != 4 or x.shape[1] != k * c:
                raise ValueError(
                    f"StackedConv2d expects grouped maps (n, {k} copies * {c}, height, width), "
                    f"got shape {tuple(x.shape)}"
                )
            grouped = x
            # The loss's batch, which Opacus rescales a mean-reduced loss's output gradients by
            # (it would take n, this input's first dimension): set where Opacus captures this
            # input, as the largest of the captured batches (its own rule; it deletes the value
            # after the backward pass), so that a forward pass under no_grad or in eval mode
            # between a training forward and its backward leaves it alone.
            if self.training and torch.is_grad_enabled() and requires_grad(self):
                self.max_batch_len = max(getattr(self, "max_batch_len", 0), k * x.shape[0])
        else:
            if x.ndim != 4 or x.shape[0] % k or x.shape[1] != c:
                raise ValueError(
                    f"StackedConv2d expects rows (copies * n, {c}, height, width), "
                    f"got shape {tuple(x.shape)}"
                )
            shared = _conv.shared_images(self, x)
            if shared is not None:
                return _conv.shared_forward(self, shared)
            grouped = _conv.rows_to_grouped(x, k)
        g = self.geometry
        out = nn.functional.conv2d(
            grouped,
            self.weight.reshape(k * self.out_channels, *self.weight.shape[2:]),
            None if self.bias is None else self.bias.reshape(-1),
            stride=g.stride,
            padding=g.padding,
            dilation=g.dilation,
            groups=k * g.groups,
        )
        return out if self.grouped_output else _conv.grouped_to_rows(out, k)

    def clipped_sums(self, coeff: torch.Tensor) -> None:
        """Set each copy's gradient to its sum of clipped per-row gradients, from the kept
        activations and output gradients: the weight gradient of the grouped convolution for the
        output gradients c_r·g_r (as the second backward pass forms it, without the pass through
        the other layers), and Σ_r c_r·Σ_positions g_r for the bias; c is laid out as rows."""
        a, g, shared = self.kept_rows
        self.kept_rows = None
        if shared:  # a, g: every row's weight and bias gradients (_conv.shared_gradients)
            _conv.shared_clipped_sums(self, a, g, coeff)
            return
        k, o = self.copies, self.out_channels
        coeff = coeff.to(g.dtype)
        # In place: the kept output gradients serve nothing else once the norms are taken (the
        # backward pass is over, and no other layer keeps this memory).
        if self.grouped_output:  # (n, K·o, h', w'): row k·n + i's maps are [i, k·o:(k+1)·o]
            g, n = g.contiguous(), g.shape[0]
            per_copy = g.view(n, k, o, *g.shape[2:])
            per_copy.mul_(coeff.view(k, n).t().reshape(n, k, 1, 1, 1))
            scaled, bias_dims = g, (0, 3, 4)
        else:
            scaled = g.mul_(coeff.reshape(-1, *([1] * (g.ndim - 1))))
            per_copy = scaled.reshape(k, -1, o, *scaled.shape[2:])
            scaled, bias_dims = _conv.rows_to_grouped(scaled, k), (1, 3, 4)
        if self.weight.requires_grad:
            geometry = self.geometry
            grad = nn.grad.conv2d_weight(
                a if self.grouped_input else _conv.rows_to_grouped(a, k),
                (k * o, *self.weight.shape[2:]),
                scaled,
                stride=geometry.stride,
                padding=geometry.padding,
                dilation=geometry.dilation,
                groups=k * geometry.groups,
            )
            self.weight.grad = grad.reshape(self.weight.shape).to(self.weight.dtype)
        if self.bias is not None and self.bias.requires_grad:
            self.bias.grad = per_copy.sum(dim=bias_dims).to(self.bias.dtype)

    def extra_repr(self) -> str:
        layout = "".join(
            f", {side}=grouped"
            for side, on in (("input", self.grouped_input), ("output", self.grouped_output))
            if on
        )
        return f"copies={self.copies}, {self.geometry.extra_repr()}{layout}"


# Its per-row norms for Opacus's ghost clipping (row r's gradient lies in its copy's slice and is
# the per-example gradient of a plain convolution of the same geometry):
register_norm_sampler(StackedConv2d)(_conv.stacked_conv_norm_sample)
