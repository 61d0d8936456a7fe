"""Stacked DP-SGD runs (rdpest.auditing.dpsgd.stacking): each copy must be exactly one DP-SGD run.

The claims tested, against plain, unstacked Opacus (``train_dp_sgd``, one model per engine):

- at σ = 0, run k of ``train_dp_sgd_many(seeds=...)`` follows the trajectory of
  ``train_dp_sgd(seed=seeds[k])`` with clipping that binds, so the clipping, the sums and the step
  are the same DP-SGD, not an approximation of it. Tolerance: the two paths compute the same
  float32 sums in a different order (batched products instead of one per model), so parameters
  agree to rounding, about 1e-7 relative per step; 1e-5 absolute after tens of steps leaves room
  for that and is far below any real difference (one noise draw moves a parameter by
  σ·C·lr/n ≈ 1e-2 here);
- at σ > 0 the stack draws one noise tensor per parameter and step: each copy's noise is
  N(0, σ²C²) and independent of the other copies' (statistical tests, each shown to reject a
  planted dependence), and the canary scores of an audit have the distribution of unstacked runs
  (a two-sample test).
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from scipy import stats
from torch import nn

from rdpest import DVRenyiEstimator
from rdpest.auditing import Auditor
from rdpest.auditing.auditor import runs_per_call
from rdpest.auditing.dpsgd import DPSGDAuditor
from rdpest.auditing.dpsgd import auditor as dpsgd_module
from rdpest.auditing.dpsgd._rows import SHARED_MAX_OUTPUTS
from rdpest.auditing.dpsgd.canaries import make_canary
from rdpest.auditing.dpsgd.config import DPSGDConfig
from rdpest.auditing.dpsgd.models import make_model
from rdpest.auditing.dpsgd.run import DPSGDRun, resolve_stack_runs
from rdpest.auditing.dpsgd.stacking import (
    BYTES_PER_ACTIVATION,
    CPU_CONV_MAX_STACK,
    STACK_RAM_CAP,
    TESTED_OPACUS,
    StackedConv2d,
    StackedLinear,
    activation_floats,
    auto_stack_size,
    available_memory,
    opacus_supports_stacking,
    opacus_version_message,
    stack_memory_budget,
    stack_model,
    stack_noise_seed,
    stackable,
    unstack_model,
)
from rdpest.auditing.dpsgd.training import train_dp_sgd, train_dp_sgd_many
from tests.helpers import COVERAGE_PVALUE, assert_pvalue_above, flat_parameters

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")
# Stacked training specialises two Opacus methods of the releases it was checked against and is
# refused on any other (stacking.TESTED_OPACUS); tests that train stacked are skipped there, and
# test_stacking_is_refused_on_an_unchecked_opacus_release checks the refusal itself.
NEEDS_STACKING = pytest.mark.skipif(
    not opacus_supports_stacking(),
    reason=f"stacking is refused on this Opacus release: {opacus_version_message()}",
)


@pytest.fixture(scope="module")
def data(digits_slice):
    return digits_slice


def _model(name_or_net, n_features=64, n_classes=10, seed=0):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if isinstance(name_or_net, str):
            return make_model(name_or_net, n_features, n_classes)
        return name_or_net()


def _gradient_norms(model: nn.Module, X, y) -> np.ndarray:
    """Per-example gradient norms at the model's current weights (to check clipping binds)."""
    norms = []
    for xi, yi in zip(torch.from_numpy(X), torch.from_numpy(y), strict=True):
        model.zero_grad()
        nn.functional.cross_entropy(model(xi[None]), yi[None]).backward()
        norms.append(float(torch.cat([p.grad.flatten() for p in model.parameters()]).norm()))
    model.zero_grad()
    return np.array(norms)


def _unstackable():
    return nn.Sequential(nn.Linear(64, 8), nn.Dropout(), nn.Linear(8, 10))


def _relu_no_bias():
    return nn.Sequential(
        nn.Flatten(), nn.Linear(64, 16, bias=False), nn.ReLU(), nn.Linear(16, 10, bias=False)
    )


# ------------------------------------------------------------------------------------------------
# at sigma = 0 each stacked copy is the single Opacus run with its seed
@NEEDS_STACKING
@pytest.mark.parametrize("name", ["lr", "mlp", "relu_no_bias"])
def test_each_stacked_copy_is_the_single_run_without_noise(data, name):
    X, y = data
    model = _model(_relu_no_bias if name == "relu_no_bias" else name)
    C = 0.05
    # Clipping must bind for the comparison to test it: most gradients are longer than C.
    assert np.median(_gradient_norms(model, X, y)) > 2 * C
    seeds = [11, 3, 11, 250]
    kwargs = {"noise_multiplier": 0.0, "max_grad_norm": C, "steps": 20}
    many = train_dp_sgd_many(model, X, y, seeds=seeds, **kwargs)
    assert len(many) == len(seeds)
    single = train_dp_sgd(model, X, y, seed=seeds[0], **kwargs)
    for stacked in many:
        assert type(stacked) is type(model)
        assert torch.allclose(flat_parameters(stacked), flat_parameters(single), atol=1e-5, rtol=0)
    moved = (flat_parameters(many[0]) - flat_parameters(model)).abs().max()
    assert moved > 1e-3  # training did something


