"""Torch helpers shared by the estimators and the DP-SGD auditing: devices, threads, RNG scoping.

Reproducibility rests on three habits kept in one place: a device name is resolved once into a
``torch.device`` (CUDA only where it exists), a computation that sets torch's process-wide thread
count restores it afterwards, and a computation that draws from torch's global generator does so
in a forked, seeded copy so that the caller's RNG state is never touched.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

import numpy as np
import torch
from torch import nn

__all__ = [
    "check_module",
    "deterministic_cudnn",
    "forked_rng",
    "module_device",
    "num_threads",
    "resolve_device",
    "stream_seeds",
    "unwrap_module",
]


def resolve_device(device: str) -> torch.device:
    """Turn ``"auto" | "cpu" | "cuda" | "cuda:N"`` into a torch device, or raise ValueError.

    Examples
    --------
    >>> resolve_device("cpu")
    device(type='cpu')
    """
    if not isinstance(device, str):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        return torch.device("cpu")
    if device == "cuda" or device.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise ValueError(
                f"device={device!r} was requested but CUDA is not available on this machine; "
                "use device='auto' or 'cpu'"
            )
        index = device[len("cuda:") :] if device != "cuda" else "0"
        if not (index.isascii() and index.isdigit()):
            raise ValueError(f"device must be 'cuda' or 'cuda:N' with N an integer, got {device!r}")
        count = torch.cuda.device_count()
        if int(index) >= count:  # refused here, not at the first tensor moved there
            raise ValueError(
                f"device={device!r} was requested but this machine has {count} CUDA device(s) "
                f"(cuda:0 to cuda:{count - 1})"
            )
        return torch.device(device)
    raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}")


@contextmanager
def num_threads(threads: int | None) -> Iterator[None]:
    """Run a block with torch's (process-wide) thread count set to ``threads``, then restore it.

    ``None`` leaves the count as it is. The previous count comes back even when the block raises.
    """
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(int(threads))
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def stream_seeds(seed: int, n: int) -> list[int]:
    """``n`` independent 63-bit seeds derived from ``seed`` (for separate torch generators)."""
    state = np.random.SeedSequence(seed).generate_state(n, dtype=np.uint64)
    return [int(s >> np.uint64(1)) for s in state]


@contextmanager
def deterministic_cudnn() -> Iterator[None]:
    """Run a block with cuDNN's deterministic algorithms and no autotuning (the caller's two
    settings restored; the others, TF32 included, left alone). cuDNN's default backward
    convolutions may add in a different order from run to run, so without this the same seed
    need not train the same convolutional network twice on a GPU. The two attributes are set
    directly: ``torch.backends.cudnn.flags`` takes other arguments in each torch version and
    reads the legacy TF32 setting, which torch refuses once the new precision API was used."""
    cudnn = torch.backends.cudnn
    previous = (cudnn.deterministic, cudnn.benchmark)
    cudnn.deterministic, cudnn.benchmark = True, False
    try:
        yield
    finally:
        cudnn.deterministic, cudnn.benchmark = previous


@contextmanager
def forked_rng(seed: int, device: torch.device) -> Iterator[None]:
    """Run a block with torch's global generator(s) forked and seeded (caller's state restored);
    on a CUDA device, with cuDNN deterministic too (:func:`deterministic_cudnn`)."""
    devices = []
    if device.type == "cuda":
        devices = [device.index if device.index is not None else torch.cuda.current_device()]
    with (
        torch.random.fork_rng(devices=devices, device_type="cuda"),
        deterministic_cudnn() if devices else nullcontext(),
    ):
        # Seed only the forked generators: torch.manual_seed would also reseed every CUDA device,
        # whose state fork_rng does not restore when the run is on the CPU.
        torch.default_generator.manual_seed(seed)
        if devices:
            with torch.cuda.device(devices[0]):
                torch.cuda.manual_seed(seed)
        yield


def check_module(model) -> nn.Module:
    """``model`` if it is a ``torch.nn.Module``, else a ValueError."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return model


def unwrap_module(model: nn.Module) -> nn.Module:
    """The user module inside an Opacus ``GradSampleModule`` (or the module itself)."""
    inner = getattr(model, "_module", None)
    return inner if isinstance(inner, nn.Module) else model


def module_device(model: nn.Module) -> torch.device:
    """The device of the module's first parameter (the CPU for a module without parameters)."""
    try:
        return next(model.parameters()).device
    except StopIteration:
        return torch.device("cpu")
