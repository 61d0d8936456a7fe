"""The grouped layout of a stack's convolution maps (rdpest.auditing.dpsgd.stacked_conv): which
layers keep it, the flatten back to rows, and that training in it is training on rows.

Tolerances: float64 where two computations differ only in summation order (1e-10 relative);
float32 trainings against single Opacus runs as in test_stacking (1e-5 absolute on parameters
of order one after 10 steps)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from opacus.grad_sample import GradSampleModuleFastGradientClipping
from torch import nn

from rdpest.auditing.dpsgd import _conv, training
from rdpest.auditing.dpsgd.models import make_model
from rdpest.auditing.dpsgd.stacked_conv import (
    StackedConv2d,
    StackedFlatten,
    grouped_outputs,
    numeric_padding,
)
from rdpest.auditing.dpsgd.stacking import (
    ELEMENTWISE_ACTIVATIONS,
    auto_stack_size,
    opacus_supports_stacking,
    stack_model,
    stackable,
    unstack_model,
)
from rdpest.auditing.dpsgd.training import train_dp_sgd, train_dp_sgd_many
from tests.helpers import flat_parameters

NEEDS_STACKING = pytest.mark.skipif(
    not opacus_supports_stacking(), reason="stacking is refused on this Opacus release"
)


def _layouts(stacked: nn.Sequential) -> list[str]:
    out = []
    for m in stacked:
        if isinstance(m, StackedConv2d):
            out.append(
                f"conv {'g' if m.grouped_input else 'r'}->{'g' if m.grouped_output else 'r'}"
            )
        elif isinstance(m, StackedFlatten):
            out.append("stacked flatten")
    return out


def test_the_maps_stay_grouped_between_convolutions_and_up_to_a_flatten():
    cnn = stack_model(make_model("cnn", 64, 10), 3)
    assert _layouts(cnn) == ["conv r->g", "conv g->g", "stacked flatten"]
    mnist = stack_model(make_model("mnist_cnn", 784, 10, (1, 28, 28)), 2)
    assert _layouts(mnist) == ["conv r->g", "conv g->g", "stacked flatten"]
    # Rows throughout when asked, with the plain flatten.
    rows = stack_model(make_model("cnn", 64, 10), 3, grouped_maps=False)
    assert _layouts(rows) == ["conv r->r", "conv r->r"]
    assert any(type(m) is nn.Flatten for m in rows)
    # A layer that is not per-channel ends the grouped run: a flatten of the last dimensions only
    # (not stackable) is never reached here, so take a conv whose output is the network's.
    last = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Conv2d(2, 2, 3))
    assert grouped_outputs(last, ELEMENTWISE_ACTIVATIONS) == [True, False, False]
    assert _layouts(stack_model(last, 2)) == ["conv r->g", "conv g->r"]
    # Every per-channel layer between convolutions keeps the maps grouped.
    pools = nn.Sequential(
        nn.Conv2d(1, 2, 3, padding=1),
        nn.GELU(),
        nn.MaxPool2d(2),
        nn.AvgPool2d(2),
        nn.AdaptiveAvgPool2d(2),
        nn.AdaptiveMaxPool2d(2),
        nn.Flatten(),
        nn.Linear(8, 3),
    )
    assert grouped_outputs(pools, ELEMENTWISE_ACTIVATIONS)[0]
    unflattened = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(start_dim=2))
    assert grouped_outputs(unflattened, ELEMENTWISE_ACTIVATIONS) == [False, False]


def test_stacked_flatten_lays_grouped_maps_out_as_rows():
    torch.manual_seed(0)
    k, n, c = 3, 4, 2
    rows = torch.randn(k * n, c, 5, 5)
    grouped = rows.reshape(k, n, c, 5, 5).transpose(0, 1).reshape(n, k * c, 5, 5)
    assert torch.equal(StackedFlatten(k)(grouped), rows.flatten(1))
    with pytest.raises(ValueError, match=r"grouped maps .* with 3 copies"):
        StackedFlatten(k)(torch.randn(n, 4, 5, 5))


@pytest.mark.parametrize("grouped_maps", [True, False])
def test_a_stacked_cnn_computes_each_copys_network_in_either_layout(grouped_maps):
    # float64: the stack's logits are each copy's own network's to summation order.
    torch.manual_seed(1)
    net = make_model("cnn", 64, 10).double()
    stacked = stack_model(net, 3, grouped_maps=grouped_maps)
    with torch.no_grad():
        for m in stacked:
            if isinstance(m, StackedConv2d):  # the copies differ
                m.weight.add_(torch.randn_like(m.weight) * 0.1)
    x = torch.randn(5, 64, dtype=torch.float64)
    logits = stacked(x.repeat(3, 1))  # the first layer's shared path
    other = stacked(torch.cat([x, x, x + 0]))  # equal blocks in another tensor
    copies = unstack_model(stacked, net)
    for k, model in enumerate(copies):
        expected = model(x)
        assert torch.allclose(logits[k * 5 : (k + 1) * 5], expected, rtol=1e-10, atol=1e-12)
        assert torch.allclose(other[k * 5 : (k + 1) * 5], expected, rtol=1e-10, atol=1e-12)


@NEEDS_STACKING
def test_training_with_rows_throughout_gives_the_single_runs_too(digits_slice, monkeypatch):
    # The default (grouped) layout is checked against single Opacus runs in test_stacking; the
    # rows layout, which a convolution without a per-channel run after it takes, here.
    X, y = digits_slice
    X, y = X[:60], y[:60]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = make_model("cnn", 64, 10)
    kwargs = {"noise_multiplier": 0.0, "max_grad_norm": 0.05, "steps": 10, "learning_rate": 5.0}
    single = train_dp_sgd(model, X, y, seed=1, **kwargs)
    built = []

    def rows_only(net, copies):
        built.append(stack_model(net, copies, grouped_maps=False))
        return built[-1]

    monkeypatch.setattr(training, "stack_model", rows_only)
    for stacked in train_dp_sgd_many(model, X, y, seeds=[1, 2], **kwargs):
        assert torch.allclose(flat_parameters(stacked), flat_parameters(single), atol=1e-5, rtol=0)
    assert built and _layouts(built[0]) == ["conv r->r", "conv r->r"]
    assert (flat_parameters(single) - flat_parameters(model)).abs().max() > 1e-3


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")  # the data needs no gradient
@pytest.mark.parametrize("between", [None, "no_grad", "eval"])
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_opacus_sees_the_same_per_row_norms_in_either_layout(reduction, between):
    """Opacus's ghost-clipping module computes each row's gradient norm; a grouped layer's
    input has n examples in its first dimension, not K·n, so for a mean-reduced loss it must
    tell Opacus the batch (K·n) that the output gradients are rescaled by, and a forward pass
    that Opacus does not capture (under no_grad, in eval mode; here of one row per copy) between
    the training forward and its backward must not change it."""
    torch.manual_seed(2)
    net = make_model("cnn", 64, 10).double()
    k, n = 3, 6
    x = torch.randn(n, 64, dtype=torch.float64).repeat(k, 1)
    target = torch.randint(0, 10, (k * n,))
    norms = {}
    for grouped_maps in (False, True):
        stacked = stack_model(net, k, grouped_maps=grouped_maps)
        stacked[2].repeated_input = True  # the first convolution, on the shared data
        with torch.no_grad():
            for m in stacked:
                if isinstance(m, StackedConv2d):  # the copies differ
                    m.weight.add_(
                        torch.linspace(-0.2, 0.2, k, dtype=torch.float64).reshape(k, 1, 1, 1, 1)
                    )
        module = GradSampleModuleFastGradientClipping(
            stacked, loss_reduction=reduction, max_grad_norm=1.0, use_ghost_clipping=True
        )
        loss = F.cross_entropy(module(x), target, reduction=reduction)
        if between == "no_grad":
            with torch.no_grad():
                module(x[::n])
        elif between == "eval":
            module.eval()
            module(x[::n])
            module.train()
        loss.backward()
        norms[grouped_maps] = module.get_norm_sample()
    assert norms[True].shape == (k * n,)
    assert torch.allclose(norms[True], norms[False], rtol=1e-10, atol=0)


@NEEDS_STACKING
@pytest.mark.parametrize("name", ["cnn", "user"])
def test_the_other_devices_forms_train_the_single_runs_too(digits_slice, monkeypatch, name):
    # Off the CPU the stack takes other forms of the same products: the first convolution as one
    # convolution with K·o channels, its per-row gradients in one batched product, Gram-form
    # norms where they are smaller, memory-sized chunks. They run on the CPU here when the
    # device predicate says otherwise, so CI checks them against single Opacus runs too.
    X, y = digits_slice
    X, y = X[:40], y[:40]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = make_model("cnn", 64, 10) if name == "cnn" else _strided_cnn()
    kwargs = {"noise_multiplier": 0.0, "max_grad_norm": 0.05, "steps": 6, "learning_rate": 5.0}
    single = train_dp_sgd(model, X, y, seed=1, **kwargs)
    taken = []
    monkeypatch.setattr(_conv, "_on_host", lambda t: taken.append(t.device.type) is not None)
    gram_calls = []
    gram = _conv._gram_norms
    monkeypatch.setattr(_conv, "_gram_norms", lambda *a, **k: gram_calls.append(1) or gram(*a, **k))
    for stacked in train_dp_sgd_many(model, X, y, seeds=[1, 2, 3], **kwargs):
        assert torch.allclose(flat_parameters(stacked), flat_parameters(single), atol=1e-5, rtol=0)
    assert taken and set(taken) == {"cpu"}  # the device forms ran, on the CPU
    # the digits CNN's second convolution has P² = 256 < o·kh·kw·c = 16·72: Gram norms
    assert bool(gram_calls) == (name == "cnn")
    assert (flat_parameters(single) - flat_parameters(model)).abs().max() > 1e-3


def _strided_cnn():
    # stride, dilation and no bias on the first (shared-data) convolution; a 1x1 convolution;
    # string paddings, which the stack takes as numbers
    return nn.Sequential(
        nn.Unflatten(1, (1, 8, 8)),
        nn.Conv2d(1, 4, 3, stride=2, padding=1, bias=False),
        nn.ReLU(),
        nn.Conv2d(4, 6, 3, padding="same", dilation=1),
        nn.MaxPool2d(2),
        nn.Conv2d(6, 2, 1, padding="valid"),
        nn.Flatten(),
        nn.Linear(8, 10),
    )


@NEEDS_STACKING
def test_string_paddings_stack_and_train_the_single_runs(digits_slice):
    X, y = digits_slice
    X, y = X[:40], y[:40]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        model = nn.Sequential(
            nn.Unflatten(1, (1, 8, 8)),
            nn.Conv2d(1, 4, 3, padding="same"),
            nn.Tanh(),
            nn.Conv2d(4, 4, (3, 5), padding="same", dilation=(2, 1)),
            nn.Tanh(),
            nn.Conv2d(4, 2, 3, padding="valid"),
            nn.Flatten(),
            nn.Linear(72, 10),
        )
    assert stackable(model)
    assert [numeric_padding(m) for m in model if isinstance(m, nn.Conv2d)] == [
        (1, 1),
        (2, 2),
        (0, 0),
    ]
    kwargs = {"noise_multiplier": 0.0, "max_grad_norm": 0.05, "steps": 6, "learning_rate": 5.0}
    single = train_dp_sgd(model, X, y, seed=1, **kwargs)
    for stacked in train_dp_sgd_many(model, X, y, seeds=[1, 2], **kwargs):
        assert torch.allclose(flat_parameters(stacked), flat_parameters(single), atol=1e-5, rtol=0)
    assert (flat_parameters(single) - flat_parameters(model)).abs().max() > 1e-3


def test_a_same_padding_that_pads_one_side_more_is_not_stacked():
    # An even kernel: torch pads the right and bottom one more than the left and top, which a
    # stacked convolution's symmetric padding cannot express, so the model trains unstacked.
    uneven = nn.Sequential(
        nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 2, 4, padding="same"), nn.Flatten()
    )
    assert numeric_padding(uneven[1]) is None
    assert not stackable(uneven)
    with pytest.raises(ValueError, match="one side more"):
        StackedConv2d(uneven[1], 2)
    with pytest.raises(ValueError, match="cannot be trained stacked"):
        train_dp_sgd_many(
            uneven,
            torch.zeros(4, 64),
            torch.zeros(4, dtype=torch.long),
            seeds=[1],
            noise_multiplier=1.0,
        )
    assert auto_stack_size(uneven, 100, (64,)) == 1  # what "auto" stacks: one run at a time
