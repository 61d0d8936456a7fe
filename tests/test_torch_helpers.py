"""rdpest.utils.torch_helpers: what the random-stream and cuDNN scoping promise callers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.backends import cudnn

from rdpest import DVRenyiEstimator
from rdpest.utils.torch_helpers import deterministic_cudnn, forked_rng, resolve_device

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _flags():
    return cudnn.deterministic, cudnn.benchmark, cudnn.allow_tf32, cudnn.enabled


def test_deterministic_cudnn_sets_two_flags_and_restores_the_callers():
    before = _flags()
    try:
        cudnn.benchmark, cudnn.allow_tf32 = True, False  # a caller's own choices
        with deterministic_cudnn():
            assert cudnn.deterministic and not cudnn.benchmark
            assert cudnn.allow_tf32 is False  # left as the caller set it
        assert _flags()[:3] == (before[0], True, False)
        with pytest.raises(KeyError), deterministic_cudnn():
            raise KeyError("restored on errors too")
        assert _flags()[:2] == (before[0], True)
    finally:
        cudnn.deterministic, cudnn.benchmark, cudnn.allow_tf32, cudnn.enabled = before


def test_forked_rng_on_the_cpu_seeds_a_copy_and_leaves_cudnn_alone():
    torch.manual_seed(123)
    expected_after = torch.rand(3)
    torch.manual_seed(123)
    before = _flags()
    with forked_rng(7, torch.device("cpu")):
        first = torch.rand(3)
        assert _flags() == before
    with forked_rng(7, torch.device("cpu")):
        assert torch.equal(torch.rand(3), first)
    assert torch.equal(torch.rand(3), expected_after)  # the caller's stream went on untouched


def test_a_cpu_dv_fit_does_not_reseed_the_gpus(monkeypatch):
    """torch.manual_seed also reseeds every CUDA device (queued until CUDA starts, where it is
    not yet), which fork_rng on the CPU does not restore: a CPU fit on a GPU machine replaced
    the caller's CUDA seed."""

    def refuse(seed):
        raise AssertionError("the fit reseeded every CUDA device")

    monkeypatch.setattr(torch.cuda, "manual_seed_all", refuse)
    rng = np.random.default_rng(0)
    DVRenyiEstimator(alpha=2.0, random_state=0, max_epochs=2, device="cpu").fit(
        rng.normal(1, 1, 60), rng.normal(0, 1, 60)
    )


@CUDA
def test_forked_rng_on_cuda_is_deterministic_and_seeds_the_device():
    device = torch.device("cuda")
    with forked_rng(3, device):
        assert cudnn.deterministic and not cudnn.benchmark
        first = torch.randn(5, device=device)
    with forked_rng(3, device):
        assert torch.equal(torch.randn(5, device=device), first)


@pytest.mark.parametrize(
    "device, message",
    [
        ("cuda:1", "has 1 CUDA device"),
        ("cuda:7", "has 1 CUDA device"),
        ("cuda:x", "N an integer"),
        ("cuda:-1", "N an integer"),
        ("cuda:", "N an integer"),
    ],
)
def test_a_cuda_device_the_machine_lacks_is_refused_when_named(monkeypatch, device, message):
    # Pretend to be a one-GPU machine: the index is checked when the device is resolved, not at
    # the first tensor moved there (where torch raised its own error, after data had been loaded).
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ValueError, match=message):
        resolve_device(device)
    assert resolve_device("cuda:0") == torch.device("cuda:0")
    assert resolve_device("cuda") == torch.device("cuda")
