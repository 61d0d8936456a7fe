"""Built-in models for DP-SGD audits: logistic regression, an MLP and CNNs (MNIST, CIFAR-10).

All are built only from layers that Opacus computes per-sample gradients for (``nn.Linear``,
``nn.Conv2d``; parameter-free reshapes, pooling and ``tanh``) and contain no BatchNorm, which
mixes examples within a batch and so breaks per-example clipping (Opacus, "ModuleValidator";
Yousefpour et al. 2021, "Opacus: User-Friendly Differential Privacy Library in PyTorch").
The CNN follows the small tanh networks used for DP-SGD on image data (Papernot et al. 2021,
"Tempered Sigmoid Activations for Deep Learning with Differential Privacy"), shrunk to the 8×8
digits. ``"mnist_cnn"`` and ``"cifar10_cnn"`` are that paper's MNIST and CIFAR-10 networks
(:func:`mnist_cnn`, :func:`cifar10_cnn`), the standard DP-SGD benchmark CNNs for these data sets;
the audited paper (Kim, Varshney & Alabi 2026) audits CNNs trained on MNIST and CIFAR-10,
following Nasr et al. 2023 and Annamalai & De Cristofaro 2024. Any other architecture can be
audited by passing a factory ``f(n_features, n_classes) -> torch.nn.Module``.
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Callable, Sequence

import torch
from torch import nn

from rdpest.auditing.identity import callable_identity

__all__ = [
    "MODELS",
    "PAPER_INPUT_SHAPES",
    "SmallCNN",
    "check_model",
    "cifar10_cnn",
    "factory_identity",
    "make_model",
    "mnist_cnn",
]

MODELS = ("lr", "mlp", "cnn", "mnist_cnn", "cifar10_cnn")
#: The image shape ``(channels, height, width)`` each of the literature's CNNs is built for.
PAPER_INPUT_SHAPES = {"mnist_cnn": (1, 28, 28), "cifar10_cnn": (3, 32, 32)}
#: Hidden width of the "mlp" model (one tanh layer).
MLP_HIDDEN = 64


class SmallCNN(nn.Sequential):
    """Two tanh convolution blocks with 2×2 average pooling and a linear classifier.

    A plain ``nn.Sequential`` (no ``forward`` of its own), so audits can train it stacked
    (:mod:`rdpest.auditing.dpsgd.stacking`).

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
    >>> import torch
    >>> net = SmallCNN((1, 8, 8), 10)
    >>> net(torch.zeros(5, 64)).shape, net(torch.zeros(5, 1, 8, 8)).shape
    (torch.Size([5, 10]), torch.Size([5, 10]))
    """

    def __init__(
        self, input_shape: Sequence[int], n_classes: int, channels: tuple[int, int] = (8, 16)
    ):
        c, h, w = (int(s) for s in input_shape)
        out_h = math.ceil(math.ceil(h / 2) / 2)
        out_w = math.ceil(math.ceil(w / 2) / 2)
        super().__init__(
            *_as_images((c, h, w)),
            nn.Conv2d(c, channels[0], kernel_size=3, padding=1),
            nn.Tanh(),
            nn.AvgPool2d(2, ceil_mode=True),
            nn.Conv2d(channels[0], channels[1], kernel_size=3, padding=1),
            nn.Tanh(),
            nn.AvgPool2d(2, ceil_mode=True),
            nn.Flatten(),
            nn.Linear(channels[1] * out_h * out_w, int(n_classes)),
        )


def _check_count(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _image_shape(n_features: int, input_shape) -> tuple[int, int, int]:
    if input_shape is None:
        side = math.isqrt(n_features)
        if side * side != n_features:
            raise ValueError(
                f"the 'cnn' model needs images: {n_features} features per row are not a square "
                "image; pass X of shape (n, channels, height, width) (or input_shape= to "
                "make_model)"
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
    grey = shape[2] == 1 and shape[0] >= 4 and shape[0] != 3
    if grey or (shape[2] in (3, 4) and shape[0] > 4 and shape[1] > 4):
        # (H, W, C) images (grey, RGB, RGBA) read as channels first would be H channels of W×C
        # pixels; a real channels-first network input is rarely 1 to 4 pixels wide.
        raise ValueError(
            f"the 'cnn' model reads examples as (channels, height, width); {shape} looks like "
            "channels-last images: pass X.transpose(0, 3, 1, 2) (or give a model factory if "
            f"they really are {shape[0]} channels of {shape[1]}×{shape[2]} pixels)"
        )
    return shape


def _as_images(shape: tuple[int, int, int]) -> list[nn.Module]:
    """Parameter-free leading layers that take flat rows and images alike to ``shape``."""
    return [nn.Flatten(), nn.Unflatten(1, shape)]


# Layer lists as Papernot et al. 2021 describe their MNIST and CIFAR-10 networks, checked against
# two public implementations: Opacus's MNIST example (examples/mnist.py, SampleConvNet, the same
# layers with ReLU in place of tanh) and Tramèr & Boneh 2021, "Differentially Private Learning
# Needs Better Features" (github.com/ftramer/Handcrafted-DP, models.py: CIFAR10_CNN, the same
# layers with tanh; its MNIST_CNN pads the first convolution by 2 instead of Opacus's 3, which
# also ends in 4×4 maps).
def mnist_cnn(n_classes: int = 10) -> nn.Sequential:
    """Papernot et al. (2021)'s MNIST network: two tanh convolutions and two dense layers.

    Conv2d(1, 16, 8, stride 2, padding 3), tanh, MaxPool2d(2, stride 1), Conv2d(16, 32, 4,
    stride 2), tanh, MaxPool2d(2, stride 1), then Linear(32·4·4, 32), tanh, Linear(32,
    n_classes): 26 010 parameters for 10 classes. Inputs are 1×28×28 images or flat rows of
    784 values (a leading parameter-free reshape takes both).

    Parameters
    ----------
    n_classes : int, default 10
        Number of output logits.

    Returns
    -------
    torch.nn.Sequential

    Examples
    --------
    >>> import torch
    >>> net = mnist_cnn()
    >>> net(torch.zeros(2, 1, 28, 28)).shape, sum(p.numel() for p in net.parameters())
    (torch.Size([2, 10]), 26010)
    """
    n_classes = _check_count(n_classes, "n_classes", 2)
    return nn.Sequential(
        *_as_images(PAPER_INPUT_SHAPES["mnist_cnn"]),
        nn.Conv2d(1, 16, kernel_size=8, stride=2, padding=3),  # -> 16×14×14
        nn.Tanh(),
        nn.MaxPool2d(kernel_size=2, stride=1),  # -> 16×13×13
        nn.Conv2d(16, 32, kernel_size=4, stride=2),  # -> 32×5×5
        nn.Tanh(),
        nn.MaxPool2d(kernel_size=2, stride=1),  # -> 32×4×4
        nn.Flatten(),
        nn.Linear(32 * 4 * 4, 32),
        nn.Tanh(),
        nn.Linear(32, n_classes),
    )


def cifar10_cnn(n_classes: int = 10) -> nn.Sequential:
    """Papernot et al. (2021)'s CIFAR-10 network: three blocks of two tanh convolutions.

    Each block is two Conv2d(3×3, padding 1) + tanh layers of 32, 64 and 128 channels, followed
    by MaxPool2d(2); then Linear(128·4·4, 128), tanh, Linear(128, n_classes): 550 570
    parameters for 10 classes. Inputs are 3×32×32 images, channels first, or flat rows of 3072
    values in that order.

    Parameters
    ----------
    n_classes : int, default 10
        Number of output logits.

    Returns
    -------
    torch.nn.Sequential

    Examples
    --------
    >>> import torch
    >>> net = cifar10_cnn()
    >>> net(torch.zeros(2, 3, 32, 32)).shape, sum(p.numel() for p in net.parameters())
    (torch.Size([2, 10]), 550570)
    """
    n_classes = _check_count(n_classes, "n_classes", 2)
    layers = _as_images(PAPER_INPUT_SHAPES["cifar10_cnn"])
    channels = 3
    for width in (32, 64, 128):  # 32×32 -> 16×16 -> 8×8 -> 4×4
        for _ in range(2):
            layers += [nn.Conv2d(channels, width, kernel_size=3, padding=1), nn.Tanh()]
            channels = width
        layers.append(nn.MaxPool2d(kernel_size=2))
    layers += [nn.Flatten(), nn.Linear(128 * 4 * 4, 128), nn.Tanh(), nn.Linear(128, n_classes)]
    return nn.Sequential(*layers)


def _check_paper_shape(name: str, n_features: int, input_shape) -> None:
    """Fail with what the model needs when the data's examples are not its images."""
    expected = PAPER_INPUT_SHAPES[name]
    channels, height, width = expected
    accepted = {expected, expected[1:]} if channels == 1 else {expected}
    if input_shape is None:
        fits = n_features == math.prod(expected)
        got = f"{n_features} values per example"
    else:
        try:
            shape = tuple(int(s) for s in input_shape)
        except (TypeError, ValueError):
            raise ValueError(
                f"input_shape must be a tuple of integers, got {input_shape!r}"
            ) from None
        fits = shape in accepted and math.prod(shape) == n_features
        got = f"examples of shape {shape}"
    if not fits:
        hint = ""
        if input_shape is not None and tuple(input_shape) == (height, width, channels) != expected:
            hint = "; channels-last images need X.transpose(0, 3, 1, 2)"
        raise ValueError(
            f"the {name!r} model needs {channels}×{height}×{width} images (channels first, or "
            f"flat rows of {math.prod(expected)} values), got {got}{hint}"
        )


