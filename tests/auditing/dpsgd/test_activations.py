"""The stacked tanh (rdpest.auditing.dpsgd.activations): torch's tanh to float rounding, forward
and backward, in place of nn.Tanh in stacked networks only.

Tolerance of the float32 forward: the doublings are exact, so 2·sigmoid(2x) − 1 carries
sigmoid's rounding error twice over plus the subtraction's. torch's float32 sigmoid is within
about one unit in the last place of its value (at most 6e-8 below 1), so twice that is 1.2e-7;
the subtraction adds at most half a unit of 1 (6e-8) and torch.tanh itself errs by about as
much: 2.4e-7 in all, and 3e-7 absolute leaves a little room. A wrong identity (sigmoid(x)
instead of sigmoid(2x), a missing "− 1") is off by at least 1e-2 on this grid, far outside it.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rdpest.auditing.dpsgd import activations
from rdpest.auditing.dpsgd.activations import StackedAvgPool2d, StackedTanh, is_two_by_two_average
from rdpest.auditing.dpsgd.models import make_model
from rdpest.auditing.dpsgd.stacking import stack_model

GRID = torch.cat(
    [
        torch.linspace(-25.0, 25.0, 200_001),
        torch.tensor([0.0, -0.0, 1e-30, -1e-7, 1e-3, 88.0, -89.0, 1e30, -1e30]),
        torch.tensor([float("inf"), float("-inf")]),
    ]
)


def test_forward_is_torch_tanh_to_float32_rounding():
    got = StackedTanh()(GRID)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, torch.tanh(GRID), rtol=0, atol=3e-7)
    assert got.abs().max() <= 1.0
    assert got[-2] == 1.0 and got[-1] == -1.0  # ±inf saturate, no NaN from inf/inf
    assert torch.isnan(StackedTanh()(torch.tensor([float("nan")]))).all()


def test_forward_in_float64_is_torch_tanh_to_float64_rounding():
    x = GRID.double()
    torch.testing.assert_close(StackedTanh()(x), torch.tanh(x), rtol=0, atol=1e-15)


def test_backward_is_torch_tanh_backward():
    x = (GRID[:-2] / 3).requires_grad_()  # finite inputs
    weights = torch.randn(x.shape, generator=torch.Generator().manual_seed(0))
    (mine,) = torch.autograd.grad((StackedTanh()(x) * weights).sum(), x)
    (theirs,) = torch.autograd.grad((torch.tanh(x) * weights).sum(), x)
    # d/dx = w·(1 − y²): |w| < 6 for this seed and y is off by 3e-7 at most, so 1 − y² is off by
    # at most about 6e-7.
    torch.testing.assert_close(mine, theirs, rtol=0, atol=6 * 6e-7)
    small = torch.randn(7, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(StackedTanh(), (small,))


def test_layout_and_shape_are_kept():
    x = torch.randn(6, 4).t()  # a transposed view
    y = StackedTanh()(x)
    assert y.shape == (4, 6)
    torch.testing.assert_close(y, torch.tanh(x), rtol=0, atol=3e-7)


def test_other_devices_use_torch_tanh(monkeypatch):
    def refuse(*args):
        raise AssertionError("the CPU identity ran off the CPU")

    monkeypatch.setattr(activations._SigmoidTanh, "apply", refuse)
    out = StackedTanh()(torch.empty(3, 2, device="meta"))
    assert out.device.type == "meta" and out.shape == (3, 2)
    if torch.cuda.is_available():  # pragma: no cover - no GPU in CI
        x = torch.randn(5, device="cuda")
        torch.testing.assert_close(StackedTanh()(x), torch.tanh(x))
    with pytest.raises(AssertionError, match="off the CPU"):
        StackedTanh()(torch.zeros(2))


def test_only_stacking_swaps_tanh():
    model = make_model("mlp", 64, 10)
    assert [type(m) for m in model].count(nn.Tanh) == 1  # the user's model keeps nn.Tanh
    stacked = stack_model(model, 3)
    kinds = [type(m) for m in stacked]
    assert StackedTanh in kinds and nn.Tanh not in kinds
    relu = stack_model(nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)), 2)
    assert type(relu[1]) is nn.ReLU
    x = torch.randn(3 * 5, 64)
    with torch.no_grad():
        torch.testing.assert_close(stacked(x), model(x), rtol=0, atol=1e-5)


def _hidden_tanh_grads(reuse_grad: bool, create_graph: bool = False):
    """x → StackedTanh → linear → sum: the input gradient, and the gradient that arrived at the
    tanh as a hook on its output saw it (the memory the backward may write over)."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(40, 6, dtype=torch.float64, generator=gen).requires_grad_()
    weight = torch.randn(6, 3, dtype=torch.float64, generator=gen)
    seen = []
    y = StackedTanh(reuse_grad=reuse_grad)(x)
    y.register_hook(seen.append)
    (grad,) = torch.autograd.grad((y @ weight).sum(), x, create_graph=create_graph)
    return x, weight, grad, seen[0]


