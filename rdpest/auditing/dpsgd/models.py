"""Default models for DP-SGD audits: multinomial logistic regression, a small MLP and a small CNN.

All are built only from layers that Opacus computes per-sample gradients for (``nn.Linear``,
``nn.Conv2d``; parameter-free reshapes, pooling and ``tanh``) and contain no BatchNorm, which
mixes examples within a batch and so breaks per-example clipping (Opacus, "ModuleValidator";
Yousefpour et al. 2021, "Opacus: User-Friendly Differential Privacy Library in PyTorch").
The CNN follows the small tanh networks used for DP-SGD on image data (Papernot et al. 2021,
"Tempered Sigmoid Activations for Deep Learning with Differential Privacy"), shrunk to the 8×8
digits. Any other architecture can be audited by passing a factory
``f(n_features, n_classes) -> torch.nn.Module``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence

import torch
from torch import nn

__all__ = ["MODELS", "SmallCNN", "make_model"]

MODELS = ("lr", "mlp", "cnn")
#: Hidden width of the "mlp" model (one tanh layer).
MLP_HIDDEN = 64


class _Reshape(nn.Module):
    """Reshape every example (flat or already image-shaped) to ``shape`` (parameter-free)."""

    def __init__(self, shape: Sequence[int]):
        super().__init__()
        self.shape = tuple(int(s) for s in shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], *self.shape)


class SmallCNN(nn.Module):
    """Two tanh convolution blocks with 2×2 average pooling and a linear classifier.

    Parameters
    ----------
    input_shape : tuple of int
        ``(channels, height, width)`` of one example; flat inputs are reshaped to it.
    n_classes : int
        Number of output logits.
    channels : tuple of two int, default (8, 16)
        Output channels of the two convolutions (3×3, padding 1).

    Examples
    --------
    >>> net = SmallCNN((1, 8, 8), 10)
    >>> net(torch.zeros(5, 64)).shape
    torch.Size([5, 10])
    """

    def __init__(
        self, input_shape: Sequence[int], n_classes: int, channels: tuple[int, int] = (8, 16)
    ):
        super().__init__()
        c, h, w = (int(s) for s in input_shape)
        self.features = nn.Sequential(
            _Reshape((c, h, w)),
            nn.Conv2d(c, channels[0], kernel_size=3, padding=1),
            nn.Tanh(),
            nn.AvgPool2d(2, ceil_mode=True),
            nn.Conv2d(channels[0], channels[1], kernel_size=3, padding=1),
            nn.Tanh(),
            nn.AvgPool2d(2, ceil_mode=True),
            nn.Flatten(),
        )
        out_h = math.ceil(math.ceil(h / 2) / 2)
        out_w = math.ceil(math.ceil(w / 2) / 2)
        self.classifier = nn.Linear(channels[1] * out_h * out_w, int(n_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def _check_count(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _image_shape(n_features: int, input_shape) -> tuple[int, int, int]:
    if input_shape is None:
        side = math.isqrt(n_features)
        if side * side != n_features:
            raise ValueError(
                f"the 'cnn' model needs input_shape=(channels, height, width) when n_features "
                f"({n_features}) is not a perfect square"
            )
        return (1, side, side)
    try:
        shape = tuple(int(s) for s in input_shape)
    except (TypeError, ValueError):
        raise ValueError(f"input_shape must be a tuple of integers, got {input_shape!r}") from None
    if len(shape) == 2:
        shape = (1, *shape)
    if len(shape) != 3 or min(shape) < 1:
        raise ValueError(
            f"input_shape must be (height, width) or (channels, height, width) with positive "
            f"entries, got {input_shape!r}"
        )
    if math.prod(shape) != n_features:
        raise ValueError(
            f"input_shape {shape} holds {math.prod(shape)} values but n_features is {n_features}"
        )
    return shape


def make_model(
    name_or_factory: str | Callable[[int, int], nn.Module],
    n_features: int,
    n_classes: int,
    input_shape: Sequence[int] | None = None,
) -> nn.Module:
    """Build an Opacus-compatible classifier.

    Parameters
    ----------
    name_or_factory : {"lr", "mlp", "cnn"} or callable
        ``"lr"``: multinomial logistic regression (``nn.Linear`` on the flattened input);
        ``"mlp"``: one hidden tanh layer of ``MLP_HIDDEN`` units on the flattened input;
        ``"cnn"``: :class:`SmallCNN`; a callable ``f(n_features, n_classes)`` returning an
        ``nn.Module`` builds a user model (it must be picklable, e.g. a module-level function,
        to run audits in parallel).
    n_features : int
        Number of input values per example (64 for the digits).
    n_classes : int
        Number of classes (logits).
    input_shape : tuple of int, optional
        Shape of one example for the CNN, ``(channels, height, width)`` or ``(height, width)``;
        by default a single-channel square image of ``n_features`` pixels. Ignored by ``"lr"``,
        ``"mlp"`` and factories.

    Returns
    -------
    torch.nn.Module
        Mapping a batch of shape ``(b, n_features)`` (or ``(b, *input_shape)``) to logits of
        shape ``(b, n_classes)``. Parameters are initialised from torch's global generator;
        seed it (or load a state dict) for reproducibility.

    Raises
    ------
    ValueError
        If the name is unknown, a count is not a positive integer, the shape does not match, or
        a factory does not return a module.

    Examples
    --------
    >>> model = make_model("lr", 64, 10)
    >>> model(torch.zeros(3, 64)).shape
    torch.Size([3, 10])
    >>> make_model("mlp", 64, 10)(torch.zeros(3, 64)).shape
    torch.Size([3, 10])
    >>> make_model("cnn", 64, 10)(torch.zeros(2, 1, 8, 8)).shape
    torch.Size([2, 10])
    """
    n_features = _check_count(n_features, "n_features", 1)
    n_classes = _check_count(n_classes, "n_classes", 2)
    if callable(name_or_factory) and not isinstance(name_or_factory, str):
        model = name_or_factory(n_features, n_classes)
        if not isinstance(model, nn.Module):
            raise ValueError(
                f"the model factory must return a torch.nn.Module, got {type(model).__name__}"
            )
        return model
    if name_or_factory == "lr":
        return nn.Sequential(nn.Flatten(), nn.Linear(n_features, n_classes))
    if name_or_factory == "mlp":
        return nn.Sequential(
            nn.Flatten(),
            nn.Linear(n_features, MLP_HIDDEN),
            nn.Tanh(),
            nn.Linear(MLP_HIDDEN, n_classes),
        )
    if name_or_factory == "cnn":
        return SmallCNN(_image_shape(n_features, input_shape), n_classes)
    raise ValueError(
        f"unknown model {name_or_factory!r}; use one of {list(MODELS)} or a callable "
        "factory f(n_features, n_classes) -> torch.nn.Module"
    )
