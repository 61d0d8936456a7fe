"""How rdpest sets up Opacus for one DP-SGD training: per-example gradient mode, loader, engine.

The pieces every training path shares (single runs, stacked runs): which of Opacus's ways of
computing per-example gradient norms provably applies to a model
(:func:`choose_grad_sample_mode`),
a dataset that hands Opacus whole batches at once, and the ``PrivacyEngine(accountant="rdp")``
call with a sum-reduced loss (mean reduction divides by the realised batch size, which reveals
whether the canary is present: Opacus issue #571).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from rdpest.auditing.dpsgd.config import DPSGDConfig

__all__ = ["BatchedTensors", "choose_grad_sample_mode", "make_private", "quiet_opacus"]


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


def choose_grad_sample_mode(mode: str, net: nn.Module, full_batch: bool) -> str:
    """Resolve ``"auto"``: ghost clipping or ExpandedWeights when they provably apply, else hooks.

    Both need every module that owns parameters to be of a supported type (exact type: a
    subclass may use its weights elsewhere in ``forward``), each layer called once with its own
    weights (:func:`_calls_each_layer_once`) and, here, full-batch training (Poisson sampling can
    draw an empty batch). Models made only of ``nn.Linear`` layers get
    Opacus's ghost clipping (Li et al. 2022, "Large Language Models Can Be Strong Differentially
    Private Learners"): per-example gradient norms come from activations and
    output gradients without materialising per-example gradients, then a second backward pass
    sums the clipped gradients; it was the fastest mode for linear models here. For convolutions
    its norms are slower than ExpandedWeights, so models with any other ``_EW_LAYERS`` layer get
    ``"ew"`` (timings: ``python benchmarks/bench_auditing.py --throughput``).
    """
    if mode != "auto":
        return mode
    if not full_batch or not _calls_each_layer_once(net):
        return "hooks"
    layers = {type(m) for m in net.modules() if any(True for _ in m.parameters(recurse=False))}
    if not layers <= set(_EW_LAYERS):
        return "hooks"
    return "ghost" if layers <= {nn.Linear} else "ew"


class BatchedTensors(torch.utils.data.Dataset):
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


def identity_collate(batch):
    """The collate function of :class:`BatchedTensors` loaders: batches come whole already."""
    return batch


@contextmanager
def quiet_opacus() -> Iterator[None]:
    """Silence two expected, harmless warnings while Opacus sets up and trains.

    "Secure RNG turned off" (secure_mode=False is what makes audits reproducible) and torch's
    "Full backward hook is firing ... no inputs require gradients" from Opacus's per-sample
    gradient hooks on the first layer.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Secure RNG turned off")
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        yield


def make_private(
    net: nn.Module,
    loader,
    config: DPSGDConfig,
    *,
    noise_generator: torch.Generator | None,
    mode: str,
):
    """Opacus ``PrivacyEngine(accountant="rdp")`` set-up of one DP-SGD training.

    Plain SGD of step ``learning_rate / expected_batch_size`` on the sum-reduced cross-entropy,
    flat clipping at ``max_grad_norm``, noise multiplier ``config.effective_noise_multiplier``
    (``config.expected_batch_size`` must be set). Returns the wrapped module, the DP optimizer,
    the criterion (wrapped by Opacus for ghost clipping, whose backward runs its two passes) and
    the data loader Opacus hands back.
    """
    from opacus import PrivacyEngine

    step = config.learning_rate / config.expected_batch_size
    optimizer = torch.optim.SGD(net.parameters(), lr=step)
    criterion = nn.CrossEntropyLoss(reduction="sum")
    engine = PrivacyEngine(accountant="rdp", secure_mode=False)
    private = engine.make_private(
        module=net,
        optimizer=optimizer,
        data_loader=loader,
        # Ghost clipping wraps the criterion and returns it as a fourth element; the other
        # modes ignore it.
        criterion=criterion,
        noise_multiplier=config.effective_noise_multiplier,
        max_grad_norm=config.max_grad_norm,
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