def make_model(
    name_or_factory: str | Callable[[int, int], nn.Module],
    n_features: int,
    n_classes: int,
    input_shape: Sequence[int] | None = None,
) -> nn.Module:
    """Build an Opacus-compatible classifier.

    Parameters
    ----------
    name_or_factory : {"lr", "mlp", "cnn", "mnist_cnn", "cifar10_cnn"} or callable
        ``"lr"``: multinomial logistic regression (``nn.Linear`` on the flattened input);
        ``"mlp"``: one hidden tanh layer of ``MLP_HIDDEN`` units on the flattened input;
        ``"cnn"``: :class:`SmallCNN`; ``"mnist_cnn"`` (1×28×28 images) and ``"cifar10_cnn"``
        (3×32×32 images): :func:`mnist_cnn` and :func:`cifar10_cnn`; a callable
        ``f(n_features, n_classes)`` returning an ``nn.Module`` builds a user model (it must be
        picklable, e.g. a module-level function, to run audits in parallel).
    n_features : int
        Number of input values per example (64 for the digits).
    n_classes : int
        Number of classes (logits).
    input_shape : tuple of int, optional
        Shape of one example for the CNNs, ``(channels, height, width)`` or ``(height, width)``;
        by default a single-channel square image of ``n_features`` pixels. ``"mnist_cnn"`` and
        ``"cifar10_cnn"`` check that it (or ``n_features``) fits their images. Ignored by
        ``"lr"``, ``"mlp"`` and factories.

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
    >>> import torch
    >>> model = make_model("lr", 64, 10)
    >>> model(torch.zeros(3, 64)).shape
    torch.Size([3, 10])
    >>> make_model("mlp", 64, 10)(torch.zeros(3, 64)).shape
    torch.Size([3, 10])
    >>> make_model("cnn", 64, 10)(torch.zeros(2, 1, 8, 8)).shape
    torch.Size([2, 10])
    >>> make_model("mnist_cnn", 784, 10, input_shape=(1, 28, 28))(torch.zeros(2, 784)).shape
    torch.Size([2, 10])
    >>> make_model("mnist_cnn", 64, 10)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: the 'mnist_cnn' model needs 1×28×28 images (...), got 64 values per example
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
    if name_or_factory in PAPER_INPUT_SHAPES:
        _check_paper_shape(name_or_factory, n_features, input_shape)
        return mnist_cnn(n_classes) if name_or_factory == "mnist_cnn" else cifar10_cnn(n_classes)
    raise ValueError(
        f"unknown model {name_or_factory!r}; use one of {list(MODELS)} or a callable "
        "factory f(n_features, n_classes) -> torch.nn.Module"
    )


def factory_identity(factory: Callable) -> dict:
    """A model factory's identity for a run store, or ValueError saying how to give it one.

    Its ``describe()`` if it has one, else its qualified name, a digest of its code and its
    default arguments (a ``functools.partial``: its function and argument values), so an edited
    factory is another pipeline (:func:`rdpest.auditing.identity.callable_identity`). A lambda or
    a function defined inside another has no readable identity.
    """
    how = (
        "define the factory as a module-level function (or a functools.partial of one), or give "
        "it a describe() method returning a JSON dict of what it builds"
    )
    return callable_identity(factory, "model", "the model factory", how)


def check_model(model: nn.Module, batch: torch.Tensor, n_classes: int) -> None:
    """Fail with a ``ValueError`` saying what is wrong, before any training, if ``model`` cannot
    be trained by the audit: parameters that are not float32, a layer working in place (Opacus's
    per-example gradient hooks cannot follow it), layers Opacus refuses (BatchNorm, recurrent
    layers; its ``ModuleValidator``), or a forward pass on ``batch`` (a few rows of the audit's
    data, as the runs feed them) that fails or does not return float32 logits of shape
    ``(len(batch), n_classes)``.

    Examples
    --------
    >>> check_model(make_model("lr", 64, 10), torch.zeros(2, 64), 10)
    >>> check_model(make_model("lr", 64, 12), torch.zeros(2, 64), 10)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: the model must map a batch of 2 rows to logits of shape (2, 10) ..., got (2, 12)
    """
    from opacus.validators import ModuleValidator

    for name, param in model.named_parameters():
        if param.dtype != torch.float32:
            raise ValueError(
                f"the model's parameter {name!r} is {param.dtype}; the audit trains float32 "
                "models (build the layers without a dtype, or call .float() on the model)"
            )
    for name, module in model.named_modules():
        if getattr(module, "inplace", False) is True:
            raise ValueError(
                f"the model's layer {name!r} ({type(module).__name__}) works in place "
                "(inplace=True), which Opacus's per-example gradients cannot follow; build it "
                "with inplace=False (the same function)"
            )
    if not any(param.requires_grad for param in model.parameters()):
        raise ValueError("the model has no trainable parameters (none with requires_grad=True)")
    errors = ModuleValidator.validate(model, strict=False)
    if errors:
        reasons = "; ".join(str(e) for e in errors)
        raise ValueError(f"Opacus cannot train this model with DP-SGD: {reasons}")
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model(batch)
    except Exception as exc:  # a user factory's forward pass can fail in any way
        raise ValueError(
            f"the model fails on a batch of the audit's data (shape {tuple(batch.shape)}, "
            f"float32): {_first_line(exc)}"
        ) from None
    finally:
        model.train(was_training)
    expected = (len(batch), int(n_classes))
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"the model must return a tensor of logits, got {type(out).__name__}")
    if tuple(out.shape) != expected or out.dtype != torch.float32:
        raise ValueError(
            f"the model must map a batch of {expected[0]} rows to logits of shape {expected} "
            f"(float32, one per class: {expected[1]} classes), got "
            f"{tuple(out.shape)}{'' if out.dtype == torch.float32 else f' of {out.dtype}'}"
        )
    if not bool(torch.isfinite(out).all()):
        # before any training: pretraining ran on a NaN loss unsaid, and the first run then
        # failed with "score_fn returned nan ... a training run diverged?" (DP-SGD review)
        raise ValueError(
            f"the model's logits on a batch of the audit's data (shape {tuple(batch.shape)}) "
            "are not all finite (NaN or inf) before any training: check its forward pass and "
            "its initial weights"
        )
    _check_gradients(model, batch)


def _check_gradients(model: nn.Module, batch: torch.Tensor) -> None:
    """A ValueError naming the trainable parameters that get no gradient from the logits (a
    layer left out of ``forward``), which Opacus reports only in the first private step and
    without a name. Done on a copy, with the random generators restored, so the model (its
    buffers, its gradients) and the caller's random streams are as they were. Two rows decide:
    a model whose use of a parameter depends on the data may be refused."""
    model = copy.deepcopy(model).train()
    devices = sorted({p.device.index or 0 for p in model.parameters() if p.is_cuda})
    try:
        with torch.random.fork_rng(devices=devices), torch.enable_grad():
            model(batch).sum().backward()
    except Exception as exc:  # a user model's backward pass can fail in any way
        raise ValueError(
            "the model's gradients cannot be computed on a batch of the audit's data: "
            f"{_first_line(exc)}"
        ) from None
    unused = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    if unused:
        raise ValueError(
            f"the model's parameter(s) {', '.join(map(repr, unused))} get no gradient from its "
            "output (not used in forward?); DP-SGD needs every trainable parameter used, or "
            "frozen with requires_grad=False"
        )


def _first_line(exc: Exception) -> str:
    """``Type: first line of the message`` (torch's messages run over many lines)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"