def _user_cnn():
    # a user's factory: max and adaptive pooling, ReLU, no bias on the second convolution
    return nn.Sequential(
        nn.Unflatten(1, (1, 8, 8)),
        nn.Conv2d(1, 4, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(4, 6, 3, stride=1, padding=1, bias=False, groups=2),
        nn.Tanh(),
        nn.AdaptiveAvgPool2d(2),
        nn.Flatten(),
        nn.Linear(24, 10),
    )


@NEEDS_STACKING
@pytest.mark.parametrize("name", ["cnn", "user_cnn"])
def test_each_stacked_convolutional_copy_is_the_single_run_without_noise(data, name):
    # As for the linear models, against plain Opacus (which trains these with ExpandedWeights),
    # on the digits' 8x8 images given as flat rows and as images.
    X, y = data
    X, y = X[:60], y[:60]
    model = _model(_user_cnn if name == "user_cnn" else name)
    C = 0.05
    assert np.median(_gradient_norms(model, X, y)) > 2 * C  # clipping binds
    kwargs = {"noise_multiplier": 0.0, "max_grad_norm": C, "steps": 10, "learning_rate": 5.0}
    single = train_dp_sgd(model, X, y, seed=1, **kwargs)
    for inputs in (X, X.reshape(-1, 1, 8, 8)):
        if name == "user_cnn" and inputs.ndim == 4:
            continue  # its Unflatten takes flat rows only
        many = train_dp_sgd_many(model, inputs, y, seeds=[1, 2, 3], **kwargs)
        for stacked in many:
            assert type(stacked) is type(model)
            assert torch.allclose(
                flat_parameters(stacked), flat_parameters(single), atol=1e-5, rtol=0
            )
    assert (flat_parameters(many[0]) - flat_parameters(model)).abs().max() > 1e-3


@NEEDS_STACKING
def test_the_papers_mnist_cnn_stacks_exactly():
    rng = np.random.default_rng(0)
    X = rng.random((12, 1, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, 12)
    model = _model(lambda: make_model("mnist_cnn", 784, 10, (1, 28, 28)))
    kwargs = {"noise_multiplier": 0.0, "max_grad_norm": 0.01, "steps": 3, "learning_rate": 5.0}
    single = train_dp_sgd(model, X, y, seed=1, **kwargs)
    for stacked in train_dp_sgd_many(model, X, y, seeds=[1, 2], **kwargs):
        assert torch.allclose(flat_parameters(stacked), flat_parameters(single), atol=1e-5, rtol=0)


def test_stacked_conv_rows_use_their_own_copy():
    layer = nn.Conv2d(4, 6, 3, padding=1, groups=2, stride=2)
    stacked = StackedConv2d(layer, 3)
    with torch.no_grad():
        stacked.weight[1].mul_(-2.0)
        stacked.bias[2].add_(1.0)
    x = torch.randn(3 * 5, 4, 7, 7)
    out = stacked(x).reshape(3, 5, 6, 4, 4)
    for k in range(3):
        plain = nn.Conv2d(4, 6, 3, padding=1, groups=2, stride=2)
        with torch.no_grad():
            plain.weight.copy_(stacked.weight[k])
            plain.bias.copy_(stacked.bias[k])
        assert torch.allclose(out[k], plain(x[5 * k : 5 * k + 5]), atol=1e-5)
    with pytest.raises(ValueError, match="rows"):
        stacked(torch.randn(4, 4, 7, 7))
    with pytest.raises(ValueError, match="padding_mode"):
        StackedConv2d(nn.Conv2d(1, 1, 3, padding=1, padding_mode="reflect"), 2)


@NEEDS_STACKING
def test_stacked_runs_are_reproducible_and_their_noise_is_the_stacks(data):
    X, y = data
    model = _model("lr")
    kwargs = {"noise_multiplier": 1.0, "max_grad_norm": 0.05, "steps": 5}
    first = train_dp_sgd_many(model, X, y, seeds=[11, 3, 11], **kwargs)
    again = train_dp_sgd_many(model, X, y, seeds=[11, 3, 11], **kwargs)
    for a, b in zip(first, again, strict=True):
        assert torch.equal(flat_parameters(a), flat_parameters(b))
    # A repeated seed inside one stack is another run with fresh noise, and the same seed in
    # another stack too: the noise belongs to the stack.
    assert not torch.allclose(flat_parameters(first[0]), flat_parameters(first[2]), atol=1e-4)
    other = train_dp_sgd_many(model, X, y, seeds=[11, 4], **kwargs)
    assert not torch.allclose(flat_parameters(first[0]), flat_parameters(other[0]), atol=1e-4)
    assert stack_noise_seed([11, 3, 11]) != stack_noise_seed([11, 4])


@NEEDS_STACKING
@pytest.mark.parametrize("frozen", ["0.weight", "0.bias", "2.weight"])
def test_frozen_parameters_stay_frozen_as_in_a_single_run(frozen):
    # A frozen layer is left out of Opacus's norms, noise and step; stacked copies must do the
    # same, or they would train it and clip the other layers harder (compared at sigma = 0), and
    # the noise must leave it alone too (sigma = 1).
    rng = np.random.default_rng(0)
    X = rng.random((40, 8), dtype=np.float32)
    y = (X[:, 0] > 0.5).astype(np.int64)
    model = _model(lambda: nn.Sequential(nn.Linear(8, 6), nn.Tanh(), nn.Linear(6, 2)))
    model.get_parameter(frozen).requires_grad_(False)
    for sigma in (0.0, 1.0):
        kwargs = {"noise_multiplier": sigma, "max_grad_norm": 0.05, "steps": 10}
        many = train_dp_sgd_many(model, X, y, seeds=[2, 3], learning_rate=5.0, **kwargs)
        single = train_dp_sgd(model, X, y, seed=2, learning_rate=5.0, **kwargs)
        for stacked in many:
            if sigma == 0:
                assert torch.allclose(
                    flat_parameters(stacked), flat_parameters(single), atol=1e-5, rtol=0
                )
            assert torch.equal(stacked.get_parameter(frozen), model.get_parameter(frozen))
            assert not stacked.get_parameter(frozen).requires_grad


# The noise test: C = 1e-6 makes the clipped gradient negligible, so one step of size 1 moves
# every parameter of copy k by -N(0, (σC)²); with σC = 1 the per-copy deltas are the noise itself.
_NOISE_COPIES, _NOISE_FEATURES = 8, 150  # 8 copies × (150 · 2 + 2) = 302 parameters each


def _noise_deltas(train=train_dp_sgd_many) -> np.ndarray:
    rng = np.random.default_rng(0)
    X = rng.random((50, _NOISE_FEATURES), dtype=np.float32)
    y = (X[:, 0] > 0.5).astype(np.int64)
    model = _model("lr", _NOISE_FEATURES, 2)
    out = train(
        model,
        X,
        y,
        seeds=list(range(100, 100 + _NOISE_COPIES)),
        noise_multiplier=1e6,
        max_grad_norm=1e-6,
        steps=1,
        learning_rate=50.0,  # the step is learning_rate / n = 1
    )
    return np.stack([(flat_parameters(m) - flat_parameters(model)).numpy() for m in out])


def _noise_pvalues(deltas: np.ndarray) -> tuple[float, float, float]:
    """(shape, scale, independence) p-values of the per-copy noise, with N deltas in all and P
    per copy: a Kolmogorov-Smirnov test of the deltas against N(0, 1); the two-sided test of the
    variance, Σ delta² ~ chi-squared(N) under N(0, 1); and the test of zero correlation between
    copies, P · Σ_{k<l} r_kl² ~ chi-squared(K(K-1)/2) under independence (each r_kl is about
    N(0, 1/P))."""
    values = deltas.ravel()
    shape = stats.kstest(values, "norm").pvalue
    tail = stats.chi2.sf(float(np.sum(values**2)), values.size)
    scale = 2 * min(tail, 1 - tail)
    corr = np.corrcoef(deltas)
    pairs = corr[np.triu_indices(len(deltas), 1)]
    statistic = deltas.shape[1] * float(np.sum(pairs**2))
    return float(shape), float(scale), float(stats.chi2.sf(statistic, len(pairs)))


def _planted(deltas: np.ndarray, rho: float, scale: float = 1.0) -> np.ndarray:
    """Copies that share a fraction rho² of their variance (a planted dependence) or whose sd is
    ``scale`` instead of 1."""
    shared = deltas[0]
    mixed = np.sqrt(1 - rho**2) * deltas[1:] + rho * shared
    return scale * np.vstack([deltas[:1], mixed])


@NEEDS_STACKING
def test_stacked_noise_is_sigma_c_per_copy_and_independent_across_copies():
    deltas = _noise_deltas()
    shape, scale, independent = _noise_pvalues(deltas)
    assert_pvalue_above(shape, "per-copy noise against the normal shape")
    assert_pvalue_above(scale, "per-copy noise against sd sigma C")
    assert_pvalue_above(independent, "independence of the copies' noise")
    # Power against what a broken stack would do, on the same draws: copies sharing 10% of their
    # noise variance (r = 0.1, so P · Σr² ≈ 302 · 21 · 0.01 ≈ 63 against a chi-squared(28)
    # whose 1 - 2e-5 quantile is about 70, plus the pairs with copy 0 at r = 0.32) and noise 10%
    # too large (Σ delta² 21% above N = 2416: about 7 standard deviations) are rejected.
    assert _noise_pvalues(_planted(deltas, rho=np.sqrt(0.1)))[2] < COVERAGE_PVALUE
    assert _noise_pvalues(_planted(deltas, rho=0.0, scale=1.1))[1] < COVERAGE_PVALUE


@NEEDS_STACKING
def test_stacking_leaves_the_model_and_global_rng_alone(data):
    X, y = data
    model = _model("lr")
    before = flat_parameters(model)
    state = torch.get_rng_state()
    train_dp_sgd_many(model, X, y, seeds=[1, 2], noise_multiplier=1.0, steps=2)
    assert torch.equal(flat_parameters(model), before)
    assert torch.equal(torch.get_rng_state(), state)


# ------------------------------------------------------------------------------------------------
# the stacked layer and what can be stacked
def test_stacked_linear_rows_use_their_own_copy():
    layer = nn.Linear(3, 2)
    stacked = StackedLinear(layer, 3)
    with torch.no_grad():
        stacked.weight[1] += 1.0
    x = torch.randn(3 * 4, 3)
    out = stacked(x)
    assert torch.allclose(out[:4], layer(x[:4]), atol=1e-6)
    assert torch.allclose(out[8:], layer(x[8:]), atol=1e-6)
    assert not torch.allclose(out[4:8], layer(x[4:8]), atol=1e-3)
    with pytest.raises(ValueError, match="rows"):
        stacked(torch.randn(5, 3))


def test_stacked_linear_shares_one_product_only_for_repeated_unchanged_data():
    """repeated_input is a claim the layer checks: the shared product runs only while the input's
    K row blocks are equal (checked again after any in-place change) and need no gradient."""
    layer = nn.Linear(3, 2)
    stacked = StackedLinear(layer, 3)
    with torch.no_grad():
        stacked.weight[1] += 1.0
        stacked.bias[2] -= 1.0

    def per_copy(x):
        return torch.cat(
            [layer(x[:4]), layer(x[4:8]) + x[4:8].sum(1, keepdim=True), layer(x[8:]) - 1]
        )

    stacked.repeated_input = True
    x = torch.randn(4, 3).repeat(3, 1)
    torch.testing.assert_close(stacked(x), per_copy(x), rtol=0, atol=1e-6)
    assert stacked.repeat_check[2] is True
    with torch.no_grad():
        x[5] += 1.0  # in place: copy 1 now sees other data
    torch.testing.assert_close(stacked(x), per_copy(x), rtol=0, atol=1e-6)
    assert stacked.repeat_check[2] is False
    other = torch.randn(12, 3)
    torch.testing.assert_close(stacked(other), per_copy(other), rtol=0, atol=1e-6)
    assert stacked.repeat_check[0] is other and stacked.repeat_check[2] is False
    # An input that needs a gradient never takes the shared product (it would send the other
    # blocks none).
    wanting = torch.randn(4, 3).repeat(3, 1).requires_grad_()
    checked = stacked.repeat_check
    stacked(wanting).sum().backward()
    assert stacked.repeat_check is checked
    torch.testing.assert_close(
        wanting.grad,
        layer.weight.sum(0).expand(12, 3)
        + torch.cat([torch.zeros(4, 3), torch.ones(4, 3) * 2, torch.zeros(4, 3)]),
        rtol=0,
        atol=1e-6,
    )
    # Wide layers keep the per-copy products (the shared ones are slower there).
    wide = StackedLinear(nn.Linear(3, SHARED_MAX_OUTPUTS + 1), 3)
    wide.repeated_input = True
    same = torch.randn(4, 3).repeat(3, 1)
    torch.testing.assert_close(
        wide(same),
        torch.cat([wide.weight[k] @ same.t()[:, 4 * k : 4 * k + 4] for k in range(3)], 1).t()
        + wide.bias.repeat_interleave(4, 0),
        rtol=0,
        atol=1e-5,
    )
    assert wide.repeat_check is None


def test_stack_and_unstack_round_trip():
    model = _model("mlp")
    stacked = stack_model(model, 4)
    models = unstack_model(stacked, model)
    assert len(models) == 4
    assert all(torch.equal(flat_parameters(m), flat_parameters(model)) for m in models)


def test_what_can_be_stacked():
    assert stackable(make_model("lr", 64, 10)) and stackable(make_model("mlp", 64, 10))
    assert stackable(make_model("lr", 64, 10), input_ndim=4)  # led by Flatten
    assert stackable(nn.Sequential(nn.Linear(4, 2)))
    assert not stackable(nn.Sequential(nn.Linear(4, 2)), input_ndim=3)  # no Flatten
    for name, shape in (("cnn", (1, 8, 8)), ("mnist_cnn", (1, 28, 28))):
        net = make_model(name, int(np.prod(shape)), 10, shape)
        assert stackable(net) and stackable(net, input_ndim=4)  # flat rows or images
    conv = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten())
    assert stackable(nn.Sequential(*conv, nn.Linear(16, 2)), input_ndim=4)
    assert not stackable(nn.Sequential(*conv, nn.Linear(16, 2)), input_ndim=2)  # conv on rows
    assert not stackable(nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, padding_mode="circular")), 4)
    assert not stackable(nn.Sequential(nn.Conv2d(1, 4, 3), nn.MaxPool2d(2, return_indices=True)), 4)
    assert not stackable(nn.Sequential(nn.Linear(4, 2), nn.Unflatten(2, (1, 2))), 2)
    assert not stackable(nn.Sequential(nn.Conv1d(1, 2, 3)), 3)
    assert not stackable(nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2)), 4)
    assert not stackable(nn.Linear(4, 2))
    assert not stackable(nn.Sequential(nn.Linear(4, 3), nn.Dropout(), nn.Linear(3, 2)))
    assert not stackable(nn.Sequential(nn.Linear(4, 3), nn.PReLU(), nn.Linear(3, 2)))
    assert not stackable(nn.Sequential(nn.Tanh()))
    assert not stackable(nn.Sequential(nn.Linear(4, 3), nn.ReLU(inplace=True), nn.Linear(3, 2)))
    assert not stackable(nn.Sequential(nn.Flatten(start_dim=2), nn.Linear(4, 2)), input_ndim=3)
    layer = nn.Linear(3, 3)
    assert not stackable(nn.Sequential(layer, nn.Tanh(), layer))  # a layer used twice
    tied = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    tied[1].weight = tied[0].weight
    assert not stackable(tied)

    class MyLinear(nn.Linear):  # a subclass may use its weights differently
        pass

    assert not stackable(nn.Sequential(MyLinear(4, 2)))


