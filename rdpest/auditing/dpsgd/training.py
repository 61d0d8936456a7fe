"""One DP-SGD training run with Opacus, worst-case initialisation, and the canary's score.

An audit trains many models on two neighbouring data sets (with and without one canary) and
compares the canary's loss across runs (PAPER_NOTES.md, auditing set-up; DESIGN.md, "Auditing
rules"). This module provides the pieces:

- :func:`pretrain`: ordinary (non-private) training on data disjoint from the audited set, giving
  the worst-case initial parameters θ₀ shared by every run (Nasr et al. 2023, "Tight Auditing of
  Differentially Private Machine Learning"; Annamalai & De Cristofaro 2024, "Nearly Tight
  Black-Box Auditing of Differentially Private Machine Learning", the paper's [31]).
- :func:`train_dp_sgd`: one real DP-SGD run (Abadi et al. 2016) through Opacus's
  ``PrivacyEngine`` (Yousefpour et al. 2021, "Opacus: User-Friendly Differential Privacy
  Library in PyTorch") with ``loss_reduction="sum"`` and a sum-reduced criterion: with mean
  reduction the update is divided by the realised batch size, which reveals whether the canary
  is present (Opacus issue #571). Full batch by default (sampling rate 1), Poisson sampling
  otherwise.
- :func:`canary_loss`: the cross-entropy of the canary under a trained model (the audit's score).
- :class:`DPSGDRun`: a picklable ``score_fn(include_canary, seed) -> float`` bundling the above
  for ``rdpest.auditing.Auditor``.

Learning-rate convention: ``learning_rate`` is the step size on the *mean* noisy clipped
gradient, i.e. the parameters move by ``learning_rate / expected_batch_size`` times the summed
clipped per-example gradients plus N(0, σ²C²I) noise. ``expected_batch_size`` is a public constant
(``round(sample_rate * n)``, or passed in): an audit passes the size of the data set WITHOUT the
canary to both neighbouring runs, so that the step size itself does not depend on whether the
canary is present.

Reproducibility: every run takes an integer ``seed``. The Gaussian noise and the Poisson sampling
draw from dedicated ``torch.Generator`` objects seeded from it (two independent streams derived by
``numpy.random.SeedSequence``), and the whole run executes inside ``torch.random.fork_rng`` with
the global generator seeded too, so the caller's global RNG state is left untouched and the same
seed gives bit-identical weights on the same machine and device.
"""

from __future__ import annotations

import copy
import logging
import numbers
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import numpy as np
import torch
from torch import nn

from rdpest.auditing.dpsgd.data import load_arrays
from rdpest.auditing.dpsgd.models import make_model
from rdpest.auditing.dpsgd.stacking import (
    TESTED_OPACUS,
    PerRunNoiseOptimizer,
    StackedGradSampleModule,
    auto_stack_size,
    opacus_supports_stacking,
    stack_model,
    stackable,
    unstack_model,
)
from rdpest.utils.torch_helpers import forked_rng, resolve_device, stream_seeds

