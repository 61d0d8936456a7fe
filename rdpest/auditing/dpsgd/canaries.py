"""Canaries: the one example by which the two neighbouring training sets of an audit differ.

- ``"blank"``: an all-zero input (the paper's choice, after Nasr et al. 2023, "Tight Auditing of
  Differentially Private Machine Learning", and Annamalai & De Cristofaro 2024, "Nearly Tight
  Black-Box Auditing of Differentially Private Machine Learning", the paper's [31]). Combined
  with worst-case initial parameters, its gradient is large and points where the rest of the data
  hardly pushes. Given the initial model, its label is the class that model finds least likely
  for the blank input, as for ClipBKD: the canary's gradient norm is what the audit can detect
  (for logistic regression a blank input only moves the bias, by p − e_y, whose norm is below
  C = 1 when p is near uniform), and the least likely class makes it largest.
- ``"clipbkd"``: ClipBKD of Jagielski, Ullman & Oprea 2020, "Auditing Differentially Private
  Machine Learning: How Private is Private SGD?" (NeurIPS): the input is the direction in which
  the training data varies least (the last right singular vector of the centred data), so the
  other examples' gradients have little component along it, scaled to a typical example norm;
  the label is the class the (initial) model finds least likely, so its gradient is large and
  survives clipping at full norm.
- a user-supplied ``(x, y)`` pair.

The audit's score is the canary's loss under a trained model, :func:`canary_loss`.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch
from torch import nn

from rdpest.utils.torch_helpers import check_module, module_device, unwrap_module

__all__ = ["CANARIES", "canary_loss", "make_canary"]

CANARIES = ("blank", "clipbkd")


def _scalar_label(label):
    """A one-number integer tensor or array (``torch.tensor(1)``, as a user's dataset yields
    labels) as a Python int; anything else as it is, for the caller to check."""
    if isinstance(label, torch.Tensor) and label.numel() == 1:
        if not (
            label.dtype.is_floating_point or label.dtype.is_complex or label.dtype == torch.bool
        ):
            return int(label.item())
    elif isinstance(label, np.ndarray) and label.size == 1 and label.dtype.kind in "iu":
        return int(label.reshape(-1)[0])
    return label


def _check_label(label, n_classes: int | None) -> int:
    label = _scalar_label(label)
    if isinstance(label, bool) or not isinstance(label, numbers.Integral | np.integer):
        raise ValueError(f"label must be an integer class, got {label!r}")
    label = int(label)
    if label < 0 or (n_classes is not None and label >= n_classes):
        bound = f" in [0, {n_classes})" if n_classes is not None else " >= 0"
        raise ValueError(f"label must be a class{bound}, got {label}")
    return label


def _least_likely_label(model: nn.Module, x: np.ndarray) -> int:
    module = unwrap_module(model)
    try:
        device = next(module.parameters()).device
    except StopIteration:
        device = torch.device("cpu")
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            logits = module(torch.as_tensor(x[None], dtype=torch.float32, device=device))
    finally:
        module.train(was_training)
    if logits.ndim != 2 or logits.shape[0] != 1:
        raise ValueError(
            f"model must map a batch of one example to logits of shape (1, n_classes), got "
            f"shape {tuple(logits.shape)}"
        )
    return int(torch.argmin(logits[0]).item())


def clipbkd_from_span(X) -> bool:
    """Whether ClipBKD's input for the rows ``X`` comes from their span (no more rows than values
    per example), rather than from the SVD's last right singular vector."""
    return len(X) <= X[0].size


def _clipbkd_input(X: np.ndarray) -> np.ndarray:
    flat = X.reshape(len(X), -1).astype(np.float64)
    centred = flat - flat.mean(axis=0)
    _, singular, vt = np.linalg.svd(centred, full_matrices=False)  # vt: min(n, d) × d
    n, d = centred.shape
    if not clipbkd_from_span(X):
        direction = vt[-1]
    else:
        # Centred, the rows span at most n − 1 < d dimensions: the least variance (zero) lies in
        # their null space. The full V would cost d × d floats (169 GiB for 224×224 RGB images)
        # and complete the basis arbitrarily; instead take the coordinate axis farthest from the
        # rows' span, minus its projection on it (O(n·d), and fixed by the data).
        tol = singular.max(initial=0.0) * max(n, d) * np.finfo(np.float64).eps
        span = vt[singular > tol]
        axis = int(np.argmax(1.0 - np.einsum("ij,ij->j", span, span)))
        direction = -(span.T @ span[:, axis])
        direction[axis] += 1.0
        direction /= np.linalg.norm(direction)
    # Singular vectors have an arbitrary sign; fix it so the canary is deterministic.
    if direction[np.argmax(np.abs(direction))] < 0:
        direction = -direction
    scale = float(np.median(np.linalg.norm(flat, axis=1)))
    if scale == 0.0:
        scale = 1.0
    return (scale * direction).reshape(X.shape[1:]).astype(np.float32)


