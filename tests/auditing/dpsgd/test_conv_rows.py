"""The stacked convolution's own per-example norms and shared-data products
(rdpest.auditing.dpsgd._conv), against per-example autograd and against the general path.

Tolerances: float64 throughout, where the two computations differ only by summation order
(relative differences of a few 1e-16 per term); 1e-10 leaves room for that and fails on any
wrong patch (a misplaced tap changes a norm by order one).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rdpest.auditing.dpsgd import _conv
from rdpest.auditing.dpsgd._conv import conv2d_grad_norms, stacked_conv_norm_sample
from rdpest.auditing.dpsgd.stacking import StackedConv2d

GEOMETRIES = [
    # (in, out, kernel, stride, padding, dilation, input height x width)
    (2, 3, 3, 1, 1, 1, (6, 6)),
    (3, 4, (3, 2), (2, 1), (1, 0), 1, (7, 5)),
    (1, 5, 8, 2, 3, 1, (28, 28)),  # the paper's MNIST CNN's first layer
    (2, 2, 3, 2, 2, (2, 1), (9, 8)),
    (4, 3, 1, 1, 0, 1, (3, 4)),
]


def _per_example_norms(conv: nn.Conv2d, a: torch.Tensor, g: torch.Tensor):
    weights, biases = [], []
    for i in range(len(a)):
        w, b = torch.autograd.grad(conv(a[i : i + 1]), (conv.weight, conv.bias), g[i : i + 1])
        weights.append(w.norm())
        biases.append(b.norm())
    return torch.stack(weights), torch.stack(biases)


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")
DEVICES = ["cpu", pytest.param("cuda", marks=CUDA)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("gram", [False, True])
@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_norms_equal_per_example_autograd(geometry, gram, device):
    # Both forms of the weight's norm: the gradients' own, and the Gram matrices' (the default
    # off the CPU), on the CPU and on CUDA.
    c, o, kernel, stride, padding, dilation, size = geometry
    torch.manual_seed(0)
    conv = nn.Conv2d(c, o, kernel, stride=stride, padding=padding, dilation=dilation).double()
    a = torch.randn(7, c, *size, dtype=torch.float64)
    g = torch.randn_like(conv(a))
    weight, bias = (t.cpu() for t in conv2d_grad_norms(conv, a.to(device), g.to(device), gram))
    expected_weight, expected_bias = _per_example_norms(conv, a, g)
    assert torch.allclose(weight, expected_weight, rtol=1e-10, atol=0)
    assert torch.allclose(bias, expected_bias, rtol=1e-10, atol=0)
    # The geometry alone is read: a copy on the meta device gives the same norms.
    meta = conv2d_grad_norms(conv.to("meta"), a.to(device), g.to(device), gram)
    assert torch.equal(meta[0].cpu(), weight) and torch.equal(meta[1].cpu(), bias)


def test_the_gram_norms_are_the_default_off_the_cpu_where_they_are_smaller(monkeypatch):
    calls = []
    monkeypatch.setattr(_conv, "_gram_norms", lambda *args, **kwargs: calls.append(args))
    a, g = torch.randn(2, 8, 4, 4), torch.randn(2, 16, 4, 4)  # P² = 256 < o·d = 16 · 72
    conv2d_grad_norms(nn.Conv2d(8, 16, 3, padding=1), a, g)
    assert not calls  # the CPU takes the gradients' norms
    conv2d_grad_norms(nn.Conv2d(8, 16, 3, padding=1), a.to("meta"), g.to("meta"))
    assert len(calls) == 1
    wide = torch.randn(2, 1, 8, 8, device="meta"), torch.randn(2, 2, 8, 8, device="meta")
    conv2d_grad_norms(nn.Conv2d(1, 2, 3, padding=1), *wide)  # P² = 4096 > o·d = 2 · 9
    assert len(calls) == 1


def test_the_gram_norm_of_a_zero_gradient_is_zero_not_nan():
    # G·U = 0 (U's columns orthogonal to G's row), but in float32 the sum of the Gram products
    # rounds to -1.5e-8 for these values (found by a seeded search): that is a cancellation, so
    # the norm comes from the explicit product, whose rounding leaves a few ulps at most.
    g = torch.tensor([[[-1.0297021865844727, -0.5007584095001221, 0.2733677327632904]]])
    u = torch.tensor(
        [
            [
                [-0.5086051225662231, -0.2278093844652176],
                [0.48725980520248413, -0.09866682440042496],
                [-1.0232090950012207, -1.0388354063034058],
            ]
        ]
    )
    out = torch.empty(1)
    _conv._gram_norms(g, u, out=out)
    assert 0.0 <= out.item() < 1e-6  # the Gram sum's square root would be NaN unclamped
    # ... and a non-zero one is the gradient's norm.
    _conv._gram_norms(g, u + 0.5, out=out)
    assert out.item() == pytest.approx(float(torch.linalg.vector_norm(g @ (u + 0.5))), rel=1e-6)


def _ghost_norms_unguarded(g, patches):
    """The Gram-form norms without the cancellation guard: the formula alone."""
    gram_g = torch.bmm(g.transpose(1, 2), g)
    gram_u = torch.bmm(patches, patches.transpose(1, 2))
    return (gram_g * gram_u).sum(dim=(1, 2)).clamp(min=0).sqrt()


def test_the_gram_norms_keep_float32_precision_where_the_gradient_cancels():
    # Near-constant input maps (saturated activations, a flat canary) and output gradients with
    # zero mean over positions: ‖G·U‖ is about 1e-3 of ‖G‖·‖U‖, and the Gram sum, which squares
    # the product's conditioning, loses about 6 of float32's 7 digits. The guard recomputes such
    # examples from the explicit product; its error is then a few float32 ulps relative (the
    # tolerance, 1e-5, is about 100 ulps of 1.2e-7).
    torch.manual_seed(0)
    conv = nn.Conv2d(64, 64, 1)
    a = torch.ones(32, 64, 4, 4) + 1e-3 * torch.randn(32, 64, 4, 4)
    g = torch.randn(32, 64, 4, 4)
    g = g - g.mean(dim=(2, 3), keepdim=True)
    reference = conv2d_grad_norms(conv, a.double(), g.double(), gram=False)[0]
    patches = _conv.conv2d_patches(conv, a, g.shape[2:], torch.float32)
    unguarded = _ghost_norms_unguarded(g.reshape(32, 64, -1), patches)
    assert ((unguarded.double() - reference) / reference).abs().max() > 1e-3  # the failure
    guarded = conv2d_grad_norms(conv, a, g, gram=True)[0]
    assert ((guarded.double() - reference) / reference).abs().max() < 1e-5
    # On maps without cancellation (random ones here) no example is recomputed: the square is
    # about its rounding scale there, far above the 1e-2 cut.
    a, g = torch.randn(32, 64, 4, 4), torch.randn(32, 64, 4, 4)
    patches = _conv.conv2d_patches(nn.Conv2d(64, 64, 3, padding=1), a, (4, 4), torch.float32)
    g = g.reshape(32, 64, -1)
    gram_g, gram_u = g.transpose(1, 2) @ g, patches @ patches.transpose(1, 2)
    ratio = (gram_g * gram_u).sum(dim=(1, 2)) / (
        torch.linalg.matrix_norm(gram_g) * torch.linalg.matrix_norm(gram_u)
    )
    assert ratio.min() > 10 * _conv.GRAM_CANCELLATION


def test_norms_are_the_same_in_chunks(monkeypatch):
    torch.manual_seed(1)
    conv = nn.Conv2d(3, 4, 3, padding=1).double()
    a = torch.randn(50, 3, 5, 5, dtype=torch.float64)
    g = torch.randn(50, 4, 5, 5, dtype=torch.float64)
    whole = conv2d_grad_norms(conv, a, g)[0]
    # 25 positions x 27 patch values per example: 3 examples per chunk, the last one short
    monkeypatch.setattr(_conv, "CHUNK_FLOATS", 3 * 25 * 27 + 1)
    chunked = conv2d_grad_norms(conv, a, g)[0]
    assert torch.allclose(chunked, whole, rtol=1e-12, atol=0)
    assert torch.allclose(chunked, _per_example_norms(conv, a, g)[0], rtol=1e-10, atol=0)


def test_geometries_the_patches_do_not_take_are_left_to_opacus():
    a, g = torch.randn(2, 4, 5, 5), torch.randn(2, 2, 5, 5)
    assert conv2d_grad_norms(nn.Conv2d(4, 2, 3, padding=1, groups=2), a, g) is None
    assert conv2d_grad_norms(nn.Conv2d(4, 2, 3, padding="same"), a, g) is None
    assert conv2d_grad_norms(nn.Conv2d(4, 2, 3, padding=1, padding_mode="reflect"), a, g) is None


def test_an_output_that_does_not_fit_the_input_is_refused():
    # The strided gather would read past the padded input: refused, never read.
    conv = nn.Conv2d(1, 2, 3, padding=1)
    with pytest.raises(ValueError, match="do not fit"):
        conv2d_grad_norms(conv, torch.randn(2, 1, 4, 4), torch.randn(2, 2, 5, 5))
    with pytest.raises(ValueError, match="do not fit"):
        conv2d_grad_norms(conv, torch.randn(2, 3, 4, 4), torch.randn(2, 2, 4, 4))


def _stacked_step(layer: StackedConv2d, x: torch.Tensor, g: torch.Tensor, coeff: torch.Tensor):
    """One step's norms and clipped sums, as the one-pass backward forms them."""
    out = layer(x)
    layer.keep_rows = True
    norms = stacked_conv_norm_sample(layer, [x], g.clone())  # the rows path scales g in place
    layer.keep_rows = False
    layer.clipped_sums(coeff.clone())
    return out, norms, layer.weight.grad, layer.bias.grad