def test_activation_floats_counts_the_input_and_every_layer_output():
    # lr: input 64, Flatten 64, Linear 10; mlp adds Linear 64 and Tanh 64 before Linear 10.
    assert activation_floats(make_model("lr", 64, 10), (64,)) == 64 + 64 + 10
    assert activation_floats(make_model("mlp", 64, 10), (64,)) == 64 + 64 + 64 + 64 + 10
    cnn = make_model("cnn", 64, 10)
    assert activation_floats(cnn, (64,)) > 64 * 8  # the first convolution's 8 maps of 8x8


def test_cuda_memory_torch_holds_in_its_cache_counts_as_free(monkeypatch):
    # torch's caching allocator keeps freed blocks reserved: the driver reports them as used, but
    # new tensors are served from them first, so a stack may use them. Pretend 3 GiB free on the
    # device, 5 GiB reserved by torch of which 1 GiB is in live tensors.
    gib = 1 << 30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (3 * gib, 80 * gib))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 5 * gib)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 1 * gib)
    assert available_memory("cuda") == 7 * gib
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 0)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 0)
    assert available_memory("cuda") == 3 * gib


@NEEDS_STACKING
def test_auto_stack_size_is_the_largest_power_of_two_that_fits_the_budget():
    lr = make_model("lr", 64, 10)
    per_copy = 900 * activation_floats(lr, (64,)) * BYTES_PER_ACTIVATION
    for copies in (1, 3, 64, 100):
        got = auto_stack_size(lr, 900, (64,), budget=copies * per_copy)
        assert got <= copies < 2 * got and got & (got - 1) == 0
    assert auto_stack_size(lr, 900, (64,), budget=per_copy // 2) == 1  # never below one run
    assert auto_stack_size(lr, 900, (64,), budget=100 * per_copy, max_stack=20) == 16
    # Any data size: ten times the rows, a tenth of the copies.
    assert auto_stack_size(lr, 9000, (64,), budget=100 * per_copy) == 8
    # The default budget: a fraction of the free RAM per core, capped.
    assert 0 < stack_memory_budget() <= STACK_RAM_CAP
    assert auto_stack_size(lr, 900, (64,)) == auto_stack_size(
        lr, 900, (64,), budget=stack_memory_budget()
    )
    # MNIST-sized full batch of logistic regression: one copy needs 30,000 rows x 1,578 floats x
    # 16 bytes = 0.76 GB, so at most one fits the 1 GiB cap.
    assert auto_stack_size(make_model("lr", 784, 10), 30_000, (784,)) == 1
    # Convolutional networks: at most CPU_CONV_MAX_STACK on the CPU, the budget's on a GPU.
    cnn = make_model("cnn", 64, 10)
    per_cnn = 900 * activation_floats(cnn, (64,)) * BYTES_PER_ACTIVATION
    assert auto_stack_size(cnn, 900, (64,), budget=100 * per_cnn) == CPU_CONV_MAX_STACK
    assert auto_stack_size(cnn, 900, (64,), budget=100 * per_cnn, max_stack=2) == 2
    assert auto_stack_size(cnn, 900, (64,), budget=2 * per_cnn) == 2
    assert auto_stack_size(cnn, 900, (64,), "cuda", budget=100 * per_cnn) == 64


@NEEDS_STACKING
def test_resolve_stack_runs():
    lr, cnn = make_model("lr", 64, 10), make_model("cnn", 64, 10)
    common = {"n_rows": 900, "example_shape": (64,)}
    assert resolve_stack_runs("auto", lr, sample_rate=1.0, max_stack=40, **common) == 32
    assert resolve_stack_runs("auto", lr, sample_rate=0.5, **common) == 1
    assert resolve_stack_runs("auto", lr, sample_rate=1.0, grad_sample_mode="ew", **common) == 1
    assert resolve_stack_runs("auto", cnn, sample_rate=1.0, **common) == CPU_CONV_MAX_STACK
    assert resolve_stack_runs(1, cnn, sample_rate=0.5, **common) == 1
    assert resolve_stack_runs(40, lr, sample_rate=1.0, **common) == 40
    for value, match in [(0, "stack_runs"), (True, "stack_runs"), ("all", "stack_runs")]:
        with pytest.raises(ValueError, match=match):
            resolve_stack_runs(value, lr, sample_rate=1.0, **common)
    assert resolve_stack_runs(4, cnn, sample_rate=1.0, **common) == 4
    with pytest.raises(ValueError, match=r"nn\.Sequential of nn\.Linear and nn\.Conv2d"):
        resolve_stack_runs(4, _unstackable(), sample_rate=1.0, **common)
    with pytest.raises(ValueError, match="full-batch"):
        resolve_stack_runs(4, lr, sample_rate=0.5, **common)
    with pytest.raises(ValueError, match="ghost"):
        resolve_stack_runs(4, lr, sample_rate=1.0, grad_sample_mode="hooks", **common)


@NEEDS_STACKING
def test_auto_says_at_info_level_how_many_runs_it_stacks_and_why_only_one(caplog):
    # `rdpest -v` shows these: an audit that trains one run at a time says why.
    lr = make_model("lr", 64, 10)
    common = {"n_rows": 900, "example_shape": (64,)}
    with caplog.at_level(logging.INFO, logger="rdpest"):
        resolve_stack_runs("auto", lr, sample_rate=0.5, **common)
        resolve_stack_runs("auto", _unstackable(), sample_rate=1.0, **common)
        resolve_stack_runs("auto", lr, sample_rate=1.0, max_stack=8, **common)
    said = [record.getMessage() for record in caplog.records]
    assert "one run at a time: it needs full-batch training (sample_rate=1)" in said[0]
    assert "one run at a time: it needs an nn.Sequential" in said[1]
    assert said[2] == 'stack_runs="auto" trains 8 run(s) together on cpu'


@NEEDS_STACKING
def test_an_audit_stacks_at_most_a_quarter_of_its_runs_and_resumes_its_stores_layout(tmp_path):
    options = {**_STACKED_AUDIT, "stack_runs": "auto", "n_runs": 40}
    assert DPSGDAuditor(**options).build()[0].runs_per_call == 8  # 40 / 4 = 10 -> 8
    store = tmp_path / "audit"
    DPSGDAuditor(store=store, **{**options, "stack_runs": 4}).auditor().collect()
    # "auto" resumes with the store's stack size, whatever it would choose now
    score_fn, _, fingerprint = DPSGDAuditor(store=store, **options).build()
    assert score_fn.runs_per_call == 4 and fingerprint["stack_size"] == 4


@NEEDS_STACKING
def test_train_dp_sgd_many_rejects_bad_input(data):
    X, y = data
    with pytest.raises(ValueError, match=r"nn\.Sequential of nn\.Linear"):
        train_dp_sgd_many(_unstackable(), X, y, seeds=[1], noise_multiplier=1.0)
    with pytest.raises(ValueError, match="seeds is empty"):
        train_dp_sgd_many(make_model("lr", 64, 10), X, y, seeds=[], noise_multiplier=1.0)
    with pytest.raises(ValueError, match="seed"):
        train_dp_sgd_many(make_model("lr", 64, 10), X, y, seeds=[-1], noise_multiplier=1.0)
    for seeds in (7, np.array(5), np.zeros((2, 2), dtype=int), "12"):
        with pytest.raises(ValueError, match="seeds must be a 1-D sequence"):
            train_dp_sgd_many(make_model("lr", 64, 10), X, y, seeds=seeds, noise_multiplier=1.0)
    a, b = train_dp_sgd_many(
        make_model("lr", 64, 10), X, y, seeds=np.array([4, 5]), noise_multiplier=1.0, steps=2
    )
    assert not torch.equal(flat_parameters(a), flat_parameters(b))
    with pytest.raises(ValueError, match="noise_multiplier"):
        train_dp_sgd_many(make_model("lr", 64, 10), X, y, seeds=[1], noise_multiplier=-1.0)


# ------------------------------------------------------------------------------------------------
# the score function and the auditor
def _run(data, stack_runs="auto", model="lr", device="cpu", **settings):
    X, y = data
    canary = make_canary("blank", X, y, label=3)
    config = DPSGDConfig(**{"noise_multiplier": 1.0, "steps": 5, **settings})
    return DPSGDRun(model, X, y, canary, config=config, stack_runs=stack_runs, device=device)


@NEEDS_STACKING
def test_score_many_trains_fixed_chunks_of_seeds(data):
    stacked, single = _run(data, stack_runs=3), _run(data, stack_runs=1)
    assert stacked.runs_per_call == 3 and single.runs_per_call == 1
    assert _run(data, sample_rate=0.5).runs_per_call == 1
    seeds = [5, 6, 7, 8, 9]  # two stacks: 3 + 2
    for include in (False, True):
        many = stacked.score_many(include, seeds)
        # chunk by chunk: the stacks [5, 6, 7] and [8, 9], whatever the call groups together
        assert many == stacked.score_many(include, seeds[:3]) + stacked.score_many(include, [8, 9])
        assert single.score_many(include, seeds) == [single(include, s) for s in seeds]
        # without noise a stacked run is the single run with its seed
        quiet, alone = _run(data, 3, noise_multiplier=0.0), _run(data, 1, noise_multiplier=0.0)
        assert quiet.score_many(include, seeds) == pytest.approx(
            [alone(include, s) for s in seeds], abs=1e-5
        )
    with pytest.raises(ValueError, match="stack_runs=4 is not possible"):
        _run(data, stack_runs=4, sample_rate=0.5)
    with pytest.raises(ValueError, match="seeds must be a 1-D sequence"):
        stacked.score_many(True, 5)


@NEEDS_STACKING
@pytest.mark.parametrize(
    "model, device",
    [("lr", "cpu"), ("mlp", "cpu"), ("cnn", "cpu")]
    + [pytest.param(m, "cuda", marks=CUDA) for m in ("lr", "cnn")],
)
def test_stacked_canary_losses_equal_the_unstacked_copies(data, model, device):
    # score_many takes every copy's canary loss from the stacked network in one forward pass;
    # with noise the copies differ, and each loss is the unstacked copy's canary_loss to float32
    # rounding (relative 1e-5: a few ulps of a product over 64 inputs, and the CPU's stacked
    # tanh 2·sigmoid(2x) − 1 against torch.tanh, both under 1e-6 relative here). On CUDA, cuDNN
    # convolves in TF32 by default (10-bit mantissa, relative error ~5e-4 per product), and the
    # grouped and plain convolutions round differently: 5e-3 for the CNN there.
    from rdpest.auditing.dpsgd.canaries import canary_loss
    from rdpest.auditing.dpsgd.training import _train_stacked_module, stacked_canary_losses

    rel = 5e-3 if (model, device) == ("cnn", "cuda") else 1e-5
    run = _run(data, 4, model, device=device)
    cache = run._prepared()
    X, y = cache["data"][True]
    stacked = _train_stacked_module(
        cache["template"], X, y, run.config, seeds=[1, 2, 3, 4], device=cache["device"]
    )
    copies = unstack_model(stacked, cache["template"])
    losses = stacked_canary_losses(stacked, run.canary_x, run.canary_y)
    expected = [canary_loss(m, run.canary_x, run.canary_y) for m in copies]
    assert len(set(expected)) == 4  # the copies differ
    assert losses == pytest.approx(expected, rel=rel)
    assert stacked.training  # its mode is restored
    # The audit's scores are these losses: score_many of the same seeds as one stack.
    assert run.score_many(True, [1, 2, 3, 4]) == pytest.approx(expected, rel=rel)


@NEEDS_STACKING
@pytest.mark.slow
@pytest.mark.parametrize("model, stack", [("lr", 16), ("cnn", CPU_CONV_MAX_STACK)])
def test_stacked_scores_have_the_distribution_of_unstacked_opacus_runs(data, model, stack):
    # The audit's own scores: 300 canary losses per arm from stacks (the CNN's: the size "auto"
    # gives it on the CPU, trained through its own norms, shared first layer and pooling) and
    # from one plain Opacus run per seed (other seeds, so the samples are independent). Two
    # two-sample tests per arm at the suite's level: Kolmogorov-Smirnov (any difference of
    # location or shape) and Brown-Forsythe (the spread, which the noise scale sets and KS sees
    # poorly). Their power is shown on the same samples: stacked scores from half the noise
    # (half the spread) are rejected.
    n = 300
    for include in (False, True):
        stacked = _run(data, stack, model, steps=20).score_many(include, list(range(n)))
        plain = _run(data, 1, model, steps=20).score_many(include, list(range(10_000, 10_000 + n)))
        what = f"{model}: stacked against unstacked scores (canary included: {include})"
        assert_pvalue_above(stats.ks_2samp(stacked, plain).pvalue, f"{what}, KS")
        assert_pvalue_above(stats.levene(stacked, plain).pvalue, f"{what}, spread")
        weaker = _run(data, stack, model, steps=20, noise_multiplier=0.5)
        weaker = weaker.score_many(include, list(range(n)))
        assert stats.levene(weaker, plain).pvalue < COVERAGE_PVALUE


class _GroupScore:
    """A score function with score_many that records the groups it is given."""

    def __init__(self, runs_per_call=4, wrong_length=False):
        self.runs_per_call = runs_per_call
        self.wrong_length = wrong_length
        self.groups: list[tuple[bool, tuple[int, ...]]] = []

    def __call__(self, include_canary, seed):
        return float(seed % 1000) / 1000 + (0.5 if include_canary else 0.0)

    def score_many(self, include_canary, seeds):
        self.groups.append((include_canary, tuple(seeds)))
        scores = [self(include_canary, s) for s in seeds]
        return scores[:-1] if self.wrong_length else scores


def _auditor(score_fn, **kwargs):
    estimators = {"dv": DVRenyiEstimator(alpha=2.0, random_state=0, max_epochs=5)}
    options = {"n_runs": 10, "estimators": estimators, "progress": False, **kwargs}
    return Auditor(score_fn, 1.0, **options)


def test_auditor_hands_out_fixed_groups_and_resumes_by_group(tmp_path):
    fn = _GroupScore()
    without, with_ = _auditor(fn).collect()
    reference = _GroupScore()
    expected = ([reference(False, s) for s in _seeds(0)], [reference(True, s) for s in _seeds(1)])
    np.testing.assert_array_equal(without, expected[0])
    np.testing.assert_array_equal(with_, expected[1])
    # Groups are runs 0-3, 4-7 and 8-9 of each arm: a group of 4 is more than a quarter of 10
    # runs, so the last one is not padded to a whole group (test_store.py has the padded case).
    assert sorted((arm, len(g)) for arm, g in fn.groups) == sorted(
        [(False, 4), (False, 4), (False, 2), (True, 4), (True, 4), (True, 2)]
    )
    assert (False, tuple(_seeds(0)[4:8])) in fn.groups
    # Resume: drop runs 5 and 9 of the arm without the canary from a finished store; only their
    # groups are trained again, whole, and only the missing runs are appended.
    store = tmp_path / "store"
    _auditor(_GroupScore(), store=store).collect()
    lines = (store / "runs.jsonl").read_text().splitlines()
    kept = [
        ln
        for ln in lines
        if not ('"arm": 0' in ln and ('"index": 5,' in ln or '"index": 9,' in ln))
    ]
    assert len(kept) == len(lines) - 2
    (store / "runs.jsonl").write_text("\n".join(kept) + "\n")
    again = _GroupScore()
    without2, with2 = _auditor(again, store=store).collect()
    assert sorted(again.groups) == sorted(
        [(False, tuple(_seeds(0)[4:8])), (False, tuple(_seeds(0)[8:]))]
    )
    np.testing.assert_array_equal(without2, without)
    np.testing.assert_array_equal(with2, with_)
    assert len((store / "runs.jsonl").read_text().splitlines()) == 20


def _seeds(arm):
    from rdpest.auditing.auditor import run_seed

    return [run_seed(0, arm, i) for i in range(10)]


def test_auditor_rejects_a_bad_group_protocol():
    for value in (0, 2.5, None, True):
        with pytest.raises(ValueError, match="runs_per_call"):
            _auditor(_GroupScore(runs_per_call=value)).collect()
    with pytest.raises(ValueError, match="returned 3 scores for 4 seeds"):
        _auditor(_GroupScore(wrong_length=True)).collect()
    assert runs_per_call(lambda include, seed: 0.0) == 1


# A small stacked DP-SGD audit (the auditor clones the estimator, so sharing it is safe).
_STACKED_AUDIT = {
    "noise_multiplier": 1.0,
    "steps": 3,
    "n_runs": 10,
    "stack_runs": 4,
    "progress": False,
    "estimators": {"dv": DVRenyiEstimator(alpha=2.0, random_state=0, max_epochs=5)},
}


@NEEDS_STACKING
def test_stacked_audit_is_identical_for_any_n_jobs_and_after_interruption(tmp_path):
    options = _STACKED_AUDIT
    one = DPSGDAuditor(n_jobs=1, **options).auditor().collect()
    two = DPSGDAuditor(n_jobs=2, **options).auditor().collect()
    np.testing.assert_array_equal(one[0], two[0])
    np.testing.assert_array_equal(one[1], two[1])
    # The stack size is part of the store's identity: a store of stacks of 4 refuses stacks of 2.
    DPSGDAuditor(store=tmp_path / "layout", **options).auditor().collect()
    with pytest.raises(ValueError, match="stack_size"):
        DPSGDAuditor(store=tmp_path / "layout", **{**options, "stack_runs": 2}).auditor().collect()
    # Interrupted after a few runs (a truncated store), then resumed: the same numbers, bit for bit.
    store = tmp_path / "audit"
    DPSGDAuditor(store=store, **options).auditor().collect()
    lines = (store / "runs.jsonl").read_text().splitlines()
    (store / "runs.jsonl").write_text("\n".join(lines[:7]) + "\n" + lines[7][:10])
    resumed = DPSGDAuditor(store=store, **options).auditor().collect()
    np.testing.assert_array_equal(resumed[0], one[0])
    np.testing.assert_array_equal(resumed[1], one[1])


@pytest.mark.parametrize("version", ["1.7.0", "9.0.0", "1.4.2"])
def test_stacking_is_refused_on_an_unchecked_opacus_release(data, monkeypatch, version):
    """Catches stacked training on an Opacus release it was not checked against (its two
    specialised Opacus method may no longer mirror Opacus's, silently changing the clipping of
    every stacked run): "auto" falls back to one run at a time, giving the plain
    runs' scores, and an explicit stack size, or train_dp_sgd_many, is refused naming the
    release; an audit asking for a stack is refused before it pretrains."""
    import opacus

    monkeypatch.setattr(opacus, "__version__", version)
    assert not opacus_supports_stacking()
    assert version in opacus_version_message() and TESTED_OPACUS[0] in opacus_version_message()
    lr = make_model("lr", 64, 10)
    assert resolve_stack_runs("auto", lr, n_rows=900, example_shape=(64,), sample_rate=1.0) == 1
    assert auto_stack_size(lr, 900, (64,)) == 1
    with pytest.raises(ValueError, match=rf"checked against Opacus.*not the installed {version}"):
        resolve_stack_runs(4, lr, n_rows=900, example_shape=(64,), sample_rate=1.0)
    X, y = data
    with pytest.raises(ValueError, match="checked against Opacus"):
        train_dp_sgd_many(lr, X, y, seeds=[1], noise_multiplier=1.0)
    # The fallback trains the runs one by one: score_many gives exactly the single runs' scores.
    fallback = _run(data)
    assert fallback.runs_per_call == 1
    seeds = [5, 6]
    assert fallback.score_many(True, seeds) == [fallback(True, s) for s in seeds]
    with pytest.raises(ValueError, match=r"stack_runs=4 is not possible.*checked against Opacus"):
        _run(data, stack_runs=4)

    def no_training(*args, **kw):
        raise AssertionError("pretraining started before the stack size was checked")

    monkeypatch.setattr(dpsgd_module, "pretrain", no_training)
    with pytest.raises(ValueError, match=r"stack_runs=4 is not possible.*checked against Opacus"):
        DPSGDAuditor(noise_multiplier=1.0, stack_runs=4, n_runs=20).build()


def test_the_installed_opacus_is_recognised_by_its_release():
    """Catches a version check that compares the wrong part of the version (a patch release of
    a checked minor release must stack, another minor release must not)."""
    import opacus

    assert opacus_supports_stacking() == (
        ".".join(opacus.__version__.split(".")[:2]) in TESTED_OPACUS
    )
    for release in TESTED_OPACUS:
        for version in (f"{release}.0", f"{release}.7", f"{release}.1.dev3"):
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(opacus, "__version__", version)
                assert opacus_supports_stacking(), version


@NEEDS_STACKING
def test_stacked_audit_on_a_dask_local_cluster_gives_identical_results(dask_backend):
    options = _STACKED_AUDIT
    expected = DPSGDAuditor(n_jobs=1, **options).auditor().collect()
    with dask_backend():
        got = DPSGDAuditor(n_jobs=2, **options).auditor().collect()
    np.testing.assert_array_equal(expected[0], got[0])
    np.testing.assert_array_equal(expected[1], got[1])


def test_impossible_stack_runs_fails_before_pretraining(monkeypatch):
    def no_training(*args, **kw):
        raise AssertionError("training started before validation finished")

    monkeypatch.setattr(dpsgd_module, "pretrain", no_training)
    with pytest.raises(ValueError, match="stack_runs=8 is not possible"):
        DPSGDAuditor(noise_multiplier=1.0, sample_rate=0.5, stack_runs=8, n_runs=20).build()
    with pytest.raises(ValueError, match="stack_runs"):
        DPSGDAuditor(noise_multiplier=1.0, stack_runs="many", n_runs=20).build()


@NEEDS_STACKING
@CUDA
def test_cuda_stacks_convolutional_models_and_they_equal_single_runs(data):
    X, y = data
    model = _model("cnn")
    assert auto_stack_size(model, len(y), (64,), device="cuda") > 1
    kwargs = {"noise_multiplier": 0.0, "max_grad_norm": 0.05, "steps": 10, "device": "cuda"}
    single = train_dp_sgd(model, X, y, seed=1, **kwargs)
    for stacked in train_dp_sgd_many(model, X, y, seeds=[1, 2], **kwargs):
        assert next(stacked.parameters()).device.type == "cuda"
        assert torch.allclose(flat_parameters(stacked), flat_parameters(single), atol=1e-4, rtol=0)


@NEEDS_STACKING
@CUDA
def test_cuda_stacked_runs_equal_single_runs(data):
    X, y = data
    model = _model("mlp")
    kwargs = {"noise_multiplier": 0.0, "max_grad_norm": 0.05, "steps": 10, "device": "cuda"}
    many = train_dp_sgd_many(model, X, y, seeds=[1, 2, 3], **kwargs)
    assert next(many[0].parameters()).device.type == "cuda"
    for seed, stacked in zip([1, 2, 3], many, strict=True):
        single = train_dp_sgd(model, X, y, seed=seed, **kwargs)
        assert torch.allclose(flat_parameters(stacked), flat_parameters(single), atol=1e-4, rtol=0)