def make_canary(
    kind: str | tuple,
    X,
    y,
    model: nn.Module | None = None,
    label: int | None = None,
) -> tuple[np.ndarray, int]:
    """Build the audit canary ``(x, label)``.

    Parameters
    ----------
    kind : {"blank", "clipbkd"} or tuple (x, y)
        ``"blank"``: all-zero input with label ``label`` or, by default, the class ``model``
        finds least likely for it (class 0 when no model is given). ``"clipbkd"``: ClipBKD
        (Jagielski et al. 2020): the unit direction of smallest variance of the centred data
        ``X`` (from numpy's SVD), scaled to the median row norm of ``X``, with label ``label`` or,
        by default, the class that ``model`` finds least likely for that input. A tuple
        ``(x, y)`` is a user canary, checked against the shape of one row of ``X``.
    X : array-like of shape (n, d) or (n, ...) for images
        The audited training data (defines the canary's shape and, for ClipBKD, its direction).
    y : array-like of shape (n,)
        Its labels (define the number of classes when no model is given).
    model : torch.nn.Module, optional
        The initial model θ₀ (e.g. the pretrained one); needed by ``"clipbkd"`` unless ``label``
        is given, and picks the blank canary's default label. An Opacus ``GradSampleModule`` is
        unwrapped.
    label : int, optional
        Overrides the canary's label; must lie in ``[0, max(y)]``.

    Returns
    -------
    x : numpy.ndarray, float32, of the shape of one row of ``X``
    label : int

    Raises
    ------
    ValueError
        For an unknown kind, a ClipBKD canary with neither model nor label, a user canary of the
        wrong shape or non-finite values, or a label that is not a valid class.

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(50, 4)).astype(np.float32)
    >>> y = np.arange(50) % 3
    >>> x, c = make_canary("blank", X, y)
    >>> x.tolist(), c
    ([0.0, 0.0, 0.0, 0.0], 0)
    >>> x, c = make_canary("clipbkd", X, y, label=2)
    >>> x.shape, c
    ((4,), 2)
    """
    from rdpest.auditing.dpsgd.data import load_arrays

    X, y = load_arrays(X, y)
    n_classes = int(y.max()) + 1
    row_shape = X.shape[1:]

    if isinstance(kind, tuple | list) and len(kind) == 2:
        x_user, y_user = kind
        try:
            x = np.asarray(x_user, dtype=np.float32)
        except (TypeError, ValueError):
            raise ValueError("the user canary's input must be a numeric array") from None
        if x.shape != row_shape:
            # a flat row, or the same image without its unit axes ((28, 28) for (1, 28, 28))
            flat = x.ndim == 1 or len(row_shape) == 1
            unit_axes = [d for d in x.shape if d != 1] == [d for d in row_shape if d != 1]
            if x.size == int(np.prod(row_shape)) and (flat or unit_axes):
                x = x.reshape(row_shape)
            else:
                raise ValueError(
                    f"the user canary's input has shape {x.shape}, but one row of X has shape "
                    f"{row_shape}"
                )
        if not np.all(np.isfinite(x)):
            raise ValueError("the user canary's input must be finite")
        if label is not None:
            y_user = label
        return x, _check_label(y_user, n_classes)

    if not isinstance(kind, str) or kind not in CANARIES:
        raise ValueError(
            f"unknown canary kind {kind!r}; use one of {list(CANARIES)} or a tuple (x, y)"
        )
    if model is not None and not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")

    if kind == "blank":
        x = np.zeros(row_shape, dtype=np.float32)
        if label is None and model is not None:
            # A class of the model's own output, which may include classes absent from y.
            return x, _least_likely_label(model, x)
        return x, _check_label(0 if label is None else label, n_classes)

    x = _clipbkd_input(X)
    if label is not None:
        return x, _check_label(label, n_classes)
    if model is None:
        raise ValueError(
            "the 'clipbkd' canary needs model (the initial model, to pick its least likely "
            "class) or an explicit label"
        )
    return x, _least_likely_label(model, x)


def eval_logits(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``module(x)`` in eval mode without gradients; the module's mode is restored afterwards."""
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            return module(x)
    finally:
        module.train(was_training)


def canary_loss(model: nn.Module, x, y) -> float:
    """Cross-entropy loss of the single example ``(x, y)`` under ``model``.

    Evaluated in eval mode without gradients (the model's mode is restored afterwards); an
    Opacus ``GradSampleModule`` is unwrapped first.

    Parameters
    ----------
    model : torch.nn.Module
        Classifier returning logits.
    x : array-like or torch.Tensor
        One example, shaped like one row of the training data (no batch dimension).
    y : int
        Its class.

    Returns
    -------
    float
        ``-log softmax(model(x))[y]``.

    Raises
    ------
    ValueError
        If ``y`` is not an integer or is out of the range of the model's classes.

    Examples
    --------
    >>> net = nn.Linear(3, 4)
    >>> _ = nn.init.zeros_(net.weight), nn.init.zeros_(net.bias)
    >>> round(canary_loss(net, np.ones(3), 2), 6) == round(float(np.log(4)), 6)
    True
    """
    module = unwrap_module(check_module(model))
    y = _scalar_label(y)  # a float tensor of 1.5 was once taken as class 1
    if isinstance(y, bool) or not isinstance(y, numbers.Integral):
        raise ValueError(f"y must be an integer class, got {y!r}")
    device = module_device(module)
    # In the model's own floating type (a float64 model met a float32 canary deep in torch)
    dtype = next((w.dtype for w in module.parameters() if w.is_floating_point()), torch.float32)
    logits = eval_logits(module, torch.as_tensor(x, dtype=dtype, device=device)[None])
    if logits.ndim != 2 or logits.shape[0] != 1 or not 0 <= int(y) < logits.shape[1]:
        raise ValueError(
            f"y={y!r} must be a class in [0, n_classes) of logits shaped (1, n_classes); got "
            f"logits of shape {tuple(logits.shape)}"
        )
    return float(torch.nn.functional.cross_entropy(logits, torch.tensor([int(y)], device=device)))