@pytest.mark.parametrize("geometry", [GEOMETRIES[0], GEOMETRIES[2]])
def test_the_first_layers_shared_products_equal_the_rows(geometry):
    c, o, kernel, stride, padding, dilation, size = geometry
    torch.manual_seed(2)
    k, n = 3, 5
    plain = nn.Conv2d(c, o, kernel, stride=stride, padding=padding, dilation=dilation).double()
    rows, shared = StackedConv2d(plain, k), StackedConv2d(plain, k)
    shared.repeated_input = True
    with torch.no_grad():
        for layer in (rows, shared):  # the copies differ
            layer.weight.add_(torch.arange(k, dtype=torch.float64).reshape(k, 1, 1, 1, 1))
            layer.bias.sub_(torch.arange(k, dtype=torch.float64).reshape(k, 1))
    data = torch.randn(n, c, *size, dtype=torch.float64)
    x = data.repeat(k, 1, 1, 1)
    g = torch.randn_like(rows(x))
    coeff = torch.rand(k * n, dtype=torch.float64)
    expected = _stacked_step(rows, x, g, coeff)
    got = _stacked_step(shared, x, g, coeff)
    assert shared.patch_cache is not None and rows.patch_cache is None  # the shared path ran
    assert torch.allclose(got[0], expected[0], rtol=0, atol=1e-12)
    for param in ("weight", "bias"):
        assert torch.allclose(
            got[1][getattr(shared, param)], expected[1][getattr(rows, param)], rtol=1e-10, atol=0
        )
    assert torch.allclose(got[2], expected[2], rtol=1e-10, atol=1e-12)
    assert torch.allclose(got[3], expected[3], rtol=1e-10, atol=1e-12)
    # Each copy's norms are those of its own per-example gradients.
    for copy in range(k):
        conv = nn.Conv2d(c, o, kernel, stride=stride, padding=padding, dilation=dilation).double()
        with torch.no_grad():
            conv.weight.copy_(shared.weight[copy])
        block = slice(copy * n, copy * n + n)
        expected_weight = _per_example_norms(conv, data, g[block])[0]
        assert torch.allclose(got[1][shared.weight][block], expected_weight, rtol=1e-10, atol=0)

    # Changed data in the same tensor: the gathered patches are not reused.
    with torch.no_grad():
        x.mul_(-0.5)
    again = _stacked_step(shared, x, g, coeff)
    fresh = _stacked_step(rows, x, g, coeff)
    assert torch.allclose(again[1][shared.weight], fresh[1][rows.weight], rtol=1e-10, atol=0)
    assert torch.allclose(again[2], fresh[2], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("geometry", [GEOMETRIES[0], GEOMETRIES[2]])
def test_the_batched_shared_gradients_equal_the_per_copy_loop(geometry):
    """Off the CPU the first layer's per-row gradients come from one product for all copies;
    checked here on the CPU against the per-copy loop (float64: summation order alone)."""
    c, o, kernel, stride, padding, dilation, size = geometry
    torch.manual_seed(4)
    k, n = 3, 5
    plain = nn.Conv2d(c, o, kernel, stride=stride, padding=padding, dilation=dilation).double()
    layer = StackedConv2d(plain, k)
    data = torch.randn(n, c, *size, dtype=torch.float64)
    g = torch.randn_like(layer(data.repeat(k, 1, 1, 1)))
    looped = _conv.shared_gradients(layer, data, g, batched=False)
    batched = _conv.shared_gradients(layer, data, g, batched=True)
    assert batched[0].shape == looped[0].shape and batched[0].is_contiguous()
    assert torch.allclose(batched[0], looped[0], rtol=1e-12, atol=1e-12)
    assert torch.equal(batched[1], looped[1])


def test_row_blocks_that_differ_take_the_rows_path():
    torch.manual_seed(3)
    layer = StackedConv2d(nn.Conv2d(1, 2, 3, padding=1).double(), 2)
    layer.repeated_input = True
    x = torch.randn(2 * 4, 1, 5, 5, dtype=torch.float64)  # two different blocks
    g = torch.randn(2 * 4, 2, 5, 5, dtype=torch.float64)
    _stacked_step(layer, x, g, torch.ones(8, dtype=torch.float64))
    assert layer.patch_cache is None
    # ... and an input that needs a gradient is never shared (the shared products send none).
    same = torch.randn(4, 1, 5, 5, dtype=torch.float64).repeat(2, 1, 1, 1).requires_grad_()
    assert _conv.shared_images(layer, same) is None


def _to_grouped(rows: torch.Tensor, k: int) -> torch.Tensor:
    """(K·n, c, h, w) rows as (n, K·c, h, w) grouped maps, written out independently of the
    module's own helper: example i, copy k's channel j is row k·n + i's channel j."""
    n = rows.shape[0] // k
    out = rows.new_empty(n, k * rows.shape[1], *rows.shape[2:])
    for copy in range(k):
        out[:, copy * rows.shape[1] : (copy + 1) * rows.shape[1]] = rows[copy * n : (copy + 1) * n]
    return out


LAYOUTS = [
    # (grouped input, grouped output, the input is the data repeated once per copy)
    (False, True, True),  # a first layer on the shared data, its maps kept grouped
    (False, True, False),
    (True, True, False),  # between two convolutions
    (True, False, False),
]


GROUPED_GEOMETRIES = [
    (GEOMETRIES[0], 1),
    (GEOMETRIES[1], 1),
    (GEOMETRIES[4], 1),
    ((4, 6, 3, 2, 1, 1, (5, 5)), 2),  # a grouped convolution
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("geometry, groups", GROUPED_GEOMETRIES)
def test_grouped_maps_give_the_numbers_of_rows(geometry, groups, layout, device):
    """A stacked convolution taking or giving grouped maps: the same output (laid out
    grouped), per-row norms (laid out as rows) and clipped sums as the same layer on rows;
    float64, so only summation order differs (1e-10 as above). The grouped convolution (groups
    = 2) takes Opacus's per-sample gradients for its norms."""
    grouped_input, grouped_output, shared = layout
    c, o, kernel, stride, padding, dilation, size = geometry
    torch.manual_seed(5)
    k, n = 3, 4
    plain = nn.Conv2d(c, o, kernel, stride, padding, dilation, groups=groups).double()
    rows, other = StackedConv2d(plain, k).to(device), StackedConv2d(plain, k).to(device)
    other.grouped_input, other.grouped_output, other.repeated_input = layout
    steps = torch.arange(k, dtype=torch.float64, device=device)
    with torch.no_grad():
        for layer in (rows, other):  # the copies differ
            layer.weight.add_(steps.reshape(k, 1, 1, 1, 1))
            layer.bias.sub_(steps.reshape(k, 1))
    if shared:
        x = torch.randn(n, c, *size, dtype=torch.float64).repeat(k, 1, 1, 1)
    else:
        x = torch.randn(k * n, c, *size, dtype=torch.float64)
    x = x.to(device)
    g = torch.randn_like(rows(x))
    coeff = torch.rand(k * n, dtype=torch.float64, device=device)
    expected = _stacked_step(rows, x, g, coeff)
    got = _stacked_step(
        other,
        _to_grouped(x, k) if grouped_input else x,
        _to_grouped(g, k) if grouped_output else g,
        coeff,
    )
    assert (other.patch_cache is not None) == (shared and groups == 1)  # the shared path ran
    out = _to_grouped(expected[0], k) if grouped_output else expected[0]
    assert got[0].shape == out.shape and torch.allclose(got[0], out, rtol=0, atol=1e-12)
    for param in ("weight", "bias"):
        assert torch.allclose(
            got[1][getattr(other, param)], expected[1][getattr(rows, param)], rtol=1e-10, atol=0
        )
    assert torch.allclose(got[2], expected[2], rtol=1e-10, atol=1e-12)
    assert torch.allclose(got[3], expected[3], rtol=1e-10, atol=1e-12)


def test_a_grouped_layer_refuses_rows_and_names_the_layout():
    layer = StackedConv2d(nn.Conv2d(2, 3, 3), 4)
    layer.grouped_input = True
    with pytest.raises(ValueError, match=r"grouped maps \(n, 4 copies \* 2"):
        layer(torch.randn(8, 2, 5, 5))
    assert layer(torch.randn(2, 8, 5, 5)).shape == (8, 3, 3, 3)  # output as rows
