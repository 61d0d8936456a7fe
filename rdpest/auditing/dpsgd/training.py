"""DP-SGD training with Opacus: worst-case initialisation, single runs and stacked runs.

An audit trains many models on two neighbouring data sets (with and without one canary) and
compares the canary's loss across runs (Kim, Varshney & Alabi 2026, Sec. 4). This module trains:

- :func:`pretrain`: ordinary (non-private) training on data disjoint from the audited set, giving
  the worst-case initial parameters θ₀ shared by every run (Nasr et al. 2023, "Tight Auditing of
  Differentially Private Machine Learning"; Annamalai & De Cristofaro 2024, "Nearly Tight
  Black-Box Auditing of Differentially Private Machine Learning", the paper's [31]).
- :func:`train_dp_sgd`: one real DP-SGD run (Abadi et al. 2016) through Opacus's
  ``PrivacyEngine`` (Yousefpour et al. 2021, "Opacus: User-Friendly Differential Privacy
  Library in PyTorch"), set up by :mod:`rdpest.auditing.dpsgd.engine`. Full batch by default
  (sampling rate 1), Poisson sampling otherwise.
- :func:`train_dp_sgd_many`: several full-batch runs of a small model at once, stacked
  (:mod:`rdpest.auditing.dpsgd.stacking`), each one DP-SGD run with its own noise.

The settings of a run are one :class:`~rdpest.auditing.dpsgd.config.DPSGDConfig` (its docstring
states the learning-rate convention). The public functions here take them as keywords, build the
configuration (which validates them) and pass it down.

Reproducibility: every run takes an integer ``seed``. The Gaussian noise and the Poisson sampling
draw from dedicated ``torch.Generator`` objects seeded from it (two independent streams derived by
``numpy.random.SeedSequence``), and the whole run executes inside ``torch.random.fork_rng`` with
the global generator seeded too, so the caller's global RNG state is left untouched and the same
seed gives bit-identical weights on the same machine and device.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from rdpest.auditing.dpsgd.canaries import eval_logits
from rdpest.auditing.dpsgd.config import DPSGDConfig
from rdpest.auditing.dpsgd.data import load_arrays
from rdpest.auditing.dpsgd.engine import (
    BatchedTensors,
    choose_grad_sample_mode,
    identity_collate,
    make_private,
    quiet_opacus,
)
from rdpest.auditing.dpsgd.stacking import (
    StackedConv2d,
    StackedGradSampleModule,
    StackedLinear,
    opacus_supports_stacking,
    opacus_version_message,
    stack_model,
    stack_noise_seed,
    stackable,
    unstack_model,
)
from rdpest.utils.processes import keep_freed_heap
from rdpest.utils.torch_helpers import (
    check_module,
    forked_rng,
    resolve_device,
    stream_seeds,
    unwrap_module,
)
from rdpest.utils.validation import check_int, check_positive, check_seed, check_seeds

__all__ = ["pretrain", "train_dp_sgd", "train_dp_sgd_many"]


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


def _on_device(
    model: nn.Module, X, y, device
) -> tuple[nn.Module, torch.Tensor, torch.Tensor, torch.device]:
    """A copy of ``model`` (unwrapped from Opacus) and the data as tensors, all on ``device``."""
    dev = resolve_device(device)
    X_t, y_t = _as_tensors(X, y, dev)
    return copy.deepcopy(unwrap_module(check_module(model))).to(dev), X_t, y_t, dev


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
    check_module(model)
    epochs = check_int(epochs, "epochs", 1)
    learning_rate = check_positive(learning_rate, "learning_rate")
    batch_size = check_int(batch_size, "batch_size", 1)
    seed = check_seed(seed)
    net, X_t, y_t, dev = _on_device(model, X, y, device)
    n = len(y_t)
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


def _train_dp_sgd_tensors(
    net: nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    config: DPSGDConfig,
    *,
    seed: int,
    device: torch.device,
) -> nn.Module:
    """DP-SGD on ``net`` (modified in place and returned), data already tensors on ``device``.

    ``config`` is trusted (validated when made) and has its ``expected_batch_size`` set.
    """
    from opacus.data_loader import DPDataLoader

    if device.type == "cpu":
        keep_freed_heap()  # a step's freed tensors are reused, not mapped again (utils.processes)
    noise_seed, sampling_seed = stream_seeds(seed, 2)
    noise_generator = torch.Generator(device=device)
    noise_generator.manual_seed(noise_seed)
    full_batch = config.full_batch
    dataset = BatchedTensors(X, y)
    if full_batch:
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=len(dataset), collate_fn=identity_collate
        )
    else:
        # Opacus's own Poisson loader, built directly so that it samples at exactly
        # `sample_rate`: make_private(poisson_sampling=True) would instead derive the rate as
        # 1 / len(data_loader), rounding it to 1 / ceil(n / batch_size).
        sampling_generator = torch.Generator()
        sampling_generator.manual_seed(sampling_seed)
        loader = DPDataLoader(
            dataset,
            sample_rate=config.sample_rate,
            generator=sampling_generator,
            collate_fn=identity_collate,
        )
    with quiet_opacus():
        mode = choose_grad_sample_mode(config.grad_sample_mode, net, full_batch)
        module, dp_optimizer, criterion, loader = make_private(
            net, loader, config, noise_generator=noise_generator, mode=mode
        )
        module.train()
        _run_steps(module, dp_optimizer, criterion, loader, X, y, config.steps, full_batch)
    dp_optimizer.zero_grad(set_to_none=True)
    trained = module.to_standard_module()
    for p in trained.parameters():
        p.grad = None
    return trained


def stacked_canary_losses(stacked: nn.Sequential, x, y: int) -> list[float]:
    """:func:`~rdpest.auditing.dpsgd.canaries.canary_loss` of every copy of a stacked network
    (from :func:`_train_stacked_module`), in one forward pass: the canary ``x`` as one row per
    copy, in eval mode without gradients. Equal to the unstacked copies' losses to float
    rounding; on a GPU, unstacking thousands of copies into modules and evaluating each took
    longer than training them.
    """
    copies = next(m.copies for m in stacked if isinstance(m, StackedLinear | StackedConv2d))
    device = next(stacked.parameters()).device
    x_t = torch.as_tensor(x, dtype=torch.float32, device=device).unsqueeze(0)
    rows = x_t.repeat(copies, *([1] * (x_t.ndim - 1)))
    logits = eval_logits(stacked, rows)
    target = torch.full((copies,), int(y), dtype=torch.int64, device=device)
    losses = nn.functional.cross_entropy(logits, target, reduction="none")
    return losses.cpu().tolist()


def _train_stacked_module(
    template: nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    config: DPSGDConfig,
    *,
    seeds: Sequence[int],
    device: torch.device,
) -> nn.Sequential:
    """Full-batch DP-SGD runs of ``template``, one per seed, trained as one stacked network,
    which is returned (:func:`unstack_model` gives the copies as modules).

    See :mod:`rdpest.auditing.dpsgd.stacking`: every copy is one DP-SGD run; the stack's noise
    comes from one generator seeded by :func:`stack_noise_seed` of all ``seeds``.
    """
    from opacus.grad_sample import GradSampleModuleFastGradientClipping
    from opacus.optimizers import DPOptimizerFastGradientClipping
    from opacus.utils.fast_gradient_clipping_utils import DPLossFastGradientClipping

    from rdpest.auditing.dpsgd.one_pass import OnePassLoss

    if device.type == "cpu":
        keep_freed_heap()  # as in _train_dp_sgd_tensors
    copies = len(seeds)
    net = stack_model(template, copies)
    first = next(m for m in net.modules() if next(m.parameters(recurse=False), None) is not None)
    if isinstance(first, StackedLinear):
        first.cache_input_norms = True  # its input is the same data at every step
    if isinstance(first, StackedLinear | StackedConv2d):
        first.repeated_input = True  # ... and the same rows for every copy (X_rows below)
    X_rows = X.repeat(copies, *([1] * (X.ndim - 1)))
    y_rows = y.repeat(copies)
    generator = torch.Generator(device=device)
    generator.manual_seed(stack_noise_seed(seeds))
    dataset = BatchedTensors(X_rows, y_rows)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=len(dataset), collate_fn=identity_collate
    )
    with quiet_opacus():
        module, dp_optimizer, criterion, loader = make_private(
            net, loader, config, noise_generator=generator, mode="ghost"
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
        if type(criterion) is DPLossFastGradientClipping:
            criterion.__class__ = OnePassLoss
        module.train()
        _run_steps(module, dp_optimizer, criterion, loader, X_rows, y_rows, config.steps, True)
    dp_optimizer.zero_grad(set_to_none=True)
    return module.to_standard_module()


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
    check_module(model)
    config = DPSGDConfig(
        noise_multiplier=noise_multiplier,
        max_grad_norm=max_grad_norm,
        steps=steps,
        learning_rate=learning_rate,
        sample_rate=sample_rate,
        expected_batch_size=expected_batch_size,
        grad_sample_mode=grad_sample_mode,
        noise_scale_bug=noise_scale_bug,
    )
    seed = check_seed(seed)
    net, X_t, y_t, dev = _on_device(model, X, y, device)
    config = config.with_batch_size_of(len(y_t))
    config.warn_if_faulty("train_dp_sgd")
    with forked_rng(seed, dev):
        return _train_dp_sgd_tensors(net, X_t, y_t, config, seed=seed, device=dev)


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

    The runs are trained together as one stacked network through one Opacus ``PrivacyEngine``
    with ghost clipping (:mod:`rdpest.auditing.dpsgd.stacking` says why each copy is exactly one
    DP-SGD run), which shares Opacus's per-step work among the copies (models per second:
    ``python benchmarks/bench_auditing.py --throughput``). The stack draws its noise in one
    piece per parameter and step, from a generator seeded by all ``seeds``
    (:func:`rdpest.auditing.dpsgd.stacking.stack_noise_seed`): every copy's noise is i.i.d.
    N(0, σ²C²) and independent of the other copies', the same ``seeds`` give the same models,
    and at σ = 0 run k equals ``train_dp_sgd(model, X, y, seed=seeds[k], sample_rate=1, ...)``
    up to float rounding.

    Parameters
    ----------
    model : torch.nn.Module
        θ₀ in an ``nn.Sequential`` of linear and convolution layers, elementwise activations,
        flattening and pooling (see :func:`rdpest.auditing.dpsgd.stacking.stackable`); copied,
        never modified.
    X, y : array-like or torch.Tensor
        The training set.
    seeds : sequence of int >= 0
        Identify the runs; together they seed the stack's noise.
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
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.random((30, 4), dtype=np.float32), rng.integers(0, 2, 30)
    >>> with torch.random.fork_rng():
    ...     _ = torch.manual_seed(0)
    ...     model = make_model("lr", 4, 2)
    >>> from rdpest.auditing.dpsgd.stacking import opacus_supports_stacking
    >>> if opacus_supports_stacking():  # refused on an Opacus release it was not checked against
    ...     a, b = train_dp_sgd_many(model, X, y, seeds=[3, 4], noise_multiplier=0.0, steps=5)
    ...     single = train_dp_sgd(model, X, y, noise_multiplier=0.0, steps=5, seed=3)
    ...     assert torch.allclose(a[1].weight, single[1].weight, atol=1e-5)
    """
    check_module(model)
    config = DPSGDConfig(  # always full batch
        noise_multiplier,
        max_grad_norm,
        steps,
        learning_rate,
        expected_batch_size=expected_batch_size,
        noise_scale_bug=noise_scale_bug,
    )
    seeds = check_seeds(seeds)
    net, X_t, y_t, dev = _on_device(model, X, y, device)
    if not stackable(net, X_t.ndim):
        raise ValueError(
            "this model cannot be trained stacked: train_dp_sgd_many needs an nn.Sequential of "
            "nn.Linear layers (on flat rows), nn.Conv2d layers (zero padding, equal on both "
            "sides, on images), elementwise activations (not in place), nn.Flatten, "
            "nn.Unflatten and 2-D pooling "
            "(see rdpest.auditing.dpsgd.stacking.stackable); train it with train_dp_sgd"
        )
    if not opacus_supports_stacking():
        raise ValueError(opacus_version_message())
    config = config.with_batch_size_of(len(y_t))
    config.warn_if_faulty("train_dp_sgd_many")
    with forked_rng(seeds[0], dev):
        stacked = _train_stacked_module(net, X_t, y_t, config, seeds=seeds, device=dev)
        return unstack_model(stacked, net)