__all__ = [
    "GRAD_SAMPLE_MODES",
    "DPSGDRun",
    "canary_loss",
    "pretrain",
    "resolve_stack_runs",
    "train_dp_sgd",
    "train_dp_sgd_many",
]

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------------------
# argument checks
# ----------------------------------------------------------------------------------------------
def _check_int(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_float(value, name: str, *, minimum: float = 0.0, allow_equal: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    ok = value >= minimum if allow_equal else value > minimum
    if not np.isfinite(value) or not ok:
        bound = ">=" if allow_equal else ">"
        raise ValueError(f"{name} must be a finite number {bound} {minimum}, got {value!r}")
    return value


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def _check_seeds(seeds) -> list[int]:
    """A non-empty 1-D sequence of seeds, as a list of ints."""
    if (
        isinstance(seeds, str | bytes)
        or not isinstance(seeds, Sequence | np.ndarray)
        or np.ndim(seeds) != 1
    ):
        raise ValueError(f"seeds must be a 1-D sequence of integers, got {seeds!r}")
    seeds = [_check_seed(s.item() if isinstance(s, np.generic) else s) for s in seeds]
    if not seeds:
        raise ValueError("seeds is empty: give at least one seed")
    return seeds


def _check_sample_rate(sample_rate) -> float:
    q = _check_float(sample_rate, "sample_rate", minimum=0.0, allow_equal=False)
    if q > 1.0:
        raise ValueError(f"sample_rate must lie in (0, 1], got {sample_rate!r}")
    return q


def _check_module(model) -> nn.Module:
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return model


def _unwrap(model: nn.Module) -> nn.Module:
    """The user module inside an Opacus GradSampleModule (or the module itself)."""
    inner = getattr(model, "_module", None)
    return inner if isinstance(inner, nn.Module) else model


def _module_device(model: nn.Module) -> torch.device:
    try:
        return next(model.parameters()).device
    except StopIteration:
        return torch.device("cpu")


# Layers whose per-sample gradients PyTorch's ExpandedWeights computes (torch.nn.utils.
# _expanded_weights), which Opacus uses with grad_sample_mode="ew".
_EW_LAYERS = (
    nn.Linear,
    nn.Conv1d,
    nn.Conv2d,
    nn.Conv3d,
    nn.Embedding,
    nn.GroupNorm,
    nn.LayerNorm,
    nn.InstanceNorm1d,
    nn.InstanceNorm2d,
    nn.InstanceNorm3d,
)
GRAD_SAMPLE_MODES = ("auto", "hooks", "ew", "ghost")


def _check_grad_sample_mode(mode) -> str:
    if mode not in GRAD_SAMPLE_MODES:
        raise ValueError(f"grad_sample_mode must be one of {list(GRAD_SAMPLE_MODES)}, got {mode!r}")
    return mode


def _calls_each_layer_once(net: nn.Module) -> bool:
    """Whether every layer of ``net`` provably runs once per forward pass, with its own weights.

    Ghost clipping in Opacus 1.6 keeps only the last call's per-example norm of a layer used
    twice (or of weights shared between layers), which would clip less than promised; so the
    fast modes are used only for networks whose containers are ``nn.Sequential`` (its forward
    calls each child once) or this package's ``SmallCNN``, with no module or parameter appearing
    twice. Anything else (a user's own ``forward``) trains with Opacus's general hooks.
    """
    from rdpest.auditing.dpsgd.models import SmallCNN

    modules = [m for _, m in net.named_modules(remove_duplicate=False)]
    params = [p for _, p in net.named_parameters(remove_duplicate=False)]
    if len({id(m) for m in modules}) != len(modules) or len({id(p) for p in params}) != len(params):
        return False
    return all(
        type(m) in (nn.Sequential, SmallCNN) for m in modules if any(True for _ in m.children())
    )


def _choose_grad_sample_mode(mode: str, net: nn.Module, full_batch: bool) -> str:
    """Resolve ``"auto"``: ghost clipping or ExpandedWeights when they provably apply, else hooks.

    Both need every module that owns parameters to be of a supported type (exact type: a
    subclass may use its weights elsewhere in ``forward``), each layer called once with its own
    weights (:func:`_calls_each_layer_once`) and, here, full-batch training (Poisson sampling can
    draw an empty batch). Models made only of ``nn.Linear`` layers get
    Opacus's ghost clipping (Li et al. 2022, "Large Language Models Can Be Strong Differentially
    Private Learners"): per-example gradient norms come from activations and
    output gradients without materialising per-example gradients, then a second backward pass
    sums the clipped gradients. Measured here, 100 full-batch steps on the digits: 158 ms
    against 172-177 ms (ExpandedWeights) for logistic regression, 255-295 ms against 470 ms for
    the MLP. For convolutions its norms are slower than ExpandedWeights (3.4 s against 2.4-3.0 s
    for the CNN), so models with any other ``_EW_LAYERS`` layer get ``"ew"``.
    """
    if mode != "auto":
        return mode
    if not full_batch or not _calls_each_layer_once(net):
        return "hooks"
    layers = {type(m) for m in net.modules() if any(True for _ in m.parameters(recurse=False))}
    if not layers <= set(_EW_LAYERS):
        return "hooks"
    return "ghost" if layers <= {nn.Linear} else "ew"


def _as_tensors(X, y, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    if isinstance(X, torch.Tensor) and isinstance(y, torch.Tensor):
        if X.ndim < 2 or y.ndim != 1 or len(X) != len(y) or len(y) == 0:
            raise ValueError(
                f"X must have one row per example and y be 1-D of the same length, got shapes "
                f"{tuple(X.shape)} and {tuple(y.shape)}"
            )
        return X.to(device=device, dtype=torch.float32), y.to(device=device, dtype=torch.int64)
    X_np, y_np = load_arrays(X, y)
    return torch.from_numpy(X_np).to(device), torch.from_numpy(y_np).to(device)


# ----------------------------------------------------------------------------------------------
# pretraining (worst-case initialisation)
# ----------------------------------------------------------------------------------------------
def pretrain(
    model: nn.Module,
    X,
    y,
    *,
    epochs: int = 50,
    learning_rate: float = 0.1,
    batch_size: int = 128,
    seed: int = 0,
    device: str = "cpu",
) -> dict[str, torch.Tensor]:
    """Train a copy of ``model`` non-privately and return its parameters θ₀ (a state dict).

    The worst-case initial parameters of an audit: one θ₀ for all runs, from ordinary training
    on data disjoint from the audited set (Nasr et al. 2023; Annamalai & De Cristofaro 2024).
    Mini-batch SGD with momentum 0.9 on the mean cross-entropy, shuffled each epoch.

    Parameters
    ----------
    model : torch.nn.Module
        The architecture with its initial weights; it is copied, never modified.
    X, y : array-like or torch.Tensor
        Pretraining features and integer labels.
    epochs : int, default 50
        Passes over the data.
    learning_rate : float, default 0.1
        SGD step size.
    batch_size : int, default 128
        Mini-batch size (the last batch of an epoch may be smaller).
    seed : int, default 0
        Seeds the shuffling; the global RNG state is left untouched.
    device : {"cpu", "cuda", "auto"} or "cuda:N", default "cpu"
        Where to train.

    Returns
    -------
    dict of str to torch.Tensor
        The trained state dict, tensors detached, cloned and on the CPU; load it with
        ``model.load_state_dict``.

    Raises
    ------
    ValueError
        For invalid data, a non-module model or non-positive settings.

    Examples
    --------
    >>> from rdpest.auditing.dpsgd.models import make_model
    >>> X = np.random.default_rng(0).random((40, 4), dtype=np.float32)
    >>> y = (X[:, 0] > 0.5).astype(np.int64)
    >>> theta0 = pretrain(make_model("lr", 4, 2), X, y, epochs=5, seed=0)
    >>> sorted(theta0)
    ['1.bias', '1.weight']
    """
    _check_module(model)
    epochs = _check_int(epochs, "epochs", 1)
    learning_rate = _check_float(learning_rate, "learning_rate", allow_equal=False)
    batch_size = _check_int(batch_size, "batch_size", 1)
    seed = _check_seed(seed)
    dev = resolve_device(device)
    X_t, y_t = _as_tensors(X, y, dev)
    n = len(y_t)
    net = copy.deepcopy(_unwrap(model)).to(dev)
    net.train()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=learning_rate, momentum=0.9)
    rng = np.random.default_rng(seed)
    with forked_rng(stream_seeds(seed, 1)[0], dev):
        for _ in range(epochs):
            order = torch.from_numpy(rng.permutation(n)).to(dev)
            for start in range(0, n, batch_size):
                idx = order[start : start + batch_size]
                optimizer.zero_grad(set_to_none=True)
                loss = criterion(net(X_t[idx]), y_t[idx])
                loss.backward()
                optimizer.step()
    return {k: v.detach().cpu().clone() for k, v in net.state_dict().items()}


# ----------------------------------------------------------------------------------------------
# one DP-SGD run
# ----------------------------------------------------------------------------------------------
class _BatchedTensors(torch.utils.data.Dataset):
    """A dataset over two tensors that fetches whole batches at once (``__getitems__``).

    Opacus's Poisson data loader asks for a list of indices per step; fetching them in one
    indexing operation instead of one ``__getitem__`` per example and a collate keeps a step
    cheap. Used with an identity ``collate_fn``.
    """

    def __init__(self, X: torch.Tensor, y: torch.Tensor):
        self.X = X
        self.y = y

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.X[index], self.y[index]

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.as_tensor(indices, dtype=torch.long, device=self.X.device)
        return self.X[idx], self.y[idx]


def _identity(batch):
    return batch


@contextmanager
def _quiet_opacus() -> Iterator[None]:
    """Silence two expected, harmless warnings while Opacus sets up and trains.

    "Secure RNG turned off" (secure_mode=False is what makes audits reproducible) and torch's
    "Full backward hook is firing ... no inputs require gradients" from Opacus's per-sample
    gradient hooks on the first layer.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Secure RNG turned off")
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        yield


def _make_private(
    net: nn.Module,
    loader,
    *,
    learning_rate: float,
    expected_batch_size: float,
    noise_multiplier: float,
    max_grad_norm: float,
    noise_generator: torch.Generator | None,
    mode: str,
):
    """Opacus ``PrivacyEngine(accountant="rdp")`` set-up of one DP-SGD training.

    Plain SGD of step ``learning_rate / expected_batch_size`` on the sum-reduced cross-entropy,
    flat clipping at ``max_grad_norm``, noise multiplier ``noise_multiplier``. Returns the
    wrapped module, the DP optimizer, the criterion (wrapped by Opacus for ghost clipping, whose
    backward runs its two passes) and the data loader Opacus hands back.
    """
    from opacus import PrivacyEngine

    optimizer = torch.optim.SGD(net.parameters(), lr=learning_rate / expected_batch_size)
    criterion = nn.CrossEntropyLoss(reduction="sum")
    engine = PrivacyEngine(accountant="rdp", secure_mode=False)
    private = engine.make_private(
        module=net,
        optimizer=optimizer,
        data_loader=loader,
        # Ghost clipping wraps the criterion and returns it as a fourth element; the other
        # modes ignore it.
        criterion=criterion,
        noise_multiplier=noise_multiplier,
        max_grad_norm=max_grad_norm,
        # A Poisson loader passed in already is Opacus's DPDataLoader; asking make_private to
        # wrap it again would resample at 1 / len(loader) instead of its sample rate.
        poisson_sampling=False,
        loss_reduction="sum",
        noise_generator=noise_generator,
        grad_sample_mode=mode,
    )
    if mode == "ghost":
        module, dp_optimizer, criterion, loader = private
    else:
        module, dp_optimizer, loader = private
    return module, dp_optimizer, criterion, loader


def _train_dp_sgd_tensors(
    net: nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    *,
    noise_multiplier: float,
    max_grad_norm: float,
    steps: int,
    learning_rate: float,
    sample_rate: float,
    expected_batch_size: float,
    seed: int,
    device: torch.device,
    grad_sample_mode: str,
) -> nn.Module:
    """DP-SGD on ``net`` (modified in place and returned), data already tensors on ``device``."""
    from opacus.data_loader import DPDataLoader

    noise_seed, sampling_seed = stream_seeds(seed, 2)
    noise_generator = torch.Generator(device=device)
    noise_generator.manual_seed(noise_seed)
    full_batch = sample_rate >= 1.0
    dataset = _BatchedTensors(X, y)
    if full_batch:
        loader = torch.utils.data.DataLoader(dataset, batch_size=len(dataset), collate_fn=_identity)
    else:
        # Opacus's own Poisson loader, built directly so that it samples at exactly
        # `sample_rate`: make_private(poisson_sampling=True) would instead derive the rate as
        # 1 / len(data_loader), rounding it to 1 / ceil(n / batch_size).
        sampling_generator = torch.Generator()
        sampling_generator.manual_seed(sampling_seed)
        loader = DPDataLoader(
            dataset, sample_rate=sample_rate, generator=sampling_generator, collate_fn=_identity
        )
    with _quiet_opacus():
        mode = _choose_grad_sample_mode(grad_sample_mode, net, full_batch)
        module, dp_optimizer, criterion, loader = _make_private(
            net,
            loader,
            learning_rate=learning_rate,
            expected_batch_size=expected_batch_size,
            noise_multiplier=noise_multiplier,
            max_grad_norm=max_grad_norm,
            noise_generator=noise_generator,
            mode=mode,
        )
        module.train()
        _run_steps(module, dp_optimizer, criterion, loader, X, y, steps, full_batch)
    dp_optimizer.zero_grad(set_to_none=True)
    trained = module.to_standard_module()
    for p in trained.parameters():
        p.grad = None
    return trained


def _train_stacked_tensors(
    template: nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    *,
    seeds: Sequence[int],
    noise_multiplier: float,
    max_grad_norm: float,
    steps: int,
    learning_rate: float,
    expected_batch_size: float,
    device: torch.device,
) -> list[nn.Module]:
    """Full-batch DP-SGD runs of ``template``, one per seed, trained as one stacked network.

    See :mod:`rdpest.auditing.dpsgd.stacking`: copy k is the run with ``seeds[k]`` (its noise comes
    from the same generator, in the same order, as in :func:`_train_dp_sgd_tensors`).
    """
    from opacus.grad_sample import GradSampleModuleFastGradientClipping
    from opacus.optimizers import DPOptimizerFastGradientClipping

    copies = len(seeds)
    net = stack_model(template, copies)
    X_rows = X.repeat(copies, *([1] * (X.ndim - 1)))
    y_rows = y.repeat(copies)
    generators = []
    for seed in seeds:
        generator = torch.Generator(device=device)
        generator.manual_seed(stream_seeds(seed, 2)[0])  # a single run's noise stream
        generators.append(generator)
    dataset = _BatchedTensors(X_rows, y_rows)
    loader = torch.utils.data.DataLoader(dataset, batch_size=len(dataset), collate_fn=_identity)
    with _quiet_opacus():
        module, dp_optimizer, criterion, loader = _make_private(
            net,
            loader,
            learning_rate=learning_rate,
            expected_batch_size=expected_batch_size,
            noise_multiplier=noise_multiplier,
            max_grad_norm=max_grad_norm,
            noise_generator=None,  # unused: every copy draws from its own run's generator
            mode="ghost",
        )
        if (
            type(dp_optimizer) is not DPOptimizerFastGradientClipping
            or type(module) is not GradSampleModuleFastGradientClipping
        ):  # pragma: no cover
            raise RuntimeError(
                "expected Opacus's ghost-clipping optimizer and module, got "
                f"{type(dp_optimizer).__name__} and {type(module).__name__}"
            )
        module.__class__ = StackedGradSampleModule
        dp_optimizer.__class__ = PerRunNoiseOptimizer
        dp_optimizer.run_generators = generators
        module.train()
        _run_steps(module, dp_optimizer, criterion, loader, X_rows, y_rows, steps, True)
    dp_optimizer.zero_grad(set_to_none=True)
    return unstack_model(module.to_standard_module(), template)


def _run_steps(module, dp_optimizer, criterion, loader, X, y, steps: int, full_batch: bool):
    """Take ``steps`` DP-SGD steps (full batch on (X, y), or batches of the Poisson loader)."""
    if full_batch:
        # The full-batch loader would yield exactly (X, y) every step; skip its machinery.
        for _ in range(steps):
            dp_optimizer.zero_grad(set_to_none=True)
            criterion(module(X), y).backward()
            dp_optimizer.step()
        return
    done = 0
    while done < steps:
        for xb, yb in loader:
            dp_optimizer.zero_grad(set_to_none=True)
            criterion(module(xb), yb).backward()
            dp_optimizer.step()
            done += 1
            if done == steps:
                return


def train_dp_sgd(
    model: nn.Module,
    X,
    y,
    *,
    noise_multiplier: float,
    max_grad_norm: float = 1.0,
    steps: int = 100,
    learning_rate: float = 1.0,
    sample_rate: float = 1.0,
    seed: int,
    device: str = "cpu",
    expected_batch_size: float | None = None,
    grad_sample_mode: str = "auto",
    noise_scale_bug: float = 1.0,
) -> nn.Module:
    """Train a copy of ``model`` with DP-SGD through Opacus and return it.

    Opacus ``PrivacyEngine(accountant="rdp", secure_mode=False).make_private(...)`` with
    ``loss_reduction="sum"``, ``nn.CrossEntropyLoss(reduction="sum")`` and flat clipping: each
    step sums the per-example gradients clipped to norm ``max_grad_norm`` = C, adds Gaussian
    noise of standard deviation σ·C (σ = ``noise_multiplier``) to the sum, and takes a plain
    SGD step of ``learning_rate / expected_batch_size`` on it.

    Parameters
    ----------
    model : torch.nn.Module
        The architecture initialised with θ₀; it is deep-copied, never modified.
    X, y : array-like or torch.Tensor
        The training set (for an audit: the audited data, plus the canary in one of the two
        neighbouring runs).
    noise_multiplier : float >= 0
        σ, the noise standard deviation relative to C.
    max_grad_norm : float > 0, default 1.0
        C, the per-example clipping norm.
    steps : int, default 100
        Number of optimizer steps (with ``sample_rate=1``, each is one full-batch epoch).
    learning_rate : float > 0, default 1.0
        Step size on the mean noisy clipped gradient (see the module docstring).
    sample_rate : float in (0, 1], default 1.0
        Poisson sampling rate q; 1 means full batch (every example in every step).
    seed : int >= 0
        Seeds noise and sampling; the same seed reproduces the same weights.
    device : {"cpu", "cuda", "auto"} or "cuda:N", default "cpu"
        Where to train; the returned module lives there.
    expected_batch_size : float, optional
        The public constant the summed noisy gradient is divided by; default
        ``max(1, round(sample_rate * len(X)))``. Audits pass the value for the data set
        without the canary to both neighbouring runs.
    grad_sample_mode : {"auto", "hooks", "ew", "ghost"}, default "auto"
        How Opacus clips per-example gradients: ``"hooks"`` (Opacus's default, every layer
        Opacus supports), ``"ew"`` (PyTorch's ExpandedWeights: about 1.5–3× faster here and
        bit-identical on the default models, but only for ``nn.Linear`` / convolution /
        embedding / normalisation layers and non-empty batches) or ``"ghost"`` (Opacus's ghost
        clipping: per-example norms without per-example gradients, two backward passes; equal
        to the others up to float rounding). ``"auto"`` uses ``"ghost"`` for full-batch
        training of models made only of ``nn.Linear`` layers, ``"ew"`` for other models built
        from ExpandedWeights layers, ``"hooks"`` otherwise.
    noise_scale_bug : float >= 0, default 1.0
        FAULT INJECTION FOR TESTS ONLY: the noise actually added is
        ``noise_multiplier * noise_scale_bug`` while the caller keeps claiming
        ``noise_multiplier``, simulating a buggy trainer (e.g. 0.5 = half the promised noise)
        that an audit should catch. Leave at 1.0 for real training.

    Returns
    -------
    torch.nn.Module
        The trained copy (a plain module: Opacus's hooks are removed, gradients cleared).

    Raises
    ------
    ValueError
        For invalid data or settings, or an unavailable device.

    Examples
    --------
    >>> from rdpest.auditing.dpsgd.models import make_model
    >>> X = np.random.default_rng(0).random((30, 4), dtype=np.float32)
    >>> y = (X[:, 0] > 0.5).astype(np.int64)
    >>> _ = torch.manual_seed(0)
    >>> model = make_model("lr", 4, 2)
    >>> a = train_dp_sgd(model, X, y, noise_multiplier=1.0, steps=5, seed=3)
    >>> b = train_dp_sgd(model, X, y, noise_multiplier=1.0, steps=5, seed=3)
    >>> bool(torch.equal(a[1].weight, b[1].weight)), a is model
    (True, False)
    """
    _check_module(model)
    noise_multiplier = _check_float(noise_multiplier, "noise_multiplier")
    max_grad_norm = _check_float(max_grad_norm, "max_grad_norm", allow_equal=False)
    steps = _check_int(steps, "steps", 1)
    learning_rate = _check_float(learning_rate, "learning_rate", allow_equal=False)
    sample_rate = _check_sample_rate(sample_rate)
    seed = _check_seed(seed)
    noise_scale_bug = _check_float(noise_scale_bug, "noise_scale_bug")
    grad_sample_mode = _check_grad_sample_mode(grad_sample_mode)
    dev = resolve_device(device)
    X_t, y_t = _as_tensors(X, y, dev)
    if expected_batch_size is None:
        expected_batch_size = max(1.0, float(round(sample_rate * len(y_t))))
    expected_batch_size = _check_float(
        expected_batch_size, "expected_batch_size", allow_equal=False
    )
    if noise_scale_bug != 1.0:
        logger.warning(
            "train_dp_sgd: noise_scale_bug=%g injects a deliberate fault (noise multiplier %g "
            "used instead of the claimed %g); for tests only",
            noise_scale_bug,
            noise_multiplier * noise_scale_bug,
            noise_multiplier,
        )
    net = copy.deepcopy(_unwrap(model)).to(dev)
    with forked_rng(seed, dev):
        return _train_dp_sgd_tensors(
            net,
            X_t,
            y_t,
            noise_multiplier=noise_multiplier * noise_scale_bug,
            max_grad_norm=max_grad_norm,
            steps=steps,
            learning_rate=learning_rate,
            sample_rate=sample_rate,
            expected_batch_size=expected_batch_size,
            seed=seed,
            device=dev,
            grad_sample_mode=grad_sample_mode,
        )


def train_dp_sgd_many(
    model: nn.Module,
    X,
    y,
    *,
    seeds: Sequence[int],
    noise_multiplier: float,
    max_grad_norm: float = 1.0,
    steps: int = 100,
    learning_rate: float = 1.0,
    device: str = "cpu",
    expected_batch_size: float | None = None,
    noise_scale_bug: float = 1.0,
) -> list[nn.Module]:
    """Several full-batch DP-SGD runs of one small model at once, one per seed.

    Run k equals ``train_dp_sgd(model, X, y, seed=seeds[k], sample_rate=1, ...)`` up to float
    rounding, but the runs are trained together as one stacked network through one Opacus
    ``PrivacyEngine`` with ghost clipping (:mod:`rdpest.auditing.dpsgd.stacking` says why each copy is
    exactly one DP-SGD run), which saves Opacus's per-step overhead: for logistic regression on
    the digits (one thread, 100 steps), about 55 ms per model in stacks of 16 against 200 ms one
    at a time.

    Parameters
    ----------
    model : torch.nn.Module
        θ₀ in an ``nn.Sequential`` of ``nn.Linear`` layers and elementwise activations (see
        :func:`rdpest.auditing.dpsgd.stacking.stackable`); copied, never modified.
    X, y : array-like or torch.Tensor
        The training set.
    seeds : sequence of int >= 0
        One run per seed (a seed may repeat: the runs are then identical).
    noise_multiplier, max_grad_norm, steps, learning_rate, device, expected_batch_size, \
noise_scale_bug
        As in :func:`train_dp_sgd` (always full batch).

    Returns
    -------
    list of torch.nn.Module
        The trained models, plain copies of ``model``, in the order of ``seeds``.

    Raises
    ------
    ValueError
        For a model that cannot be stacked, no seeds, or the errors of :func:`train_dp_sgd`.

    Examples
    --------
    >>> from rdpest.auditing.dpsgd.models import make_model
    >>> X = np.random.default_rng(0).random((30, 4), dtype=np.float32)
    >>> y = (X[:, 0] > 0.5).astype(np.int64)
    >>> _ = torch.manual_seed(0)
    >>> model = make_model("lr", 4, 2)
    >>> a, b = train_dp_sgd_many(model, X, y, seeds=[3, 4], noise_multiplier=1.0, steps=5)
    >>> single = train_dp_sgd(model, X, y, noise_multiplier=1.0, steps=5, seed=3)
    >>> bool(torch.allclose(a[1].weight, single[1].weight, atol=1e-5))
    True
    """
    _check_module(model)
    noise_multiplier = _check_float(noise_multiplier, "noise_multiplier")
    max_grad_norm = _check_float(max_grad_norm, "max_grad_norm", allow_equal=False)
    steps = _check_int(steps, "steps", 1)
    learning_rate = _check_float(learning_rate, "learning_rate", allow_equal=False)
    noise_scale_bug = _check_float(noise_scale_bug, "noise_scale_bug")
    seeds = _check_seeds(seeds)
    dev = resolve_device(device)
    X_t, y_t = _as_tensors(X, y, dev)
    net = copy.deepcopy(_unwrap(model)).to(dev)
    if not stackable(net, X_t.ndim):
        raise ValueError(
            "this model cannot be trained stacked: train_dp_sgd_many needs an nn.Sequential of "
            "nn.Linear layers and elementwise activations, not in place (led by nn.Flatten for "
            "inputs with more than 2 dimensions); train it with train_dp_sgd"
        )
    if not opacus_supports_stacking():
        raise ValueError(_opacus_version_message())
    if expected_batch_size is None:
        expected_batch_size = float(len(y_t))
    expected_batch_size = _check_float(
        expected_batch_size, "expected_batch_size", allow_equal=False
    )
    if noise_scale_bug != 1.0:
        logger.warning(
            "train_dp_sgd_many: noise_scale_bug=%g injects a deliberate fault (noise multiplier "
            "%g used instead of the claimed %g); for tests only",
            noise_scale_bug,
            noise_multiplier * noise_scale_bug,
            noise_multiplier,
        )
    with forked_rng(seeds[0], dev):
        return _train_stacked_tensors(
            net,
            X_t,
            y_t,
            seeds=seeds,
            noise_multiplier=noise_multiplier * noise_scale_bug,
            max_grad_norm=max_grad_norm,
            steps=steps,
            learning_rate=learning_rate,
            expected_batch_size=expected_batch_size,
            device=dev,
        )


# ----------------------------------------------------------------------------------------------
# the audit's score
# ----------------------------------------------------------------------------------------------
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
    module = _unwrap(_check_module(model))
    if isinstance(y, torch.Tensor) and y.numel() == 1:
        y = int(y.item())
    if isinstance(y, bool) or not isinstance(y, numbers.Integral):
        raise ValueError(f"y must be an integer class, got {y!r}")
    device = _module_device(module)
    x_t = torch.as_tensor(x, dtype=torch.float32, device=device).unsqueeze(0)
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            logits = module(x_t)
    finally:
        module.train(was_training)
    if logits.ndim != 2 or logits.shape[0] != 1 or not 0 <= int(y) < logits.shape[1]:
        raise ValueError(
            f"y={y!r} must be a class in [0, n_classes) of logits shaped (1, n_classes); got "
            f"logits of shape {tuple(logits.shape)}"
        )
    return float(torch.nn.functional.cross_entropy(logits, torch.tensor([int(y)], device=device)))


def _opacus_version_message() -> str:
    import opacus

    return (
        f"stacked training was checked against Opacus {' and '.join(TESTED_OPACUS)}, not the "
        f"installed {opacus.__version__}"
    )


def resolve_stack_runs(
    stack_runs,
    template: nn.Module,
    *,
    n_rows: int,
    input_ndim: int,
    sample_rate: float,
    grad_sample_mode: str = "auto",
    device: str | torch.device = "cpu",
) -> int:
    """How many runs to train together for ``stack_runs`` (see :class:`DPSGDRun`).

    ``"auto"``: :func:`rdpest.auditing.dpsgd.stacking.auto_stack_size` on ``device`` for full-batch
    training with ghost clipping allowed, else 1. An integer above 1 that cannot be honoured raises
    ``ValueError`` saying why.

    Examples
    --------
    >>> from rdpest.auditing.dpsgd.models import make_model
    >>> resolve_stack_runs("auto", make_model("lr", 64, 10), n_rows=900, input_ndim=2,
    ...                    sample_rate=1.0)
    16
    >>> resolve_stack_runs("auto", make_model("lr", 64, 10), n_rows=900, input_ndim=2,
    ...                    sample_rate=0.5)
    1
    """
    if stack_runs == "auto":
        if sample_rate < 1.0 or grad_sample_mode not in ("auto", "ghost"):
            return 1
        return auto_stack_size(template, n_rows, input_ndim, device)
    if isinstance(stack_runs, str):
        raise ValueError(f'stack_runs must be "auto" or an integer >= 1, got {stack_runs!r}')
    stack = _check_int(stack_runs, "stack_runs", 1)
    if stack > 1:
        reasons = []
        if sample_rate < 1.0:
            reasons.append("it needs full-batch training (sample_rate=1)")
        if grad_sample_mode not in ("auto", "ghost"):
            reasons.append('it trains with ghost clipping (grad_sample_mode "auto" or "ghost")')
        if not stackable(template, input_ndim):
            reasons.append(
                "it needs an nn.Sequential of nn.Linear layers and elementwise activations"
            )
        if not opacus_supports_stacking():
            reasons.append(_opacus_version_message())
        if reasons:
            raise ValueError(f"stack_runs={stack} is not possible: " + "; ".join(reasons))
    return stack


class DPSGDRun:
    """Picklable score function of a DP-SGD audit: ``run(include_canary, seed) -> canary loss``.

    Each call builds the model, loads θ₀, trains one DP-SGD run (:func:`train_dp_sgd`) on the
    audited data with the canary appended when ``include_canary`` is true, and returns the
    canary's loss (:func:`canary_loss`). Instances hold only numpy arrays, floats and the model
    name (or a picklable factory), so they travel to joblib / Dask / Ray workers; tensors are
    rebuilt lazily once per process and reused across calls.

    Parameters
    ----------
    model : {"lr", "cnn"} or callable
        Passed to :func:`rdpest.auditing.dpsgd.models.make_model`.
    X, y : array-like
        The audited training data (WITHOUT the canary).
    canary : tuple (x, label)
        The canary, e.g. from :func:`rdpest.auditing.dpsgd.canaries.make_canary`.
    initial_state : mapping of str to tensor or array, optional
        θ₀ (e.g. from :func:`pretrain`), shared by all runs. ``None`` uses the model's default
        initialisation under seed 0 (the same for every run).
    noise_multiplier, max_grad_norm, steps, learning_rate, sample_rate, device
        As in :func:`train_dp_sgd`. The expected batch size is ``round(sample_rate * len(X))``
        in both neighbouring runs.
    input_shape : tuple of int, optional
        Passed to ``make_model`` (for the CNN).
    n_classes : int, optional
        Number of classes; default ``max(max(y), canary label) + 1``.
    grad_sample_mode, noise_scale_bug
        As in :func:`train_dp_sgd` (``noise_scale_bug`` is a fault injection for tests only).
    stack_runs : int >= 1 or "auto", default "auto"
        How many runs :meth:`score_many` trains together as one stacked network
        (:func:`train_dp_sgd_many`; each run still equals the single run with its seed, up to float
        rounding). ``"auto"``: up to :data:`rdpest.auditing.dpsgd.stacking.MAX_STACK` (16; on a GPU
        :data:`rdpest.auditing.dpsgd.stacking.MAX_STACK_CUDA`, 64) for full-batch training of an
        ``nn.Sequential`` of linear layers and elementwise activations (the ``"lr"`` and ``"mlp"``
        models) with ``grad_sample_mode`` ``"auto"`` or ``"ghost"``, else 1. A number above 1 for a
        model or setting that cannot be stacked is an error. The resolved number is
        :attr:`runs_per_call`.

    Examples
    --------
    >>> import pickle
    >>> X = np.random.default_rng(0).random((30, 4), dtype=np.float32)
    >>> y = (X[:, 0] > 0.5).astype(np.int64)
    >>> run = DPSGDRun("lr", X, y, (np.zeros(4, np.float32), 0), noise_multiplier=1.0, steps=5)
    >>> clone = pickle.loads(pickle.dumps(run))
    >>> run(True, seed=7) == clone(True, seed=7)
    True
    """

    def __init__(
        self,
        model: str | Callable[[int, int], nn.Module],
        X,
        y,
        canary: tuple,
        initial_state: Mapping | None = None,
        *,
        noise_multiplier: float,
        max_grad_norm: float = 1.0,
        steps: int = 100,
        learning_rate: float = 1.0,
        sample_rate: float = 1.0,
        device: str = "cpu",
        input_shape: tuple[int, ...] | None = None,
        n_classes: int | None = None,
        grad_sample_mode: str = "auto",
        noise_scale_bug: float = 1.0,
        stack_runs: int | str = "auto",
    ):
        self.X, self.y = load_arrays(X, y)
        if not isinstance(canary, tuple | list) or len(canary) != 2:
            raise ValueError("canary must be a tuple (x, label)")
        canary_x = np.asarray(canary[0], dtype=np.float32)
        if canary_x.size != self.X[0].size:
            raise ValueError(
                f"the canary input has {canary_x.size} values but one row of X has {self.X[0].size}"
            )
        if not np.all(np.isfinite(canary_x)):
            raise ValueError("the canary input must be finite")
        self.canary_x = canary_x.reshape(self.X.shape[1:])
        label = canary[1]
        if isinstance(label, bool) or not isinstance(label, numbers.Integral) or label < 0:
            raise ValueError(f"the canary label must be an integer >= 0, got {label!r}")
        self.canary_y = int(label)
        if n_classes is None:
            n_classes = max(int(self.y.max()), self.canary_y) + 1
        self.n_classes = _check_int(n_classes, "n_classes", 2)
        if self.canary_y >= self.n_classes or int(self.y.max()) >= self.n_classes:
            raise ValueError(f"labels must lie in [0, n_classes={self.n_classes})")
        if not (callable(model) or isinstance(model, str)):
            raise ValueError(f"model must be a model name or a factory, got {model!r}")
        self.model = model
        self.input_shape = None if input_shape is None else tuple(int(s) for s in input_shape)
        self.noise_multiplier = _check_float(noise_multiplier, "noise_multiplier")
        self.max_grad_norm = _check_float(max_grad_norm, "max_grad_norm", allow_equal=False)
        self.steps = _check_int(steps, "steps", 1)
        self.learning_rate = _check_float(learning_rate, "learning_rate", allow_equal=False)
        self.sample_rate = _check_sample_rate(sample_rate)
        self.noise_scale_bug = _check_float(noise_scale_bug, "noise_scale_bug")
        self.grad_sample_mode = _check_grad_sample_mode(grad_sample_mode)
        resolve_device(device)  # fail early on an unavailable device
        self.device = device
        if self.noise_scale_bug != 1.0:
            logger.warning(
                "DPSGDRun: noise_scale_bug=%g injects a deliberate fault (noise multiplier %g "
                "used instead of the claimed %g); for tests only",
                self.noise_scale_bug,
                self.noise_multiplier * self.noise_scale_bug,
                self.noise_multiplier,
            )
        self.expected_batch_size = max(1.0, float(round(self.sample_rate * len(self.y))))
        template = self._build_model(initial_state=None)
        if initial_state is None:
            state = template.state_dict()
        else:
            if not isinstance(initial_state, Mapping):
                raise ValueError("initial_state must be a state dict (a mapping)")
            state = {k: torch.as_tensor(np.asarray(v)) for k, v in initial_state.items()}
            try:
                template.load_state_dict(state)
            except RuntimeError as exc:
                raise ValueError(f"initial_state does not fit the model: {exc}") from None
        self.initial_state = {k: v.detach().cpu().numpy().copy() for k, v in state.items()}
        self.stack_runs = stack_runs
        self.runs_per_call = resolve_stack_runs(
            stack_runs,
            template,
            n_rows=len(self.y) + 1,
            input_ndim=self.X.ndim,
            sample_rate=self.sample_rate,
            grad_sample_mode=self.grad_sample_mode,
            device=resolve_device(device),
        )
        self._cache: dict | None = None

    def _build_model(self, initial_state: Mapping | None) -> nn.Module:
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(0)
            net = make_model(self.model, int(self.X[0].size), self.n_classes, self.input_shape)
        if initial_state is not None:
            net.load_state_dict({k: torch.from_numpy(v) for k, v in initial_state.items()})
        return net

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_cache"] = None  # tensors and modules are rebuilt in the receiving process
        return state

    def _prepared(self) -> dict:
        if self._cache is None:
            dev = resolve_device(self.device)
            X = torch.from_numpy(self.X).to(dev)
            y = torch.from_numpy(self.y).to(dev)
            cx = torch.from_numpy(self.canary_x).to(dev).unsqueeze(0)
            cy = torch.tensor([self.canary_y], dtype=torch.int64, device=dev)
            self._cache = {
                "device": dev,
                "template": self._build_model(self.initial_state).to(dev),
                "data": {False: (X, y), True: (torch.cat([X, cx]), torch.cat([y, cy]))},
            }
        return self._cache

    def __call__(self, include_canary: bool, seed: int) -> float:
        """Train once (with or without the canary) and return the canary's loss."""
        if not isinstance(include_canary, bool | np.bool_):
            raise ValueError(f"include_canary must be a bool, got {include_canary!r}")
        seed = _check_seed(seed)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            cache = self._prepared()
            dev = cache["device"]
            X, y = cache["data"][bool(include_canary)]
            net = copy.deepcopy(cache["template"])
            with forked_rng(seed, dev):
                trained = _train_dp_sgd_tensors(
                    net,
                    X,
                    y,
                    noise_multiplier=self.noise_multiplier * self.noise_scale_bug,
                    max_grad_norm=self.max_grad_norm,
                    steps=self.steps,
                    learning_rate=self.learning_rate,
                    sample_rate=self.sample_rate,
                    expected_batch_size=self.expected_batch_size,
                    seed=seed,
                    device=dev,
                    grad_sample_mode=self.grad_sample_mode,
                )
            return canary_loss(trained, self.canary_x, self.canary_y)
        finally:
            torch.set_num_threads(threads)

    def score_many(self, include_canary: bool, seeds: Sequence[int]) -> list[float]:
        """The canary's loss after one run per seed: ``[self(include_canary, s) for s in seeds]``.

        Trains ``runs_per_call`` runs at a time as one stacked network when that is above 1
        (:func:`train_dp_sgd_many`); each score equals the single run's up to float rounding.
        """
        if not isinstance(include_canary, bool | np.bool_):
            raise ValueError(f"include_canary must be a bool, got {include_canary!r}")
        seeds = _check_seeds(seeds)
        if self.runs_per_call == 1:
            return [self(include_canary, s) for s in seeds]
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            cache = self._prepared()
            dev = cache["device"]
            X, y = cache["data"][bool(include_canary)]
            scores = []
            for start in range(0, len(seeds), self.runs_per_call):
                chunk = seeds[start : start + self.runs_per_call]
                with forked_rng(chunk[0], dev):
                    trained = _train_stacked_tensors(
                        cache["template"],
                        X,
                        y,
                        seeds=chunk,
                        noise_multiplier=self.noise_multiplier * self.noise_scale_bug,
                        max_grad_norm=self.max_grad_norm,
                        steps=self.steps,
                        learning_rate=self.learning_rate,
                        expected_batch_size=self.expected_batch_size,
                        device=dev,
                    )
                scores += [canary_loss(m, self.canary_x, self.canary_y) for m in trained]
            return scores
        finally:
            torch.set_num_threads(threads)

    def __repr__(self) -> str:
        name = self.model if isinstance(self.model, str) else getattr(self.model, "__name__", "?")
        return (
            f"DPSGDRun(model={name!r}, n={len(self.y)}, noise_multiplier={self.noise_multiplier}, "
            f"steps={self.steps}, sample_rate={self.sample_rate}, device={self.device!r}, "
            f"runs_per_call={self.runs_per_call})"
        )