def test_reused_gradient_memory_gives_torch_tanh_backward():
    x, weight, grad, arrived = _hidden_tanh_grads(reuse_grad=True)
    # What arrives is (y @ w).sum()'s gradient: each row is w's row sums; float64, so the only
    # difference from torch's tanh is the identity's rounding, a few units of 1e-16.
    expected = (1 - torch.tanh(x.detach()) ** 2) * weight.sum(dim=1)
    torch.testing.assert_close(grad, expected, rtol=0, atol=1e-14)
    # Positive control of the reuse: the arriving gradient's memory now holds the result.
    assert arrived.data_ptr() == grad.data_ptr()
    torch.testing.assert_close(arrived, expected, rtol=0, atol=1e-14)
    # By default the arriving gradient is left as it came.
    x, weight, grad, arrived = _hidden_tanh_grads(reuse_grad=False)
    assert arrived.data_ptr() != grad.data_ptr()
    torch.testing.assert_close(arrived, weight.sum(dim=1).expand(40, 6), rtol=0, atol=0)


def test_reuse_falls_back_where_it_would_be_wrong():
    # A caller's own gradient of another layout (a transposed view) is read, not written.
    x = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    mine = torch.randn(4, 5, dtype=torch.float64).t()
    before = mine.clone()
    (grad,) = torch.autograd.grad(StackedTanh(reuse_grad=True)(x), x, mine)
    torch.testing.assert_close(mine, before, rtol=0, atol=0)
    torch.testing.assert_close(grad, (1 - torch.tanh(x.detach()) ** 2) * mine, rtol=0, atol=1e-14)
    # A second-order graph records the out-of-place backward: gradgradcheck holds with reuse on.
    small = torch.randn(7, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(StackedTanh(reuse_grad=True), (small,))
    _, _, grad, _ = _hidden_tanh_grads(reuse_grad=True, create_graph=True)
    assert grad.requires_grad


def test_stacking_reuses_the_gradient_only_before_a_layer_with_weights():
    stacked = stack_model(make_model("mlp", 64, 10), 2)
    assert [m.reuse_grad for m in stacked if type(m) is StackedTanh] == [True]
    last = stack_model(nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Flatten()), 2)
    assert type(last[1]) is StackedTanh and not last[1].reuse_grad
    cnn = stack_model(make_model("cnn", 64, 10), 2)
    assert [m.reuse_grad for m in cnn if type(m) is StackedTanh] == [True, True]


# StackedAvgPool2d: in float64 the window sums differ from avg_pool2d's by their order only, a
# few units in the last place of values of order one; 1e-14 leaves room for that and fails on
# any misplaced or missing term (of order 0.1).
POOL_SHAPES = [(5, 3, 8, 8), (7, 4, 4), (2, 16, 6, 2), (3, 1, 2, 10)]


CUDA = pytest.param(
    "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
)


