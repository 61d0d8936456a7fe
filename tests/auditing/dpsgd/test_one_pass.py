"""One backward pass per step for stacks of linear layers (rdpest.auditing.dpsgd.one_pass).

The claim: the clipped sums formed in closed form from the first pass equal what Opacus's own
second backward pass forms, for every reduction, with and without biases, with frozen
parameters, and with clipping that binds. Tolerance: both are float32 sums of the same products in
a different order; gradients here are O(1), so 1e-5 absolute is rounding, and any real difference
(one row clipped differently moves a gradient by O(1/n) = O(1e-2)) is far above it.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from opacus import PrivacyEngine
from opacus.utils.fast_gradient_clipping_utils import DPTensorFastGradientClipping
from torch import nn

from rdpest.auditing.dpsgd.engine import BatchedTensors, identity_collate, quiet_opacus
from rdpest.auditing.dpsgd.one_pass import (
    OnePassLoss,
    OnePassTensor,
    one_pass_layers,
    row_cross_entropy,
)
from rdpest.auditing.dpsgd.stacking import (
    StackedConv2d,
    StackedGradSampleModule,
    StackedLinear,
    stack_model,
)

COPIES, ROWS, FEATURES, CLASSES = 4, 30, 6, 5
# torch notes, for Opacus's two passes, that the first layer's hook fires with no input gradient.
pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing:UserWarning")


def _template(kind: str) -> nn.Sequential:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        if kind == "lr":
            return nn.Sequential(nn.Linear(FEATURES, CLASSES))
        if kind == "mlp":
            return nn.Sequential(nn.Linear(FEATURES, 8), nn.Tanh(), nn.Linear(8, CLASSES))
        if kind == "relu_no_bias":
            return nn.Sequential(
                nn.Linear(FEATURES, 8, bias=False), nn.ReLU(), nn.Linear(8, CLASSES, bias=False)
            )
        if kind == "cnn":
            return nn.Sequential(
                nn.Unflatten(1, (1, 6, 6)),
                nn.Conv2d(1, 3, 3, padding=1),
                nn.Tanh(),
                nn.AvgPool2d(2),
                nn.Conv2d(3, 4, 2, stride=2, bias=False),  # 3x3 -> 1x1
                nn.Flatten(),
                nn.Linear(4, CLASSES),
            )
        if kind == "grouped_cnn":
            return nn.Sequential(
                nn.Unflatten(1, (2, 6, 6)),
                nn.Conv2d(2, 4, 3, groups=2, dilation=2),
                nn.ReLU(),
                nn.Flatten(),
                nn.Linear(4 * 2 * 2, CLASSES),
            )
        net = nn.Sequential(nn.Linear(FEATURES, 8), nn.Tanh(), nn.Linear(8, CLASSES))
        if kind == "frozen_first_bias":
            net[0].bias.requires_grad_(False)
        elif kind == "frozen_first_layer":
            net[0].requires_grad_(False)
        return net


def _data(features: int = FEATURES):
    generator = torch.Generator().manual_seed(7)
    X = 3.0 * torch.randn(COPIES * ROWS, features, generator=generator)
    y = torch.randint(0, CLASSES, (COPIES * ROWS,), generator=generator)
    return X, y


def _private(kind: str, reduction: str, one_pass: bool, max_grad_norm: float = 0.2):
    net = stack_model(_template(kind), COPIES)
    X, y = _data({"cnn": 36, "grouped_cnn": 72}.get(kind, FEATURES))
    loader = torch.utils.data.DataLoader(
        BatchedTensors(X, y), batch_size=len(X), collate_fn=identity_collate
    )
    with quiet_opacus():
        module, optimizer, criterion, _ = PrivacyEngine(
            accountant="rdp", secure_mode=False
        ).make_private(
            module=net,
            optimizer=torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=0.05),
            data_loader=loader,
            criterion=nn.CrossEntropyLoss(reduction=reduction),
            noise_multiplier=0.0,
            max_grad_norm=max_grad_norm,
            poisson_sampling=False,
            loss_reduction=reduction,
            grad_sample_mode="ghost",
        )
    module.__class__ = StackedGradSampleModule
    if one_pass:
        criterion.__class__ = OnePassLoss
    return module, optimizer, criterion, X, y


KINDS = [
    "lr",
    "mlp",
    "relu_no_bias",
    "frozen_first_bias",
    "frozen_first_layer",
    "cnn",
    "grouped_cnn",
]


@pytest.mark.parametrize("reduction", ["sum", "mean"])
@pytest.mark.parametrize("kind", KINDS)
def test_one_pass_gradients_and_steps_equal_opacus_two_passes(kind, reduction):
    runs = {flag: _private(kind, reduction, flag) for flag in (False, True)}
    for step in range(3):
        grads = {}
        for flag, (module, optimizer, criterion, X, y) in runs.items():
            optimizer.zero_grad(set_to_none=True)
            loss = criterion(module(X), y)
            assert isinstance(loss, OnePassTensor) is flag
            loss.backward()
            norms = module.per_sample_gradient_norms
            grads[flag] = [p.grad.clone() for p in module.parameters() if p.requires_grad]
            optimizer.step()
        # Clipping binds for most rows (else the test would not see the clipped sums).
        assert (norms > 0.2).float().mean() > 0.5, f"step {step}: clipping rarely binds"
        for two, one in zip(grads[False], grads[True], strict=True):
            torch.testing.assert_close(one, two, rtol=0, atol=1e-5)
    for p, q in zip(runs[False][0].parameters(), runs[True][0].parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=1e-5)
        if not p.requires_grad:
            assert torch.equal(p, q) and p.grad is None and q.grad is None


@pytest.mark.parametrize(
    "kind", ["lr", "mlp", "relu_no_bias", "frozen_first_bias", "frozen_first_layer"]
)
def test_shared_products_of_repeated_rows_equal_opacus_two_passes(kind):
    """The trainer's first layer sees the data repeated once per copy and then takes one shared-
    input product forward and for its clipped sums. Its gradients, with one pass or Opacus's two,
    equal Opacus's two passes over the per-copy products (tolerance: the module docstring's)."""
    generator = torch.Generator().manual_seed(11)
    runs = {}
    for name, one_pass, shared in (
        ("per-copy, two passes", False, False),
        ("shared, two passes", False, True),
        ("shared, one pass", True, True),
    ):
        module, optimizer, criterion, X, y = _private(kind, "sum", one_pass)
        X, y = X[:ROWS].repeat(COPIES, 1), y[:ROWS].repeat(COPIES)
        first = next(m for m in module.modules() if isinstance(m, StackedLinear))
        first.repeated_input = shared
        runs[name] = (module, optimizer, criterion, X, y, first)
    # Copies that differ (they start as one template), the same in every run: a product that
    # mixed up copies would then show.
    offsets = [
        0.3 * torch.randn(p.shape, generator=generator)
        for p in runs["per-copy, two passes"][0].parameters()
    ]
    for module, *_ in runs.values():
        with torch.no_grad():
            for p, offset in zip(module.parameters(), offsets, strict=True):
                p += offset
    for step in range(3):
        grads = {}
        for name, (module, optimizer, criterion, X, y, first) in runs.items():
            optimizer.zero_grad(set_to_none=True)
            criterion(module(X), y).backward()
            grads[name] = [p.grad.clone() for p in module.parameters() if p.requires_grad]
            optimizer.step()
            # The shared path was taken where asked, and only there.
            assert (
                first.repeat_check is not None and first.repeat_check[2]
            ) is first.repeated_input
        norms = runs["shared, one pass"][0].per_sample_gradient_norms
        assert (norms > 0.2).float().mean() > 0.5, f"step {step}: clipping rarely binds"
        for name in ("shared, two passes", "shared, one pass"):
            for ours, reference in zip(grads[name], grads["per-copy, two passes"], strict=True):
                torch.testing.assert_close(ours, reference, rtol=0, atol=1e-5)


def test_the_one_pass_path_never_runs_opacus_second_pass(monkeypatch):
    def refuse(self):
        raise AssertionError("Opacus's two-pass backward ran")

    module, _, criterion, X, y = _private("mlp", "sum", True)
    monkeypatch.setattr(DPTensorFastGradientClipping, "backward", refuse)
    criterion(module(X), y).backward()
    assert all(p.grad is not None for p in module.parameters())
    # Arithmetic on the loss returns Opacus's own tensor, whose backward is the two passes.
    with pytest.raises(AssertionError, match="two-pass"):
        (criterion(module(X), y) / 2).backward()


def test_one_pass_layers_requires_every_trainable_parameter_in_a_stacked_linear():
    stacked = stack_model(_template("mlp"), 2)
    assert [type(m) for m in one_pass_layers(stacked)] == [StackedLinear, StackedLinear]
    conv = stack_model(nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(2 * 4 * 4, 3)), 2)
    assert [type(m) for m in one_pass_layers(conv)] == [StackedConv2d, StackedLinear]
    # A trainable parameter outside the stacked layers: Opacus's two passes.
    conv.extra = nn.Parameter(torch.zeros(1))
    assert one_pass_layers(conv) is None
    assert one_pass_layers(nn.Sequential(nn.Tanh())) is None


def test_the_first_layers_input_norms_follow_in_place_changes():
    """The cached input norms are reused only while the input is unchanged: an in-place change
    of the data between steps must give the norms of the new data."""
    module, _, criterion, X, y = _private("lr", "sum", True, max_grad_norm=1e6)
    first = next(m for m in module.modules() if isinstance(m, StackedLinear))
    first.cache_input_norms = True
    for _ in range(2):  # the second step reuses the cache
        criterion(module(X), y).backward()
    cached = first.input_norms[2]
    criterion(module(X), y).backward()
    assert first.input_norms[2] is cached
    X.mul_(2.0)  # in place: the same memory, a new version
    criterion(module(X), y).backward()
    torch.testing.assert_close(first.input_norms[2], torch.linalg.vector_norm(X, dim=1))
    # The gradient norms are those of an uncached module on the changed data.
    plain, _, plain_criterion, _, _ = _private("lr", "sum", True, max_grad_norm=1e6)
    plain_criterion(plain(X), y).backward()
    torch.testing.assert_close(
        module.per_sample_gradient_norms, plain.per_sample_gradient_norms, rtol=1e-6, atol=0
    )


def test_row_cross_entropy_equals_torchs():
    generator = torch.Generator().manual_seed(0)
    for rows, classes in ((1, 2), (7, 3), (500, 10), (64, 100)):
        z = (5 * torch.randn(rows, classes, generator=generator)).requires_grad_()
        t = torch.randint(0, classes, (rows,), generator=generator)
        weights = torch.rand(rows, generator=generator)
        ours = row_cross_entropy(z, t)
        (ours * weights).sum().backward()
        ours_grad, z.grad = z.grad, None
        theirs = F.cross_entropy(z, t, reduction="none")
        (theirs * weights).sum().backward()
        # float32 sums over the classes in another order: rounding, ~1e-7 relative.
        torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(ours_grad, z.grad, rtol=0, atol=1e-6)
    # Anything but (rows, classes) logits with 1-D targets is torch's own function.
    z3 = torch.randn(2, 3, 4)
    t3 = torch.randint(0, 3, (2, 4))
    assert torch.equal(row_cross_entropy(z3, t3), F.cross_entropy(z3, t3, reduction="none"))


def test_row_cross_entropy_gradcheck():
    z = torch.randn(5, 4, dtype=torch.double, requires_grad=True)
    t = torch.tensor([0, 3, 1, 1, 2])
    assert torch.autograd.gradcheck(lambda x: row_cross_entropy(x, t), (z,))


def _benchmark_module(name: str):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("kind", ["lr", "mlp", "cnn"])
def test_the_benchmarks_no_privacy_reference_is_the_audits_training_without_privacy(
    digits_slice, kind
):
    """The throughput benchmark's "no privacy" rows (benchmarks/vectorised_dpsgd.train_sgd) must
    train the audit's model as DP-SGD would with clipping that never binds and no noise: plain
    SGD at lr on the mean gradient. One model and each copy of the stacked network both follow
    train_dp_sgd at σ = 0, C = 1e6 (float32 rounding over 10 steps: 1e-5, as above), and the
    training moves the weights by far more than that tolerance."""
    from rdpest.auditing.dpsgd.models import make_model
    from rdpest.auditing.dpsgd.stacking import unstack_model
    from rdpest.auditing.dpsgd.training import train_dp_sgd

    reference = _benchmark_module("vectorised_dpsgd")
    X, y = (torch.as_tensor(v) for v in digits_slice)
    X, y = X.float(), y.long()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        net = make_model(kind, X.shape[1], 10)
    settings = {"noise_multiplier": 0.0, "steps": 10, "max_grad_norm": 1e6}
    private = train_dp_sgd(copy.deepcopy(net), X, y, seed=0, **settings)
    plain = reference.train_sgd(copy.deepcopy(net), X, y, 1, steps=10)
    stacked = unstack_model(reference.train_sgd(copy.deepcopy(net), X, y, 3, steps=10), net)
    for model in [plain, *stacked]:
        for ours, theirs in zip(model.parameters(), private.parameters(), strict=True):
            torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)
    moved = max(
        (a - b).abs().max().item()
        for a, b in zip(private.parameters(), net.parameters(), strict=True)
    )
    assert moved > 1e-3  # the training moved the weights far beyond the tolerance


def test_the_benchmarks_vectorised_yardstick_trains_what_the_audit_trains(digits_slice):
    """The throughput benchmark compares the training with a vectorised torch yardstick
    (benchmarks/vectorised_dpsgd.py); at σ = 0 with binding clipping it must follow the stacked
    Opacus training (same tolerance as above: float32 rounding over tens of steps)."""
    from rdpest.auditing.dpsgd.models import make_model
    from rdpest.auditing.dpsgd.training import train_dp_sgd_many

    yardstick = _benchmark_module("vectorised_dpsgd")
    X, y = (torch.as_tensor(v) for v in digits_slice)
    X, y = X.float(), y.long()
    for kind in ("lr", "mlp"):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            net = make_model(kind, X.shape[1], 10)
        settings = {"noise_multiplier": 0.0, "steps": 20, "max_grad_norm": 0.3}
        stacked = train_dp_sgd_many(net, X, y, seeds=[0, 1], **settings)
        ours = yardstick.train_vectorised(net, X, y, 2, **settings)
        for k in range(2):
            linears = [m for m in stacked[k] if isinstance(m, nn.Linear)]
            for layer, (weight, bias) in zip(linears, ours, strict=True):
                torch.testing.assert_close(weight[k], layer.weight, rtol=0, atol=1e-5)
                torch.testing.assert_close(bias[k], layer.bias, rtol=0, atol=1e-5)