@pytest.mark.parametrize("device", ["cpu", CUDA])
@pytest.mark.parametrize("shape", POOL_SHAPES)
def test_window_mean_is_avg_pool2d(shape, device, monkeypatch):
    calls = []
    apply = activations._WindowMean.apply
    monkeypatch.setattr(activations._WindowMean, "apply", lambda t: calls.append(t) or apply(t))
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(shape, dtype=torch.float64, generator=gen).to(device).requires_grad_()
    for ceil_mode in (False, True):
        pool = nn.AvgPool2d(2, ceil_mode=ceil_mode)
        ours = StackedAvgPool2d(pool)(x)
        theirs = pool(x)
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-14)
        grad_out = torch.randn(theirs.shape, dtype=torch.float64, generator=gen).to(device)
        (ours_grad,) = torch.autograd.grad(ours, x, grad_out)
        (theirs_grad,) = torch.autograd.grad(theirs, x, grad_out)
        torch.testing.assert_close(ours_grad, theirs_grad, rtol=0, atol=1e-14)
    assert len(calls) == 2  # the window mean, not the pooling, on both devices
    assert torch.autograd.gradcheck(StackedAvgPool2d(nn.AvgPool2d(2)), (x[:2],))
    # Both ways of spreading the backward's quarters (the CPU's strided copies, the GPU's one
    # broadcast copy) put each value in exactly its window's four positions.
    quarter = torch.randn(theirs.shape, dtype=torch.float64, generator=gen).to(device)
    expected = torch.ops.aten.avg_pool2d_backward(
        quarter * 4, x, (2, 2), (2, 2), (0, 0), False, True, None
    )
    for strided in (True, False):
        spread = activations._spread_quarters(quarter, x.shape, strided=strided)
        torch.testing.assert_close(spread, expected, rtol=0, atol=0)
    # A non-contiguous input (a transposed view) gives the same.
    t = x.detach().transpose(-1, -2).contiguous().transpose(-1, -2)
    torch.testing.assert_close(StackedAvgPool2d(nn.AvgPool2d(2))(t), pool(t), rtol=0, atol=1e-14)


def test_odd_maps_and_other_input_take_the_pooling_itself(monkeypatch):
    calls = []
    monkeypatch.setattr(activations._WindowMean, "apply", lambda x: calls.append(x) or x)
    x = torch.randn(2, 3, 7, 7)
    for ceil_mode in (False, True):  # odd maps: ceil_mode decides the output size
        pool = nn.AvgPool2d(2, ceil_mode=ceil_mode)
        torch.testing.assert_close(StackedAvgPool2d(pool)(x), pool(x), rtol=0, atol=0)
    pool = nn.AvgPool2d(2)
    assert StackedAvgPool2d(pool)(torch.zeros(2, 3, 4, 4, device="meta")).shape[-1] == 2
    assert calls == []
    StackedAvgPool2d(pool)(torch.zeros(2, 3, 4, 4))
    assert len(calls) == 1  # the control: even float32 maps on the CPU take the window mean


def test_which_poolings_stacking_replaces():
    assert is_two_by_two_average(nn.AvgPool2d(2))
    assert is_two_by_two_average(nn.AvgPool2d((2, 2), stride=2, ceil_mode=True))
    assert is_two_by_two_average(nn.AvgPool2d(2, count_include_pad=False))
    for other in (
        nn.AvgPool2d(3),
        nn.AvgPool2d(2, stride=1),
        nn.AvgPool2d(2, padding=1),
        nn.AvgPool2d(2, divisor_override=3),
        nn.AvgPool2d((2, 1)),
        nn.MaxPool2d(2),
        type("MyPool", (nn.AvgPool2d,), {})(2),
    ):
        assert not is_two_by_two_average(other)
    with pytest.raises(ValueError, match="2x2 average"):
        StackedAvgPool2d(nn.AvgPool2d(3))
    model = make_model("cnn", 64, 10)
    stacked = stack_model(model, 3)
    assert [type(m) for m in stacked].count(StackedAvgPool2d) == 2
    assert [type(m) for m in model].count(nn.AvgPool2d) == 2  # the user's model is untouched
    x = torch.randn(3 * 5, 64)
    with torch.no_grad():
        torch.testing.assert_close(stacked(x), model(x), rtol=0, atol=1e-5)
