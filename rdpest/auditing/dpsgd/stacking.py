"""Several full-batch DP-SGD runs of one small network, trained as one stacked network.

Why: an audit trains hundreds of copies of a small model, and for a small model most of an
Opacus step is per-step Python work in Opacus and autograd (hooks, clipping, noise, the
optimizer), not arithmetic; it is paid once per model per step. Stacking K runs into one module
pays it once per K models (models per second: ``benchmarks/results/auditing/throughput.md``).

What is stacked: an ``nn.Sequential`` of ``nn.Linear`` and ``nn.Conv2d`` layers and
parameter-free layers that act on each example alone (elementwise activations, ``nn.Flatten``,
``nn.Unflatten``, 2-D pooling), such as all the built-in models (:func:`stackable`).
:class:`StackedLinear` holds K copies of a linear layer as (K, out, in) and (K, out) parameters;
:class:`StackedConv2d` holds K copies of a convolution and applies them as one grouped
convolution; between convolutions the stack keeps their maps in that convolution's layout
(:mod:`rdpest.auditing.dpsgd.stacked_conv`). The training batch is the data repeated K times:
row ``r = k·n + i`` is example ``i`` as seen by copy ``k``, and its output depends on copy
``k``'s parameters alone.

Why each copy is exactly one DP-SGD run (Abadi et al. 2016) through Opacus's ``PrivacyEngine``:

1. Clipping. Row r's gradient is zero outside copy k's slices, so its norm over all parameters,
   which Opacus's ghost clipping computes (from activations and output gradients: for a linear
   layer ‖a‖·‖g‖ for the weight and ‖g‖ for the bias, Li et al. 2022; for a convolution the
   norm of the per-example gradient, the product of the output gradient with the unfolded
   input, formed here for the ungrouped ones and by Opacus's sampler for the others) and clips,
   is the norm of example i's gradient in model k.
2. Summing. Ghost clipping's second backward pass forms Σ_r c_r ∇loss_r; slice k of it is model
   k's sum of clipped per-example gradients. Where every trainable layer is a
   :class:`StackedLinear` or a :class:`StackedConv2d`, the same sums come from the first pass
   instead (:mod:`rdpest.auditing.dpsgd.one_pass` says why they are equal).
3. Noise. Opacus's optimizer adds N(0, σ²C²) noise to each parameter's summed gradient, one
   draw of the parameter's shape per step from the optimizer's generator. For a stacked
   parameter that one draw has the shape (K, ...), so every copy's slice is i.i.d.
   N(0, σ²C²), independent of the other slices and of the other steps: exactly the noise of a
   single run, at the cost of one draw per stack instead of K. The generator is seeded from all
   the stack's run seeds (:func:`stack_noise_seed`), so a copy's noise depends on the stack it
   trained in: the stacked runs of one seed list are reproducible, but run k is no longer the
   single run with seed ``seeds[k]`` (it is one with fresh noise). At σ = 0 it is that run.
4. The SGD step is elementwise.

Two Opacus classes are specialised on the instances that ``make_private`` returns (nothing global
changes), and for speed only: the module's sum of per-row norms (:class:`StackedGradSampleModule`)
and the criterion's backward (one pass instead of two,
:class:`~rdpest.auditing.dpsgd.one_pass.OnePassLoss`). The noise and the step are Opacus's own.
Also for speed, a narrow first linear layer, whose input is the same data for every copy,
computes all copies' outputs and clipped sums with one product each over the shared rows
instead of K small ones (the same sums, tested against Opacus's two passes over per-copy
products), and a first convolution acts as one convolution of the data with K times the output
channels (``rdpest.auditing.dpsgd._conv``); and ``nn.Tanh``
becomes :class:`~rdpest.auditing.dpsgd.activations.StackedTanh`, the same function to float
rounding, several times faster on the CPU.

So each copy follows the trajectory of :func:`rdpest.auditing.dpsgd.training.train_dp_sgd` with
its own noise, up to float rounding (tested at σ = 0 with binding clipping, and for the noise's
distribution and independence at σ > 0).
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Sequence

import numpy as np
import torch
from opacus.grad_sample.grad_sample_module_fast_gradient_clipping import (
    GradSampleModuleFastGradientClipping,
)
from opacus.grad_sample.utils import register_norm_sampler
from torch import nn

from rdpest.auditing.dpsgd._rows import (
    _input_row_norms,
    _row_norms,
    _shared_block,
    _stack_parameters,
)
from rdpest.auditing.dpsgd.activations import (
    StackedAvgPool2d,
    StackedTanh,
    is_two_by_two_average,
)
from rdpest.auditing.dpsgd.stacked_conv import (
    StackedConv2d,
    StackedFlatten,
    grouped_outputs,
    numeric_padding,
)

__all__ = [
    "BYTES_PER_ACTIVATION",
    "CPU_CONV_MAX_STACK",
    "ELEMENTWISE_ACTIVATIONS",
    "STACK_CUDA_FRACTION",
    "STACK_RAM_CAP",
    "STACK_RAM_FRACTION",
    "TESTED_OPACUS",
    "StackedConv2d",
    "StackedFlatten",
    "StackedGradSampleModule",
    "StackedLinear",
    "activation_floats",
    "auto_stack_size",
    "available_memory",
    "opacus_supports_stacking",
    "opacus_version_message",
    "stack_memory_budget",
    "stack_model",
    "stack_noise_seed",
    "stackable",
    "unstack_model",
]

# Parameter-free activations applied elementwise (exact types: a subclass may do anything).
ELEMENTWISE_ACTIVATIONS = (
    nn.Identity,
    nn.Tanh,
    nn.ReLU,
    nn.ReLU6,
    nn.Sigmoid,
    nn.GELU,
    nn.ELU,
    nn.SELU,
    nn.CELU,
    nn.LeakyReLU,
    nn.SiLU,
    nn.Mish,
    nn.Softplus,
    nn.Hardtanh,
    nn.Hardsigmoid,
    nn.Hardswish,
)

# What "auto" stacks (auto_stack_size): the largest power of two of copies whose training fits a
# memory budget. A stacked step keeps, per example and copy, the input and every layer's output,
# Opacus's output gradients for ghost clipping and autograd's saved tensors; the peaks measured on
# the digits ("lr": 3.0, "mlp": 1.9 floats kept per activation float, at 900 rows and 64 to 512
# copies) stay under this factor, in float32 bytes:
BYTES_PER_ACTIVATION = 4 * 4
# The budget of one stack on the CPU: this fraction of the available RAM per CPU core (each core
# may train a stack at the same time), and at most STACK_RAM_CAP, which keeps a default audit's
# peak well within 4 GB on a machine with few cores.
STACK_RAM_FRACTION = 0.25
STACK_RAM_CAP = 1 << 30
# On a GPU, one process trains at a time: this fraction of the device's free memory.
STACK_CUDA_FRACTION = 0.5
# On the CPU a convolution's cost is its arithmetic, which stacking does not share, and its
# per-step passes over the activations grow with the stack: digits CNNs trained fastest in
# stacks of 2 to 4 (about 1.4 times one run at a time, CPU time on one thread), slower in stacks
# of 8 and slower still in 32. "auto" stacks networks with convolutions at most this many on
# the CPU (models per second: benchmarks/results/auditing/throughput.md).
CPU_CONV_MAX_STACK = 4


class StackedLinear(nn.Module):
    """K copies of a linear layer applied to K row blocks: row ``k·n + i`` uses copy ``k``.

    Parameters
    ----------
    layer : nn.Linear
        The layer whose weights every copy starts from.
    copies : int
        K.

    Examples
    --------
    >>> layer = nn.Linear(3, 2)
    >>> stacked = StackedLinear(layer, 4)
    >>> x = torch.randn(4 * 5, 3)
    >>> bool(torch.allclose(stacked(x), layer(x), atol=1e-6))
    True
    """

    def __init__(self, layer: nn.Linear, copies: int):
        super().__init__()
        if type(layer) is not nn.Linear:
            raise ValueError(f"StackedLinear stacks nn.Linear layers, got {type(layer).__name__}")
        self.copies = int(copies)
        self.in_features = layer.in_features
        self.out_features = layer.out_features
        # Set by rdpest.auditing.dpsgd.one_pass for one step: keep the rows' inputs and output
        # gradients that Opacus's hooks pass to the norm sampler, for the clipped sums.
        self.keep_rows = False
        self.kept_rows: tuple[torch.Tensor, torch.Tensor] | None = None
        # Set for a stack's first layer, whose input is the same data at every full-batch step:
        # its rows' norms are then computed once (see _input_row_norms).
        self.cache_input_norms = False
        self.input_norms: tuple[torch.Tensor, int, torch.Tensor] | None = None
        # Set for a stack's first layer when its input is the data repeated once per copy: with
        # few outputs, the forward product and the clipped sums then take one shared-input
        # matrix product each (see _shared_block), the repeat verified once per input tensor.
        self.repeated_input = False
        self.repeat_check: tuple[torch.Tensor, int, bool] | None = None
        _stack_parameters(self, layer)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 2 or x.shape[0] % self.copies:
            raise ValueError(
                f"StackedLinear expects rows (copies * n, features), got shape {tuple(x.shape)}"
            )
        shared = _shared_block(self, x)
        if shared is not None:
            # Every copy sees the same n rows: one (out·K, in) @ (in, n) product, whose result is
            # the rows' outputs laid out output first, (out, K·n); returned as its transposed
            # view (K·n, out), no copy. A cross-entropy then finds its logits already in the
            # class-first layout it computes in (rdpest.auditing.dpsgd.one_pass).
            weight = self.weight.transpose(0, 1).reshape(-1, self.in_features)
            if self.bias is None:
                flat = torch.mm(weight, shared.t())
            else:
                flat = torch.addmm(self.bias.t().reshape(-1, 1), weight, shared.t())
            return flat.view(self.out_features, -1).t()
        # (K, n, in) @ (K, in, out): the output's rows are contiguous blocks, so it is laid out as
        # rows without a copy, and so are the gradients flowing back through it.
        blocks = x.reshape(self.copies, -1, x.shape[-1])
        weight_t = self.weight.transpose(1, 2)
        if self.bias is None:
            out = torch.bmm(blocks, weight_t)
        else:
            out = torch.baddbmm(self.bias.unsqueeze(1), blocks, weight_t)
        return out.reshape(-1, self.out_features)

    def clipped_sums(self, coeff: torch.Tensor) -> None:
        """Set each copy's gradient to its sum of clipped per-row gradients, Σ_r c_r·g_r·a_rᵀ
        (and Σ_r c_r·g_r for the bias), from the kept rows (:mod:`rdpest.auditing.dpsgd.one_pass`
        says why this is the gradient of Opacus's second pass)."""
        a, g = self.kept_rows
        self.kept_rows = None
        # In place: the kept output gradients serve nothing else once the norms are taken (the
        # backward pass is over, and no other layer keeps this memory); a fresh (K·n, out)
        # tensor per step cost a few percent of a stacked MLP step.
        scaled = g.mul_(coeff.to(g.dtype).unsqueeze(1))  # (K·n, out), laid out as g is
        shared = _shared_block(self, a)
        if shared is not None:
            # The rows' scaled output gradients output first, (out·K, n) (a view when they are
            # laid out so, as a shared forward's are), and one product with the shared rows.
            by_output = scaled.t().reshape(self.out_features * self.copies, -1)
            if self.weight.requires_grad:
                grad = torch.mm(by_output, shared).view(self.out_features, self.copies, -1)
                self.weight.grad = grad.transpose(0, 1).contiguous().to(self.weight.dtype)
            if self.bias is not None and self.bias.requires_grad:
                bias = by_output.sum(dim=1).view(self.out_features, self.copies)
                self.bias.grad = bias.t().contiguous().to(self.bias.dtype)
            return
        scaled = scaled.reshape(self.copies, -1, self.out_features)
        if self.weight.requires_grad:
            blocks = a.reshape(self.copies, -1, self.in_features)
            self.weight.grad = torch.bmm(scaled.transpose(1, 2), blocks).to(self.weight.dtype)
        if self.bias is not None and self.bias.requires_grad:
            self.bias.grad = scaled.sum(dim=1).to(self.bias.dtype)

    def extra_repr(self) -> str:
        return (
            f"copies={self.copies}, in_features={self.in_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )


@register_norm_sampler(StackedLinear)
def _stacked_linear_norm_sample(
    layer: StackedLinear, activations: list[torch.Tensor], backprops: torch.Tensor
) -> dict[nn.Parameter, torch.Tensor]:
    """Per-row gradient norms of a :class:`StackedLinear` for Opacus's ghost clipping.

    Row r's weight gradient is the outer product g_r a_rᵀ in its copy's slice (zero elsewhere),
    of Frobenius norm ‖g_r‖·‖a_r‖; its bias gradient is g_r (Li et al. 2022, ghost clipping).
    """
    a = activations[0].to(backprops.dtype)
    if layer.keep_rows:
        layer.kept_rows = (a, backprops)
    g_norm = _row_norms(backprops)
    norms = {}
    if layer.weight.requires_grad:
        norms[layer.weight] = g_norm * _input_row_norms(layer, a)
    if layer.bias is not None and layer.bias.requires_grad:
        norms[layer.bias] = g_norm
    return norms


# Mixed into a stack's noise seed so that no stack's stream is a single run's stream (those are
# derived from SeedSequence(seed) alone, rdpest.utils.torch_helpers.stream_seeds).
_STACK_NOISE_TAG = 0x53544B4E  # "STKN"


def stack_noise_seed(seeds: Sequence[int]) -> int:
    """The 63-bit seed of the noise generator of a stack of runs with these seeds, in this order.

    Derived by ``numpy.random.SeedSequence`` from a fixed tag, the stack size and every run
    seed, so two different stacks (other seeds, another order or another size) get independent
    streams.

    Examples
    --------
    >>> stack_noise_seed([1, 2, 3]) == stack_noise_seed([1, 2, 3])
    True
    >>> len({stack_noise_seed([1, 2]), stack_noise_seed([2, 1]), stack_noise_seed([1, 2, 3])})
    3
    """
    entropy = [_STACK_NOISE_TAG, len(seeds), *(int(s) for s in seeds)]
    state = np.random.SeedSequence(entropy).generate_state(1, dtype=np.uint64)
    return int(state[0] >> np.uint64(1))


class StackedGradSampleModule(GradSampleModuleFastGradientClipping):
    """Opacus's ghost-clipping module wrapper, with the per-row norms summed directly.

    The only change is :meth:`get_norm_sample`: the total norm of each row is
    sqrt(Σ_parameters norm²), as in Opacus, but computed as a sum of squares instead of Opacus's
    ``torch.stack(norms).norm(2, dim=0)``, which torch 2.13 runs about two orders of magnitude
    slower on the CPU, a large share of a stacked logistic-regression step. Made by re-classing
    the module that ``make_private`` returns.
    """

    def get_norm_sample(self) -> torch.Tensor:
        norms = torch.stack([p._norm_sample for p in self.trainable_parameters])
        total = (norms * norms).sum(dim=0).sqrt()
        self.per_sample_gradient_norms = total
        return total


# Parameter-free layers that act on each row (example) alone, beside the activations: each maps
# the number of dimensions of its input (rows included) to that of its output, or None where it
# does not apply.
def _row_wise_ndim(module: nn.Module, ndim: int) -> int | None:
    kind = type(module)
    if kind in ELEMENTWISE_ACTIVATIONS:
        return None if getattr(module, "inplace", False) else ndim
    if kind is nn.Flatten:
        return 2 if (module.start_dim, module.end_dim) == (1, -1) else None
    if kind is nn.Unflatten:
        return ndim - 1 + len(module.unflattened_size) if module.dim == 1 and ndim == 2 else None
    if kind in (nn.MaxPool2d, nn.AdaptiveMaxPool2d):
        return ndim if ndim == 4 and not module.return_indices else None
    if kind in (nn.AvgPool2d, nn.AdaptiveAvgPool2d):
        return ndim if ndim == 4 else None
    return None


def stackable(net: nn.Module, input_ndim: int = 2) -> bool:
    """Whether ``net`` can be trained stacked: see the module docstring.

    An ``nn.Sequential`` (its own ``forward``) of ``nn.Linear`` layers (on 2-D rows),
    ``nn.Conv2d`` layers (zero padding, the same on both sides: not a ``padding="same"`` that
    pads one side more; on 4-D image rows) and parameter-free layers that act on
    each example alone: :data:`ELEMENTWISE_ACTIVATIONS` (not in place), ``nn.Flatten()``,
    ``nn.Unflatten(1, ...)`` and 2-D max or average pooling; with no module or parameter used
    twice, and each layer given inputs of the number of dimensions it handles, starting from
    ``input_ndim`` (rows included).

    Examples
    --------
    >>> stackable(nn.Sequential(nn.Flatten(), nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2)))
    True
    >>> stackable(nn.Sequential(nn.Linear(4, 3), nn.Dropout(), nn.Linear(3, 2)))
    False
    >>> cnn = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
    ...                     nn.Linear(4 * 3 * 3, 10))
    >>> stackable(cnn, input_ndim=4), stackable(cnn, input_ndim=2)
    (True, False)
    """
    if not isinstance(net, nn.Sequential) or type(net).forward is not nn.Sequential.forward:
        return False
    children = list(net)
    if len({id(m) for m in children}) != len(children):
        return False
    params = [p for _, p in net.named_parameters(remove_duplicate=False)]
    if len({id(p) for p in params}) != len(params) or not params:
        return False
    ndim = int(input_ndim)
    for module in children:
        if type(module) is nn.Linear:
            ok = ndim == 2
        elif type(module) is nn.Conv2d:
            ok = (
                ndim == 4 and module.padding_mode == "zeros" and numeric_padding(module) is not None
            )
        else:
            ndim = _row_wise_ndim(module, ndim)
            ok = ndim is not None
        if not ok:
            return False
    return True


# The specialised methods mirror Opacus's own ``get_norm_sample`` and its ghost-clipping loss
# backward, and the convolution norms call Opacus's convolution per-sample-gradient function, of
# these releases; "auto" does not stack under any other release.
TESTED_OPACUS = ("1.5", "1.6")


def opacus_supports_stacking() -> bool:
    """Whether the installed Opacus is a release the stacked training was checked against."""
    import opacus

    return ".".join(opacus.__version__.split(".")[:2]) in TESTED_OPACUS


def opacus_version_message() -> str:
    """Why stacking is refused on an Opacus release it was not checked against."""
    import opacus

    return (
        f"stacked training was checked against Opacus {' and '.join(TESTED_OPACUS)}, not the "
        f"installed {opacus.__version__}"
    )


def available_memory(device: str | torch.device = "cpu") -> int:
    """Bytes free for new allocations: on CUDA the device's free memory plus what torch's caching
    allocator holds reserved but unused (it serves new tensors from that first), else the
    available RAM (``MemAvailable`` of /proc/meminfo, else the free physical pages; 2 GiB if
    neither is known).
    """
    device = torch.device(device)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int(free) + max(0, int(cached))
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return 2 << 30


def stack_memory_budget(device: str | torch.device = "cpu") -> int:
    """Bytes one stack may use: see :data:`STACK_RAM_FRACTION` and :data:`STACK_CUDA_FRACTION`."""
    free = available_memory(device)
    if torch.device(device).type == "cuda":
        return int(STACK_CUDA_FRACTION * free)
    return int(min(STACK_RAM_FRACTION * free / max(1, os.cpu_count() or 1), STACK_RAM_CAP))


def activation_floats(net: nn.Module, example_shape: Sequence[int]) -> int:
    """Floats one example's forward pass through ``net`` produces: its input and every leaf
    module's output (measured with forward hooks on a zero example, gradients off)."""
    counts = [math.prod(example_shape)]

    def count(module, inputs, output):
        if isinstance(output, torch.Tensor):
            counts.append(output.numel())

    leaves = [m for m in net.modules() if not list(m.children())]
    handles = [m.register_forward_hook(count) for m in leaves]
    try:
        reference = next(net.parameters())
        with torch.no_grad():
            net(torch.zeros((1, *example_shape), dtype=reference.dtype, device=reference.device))
    finally:
        for handle in handles:
            handle.remove()
    return int(sum(counts))


def auto_stack_size(
    net: nn.Module,
    n_rows: int,
    example_shape: Sequence[int],
    device: str | torch.device = "cpu",
    *,
    max_stack: int | None = None,
    budget: int | None = None,
) -> int:
    """Copies that ``stack_runs="auto"`` trains together; 1 if ``net`` is not :func:`stackable`.

    The largest power of two K (at most ``max_stack``) whose stacked training on ``n_rows``
    examples of shape ``example_shape`` keeps K · n_rows · :func:`activation_floats` ·
    :data:`BYTES_PER_ACTIVATION` bytes within ``budget`` (default
    :func:`stack_memory_budget` of ``device``): any data size gets the largest stack that fits,
    down to one run at a time. A power of two, so that small changes of the free memory rarely
    change the stack size. Off a GPU, networks with convolutions stack at most
    :data:`CPU_CONV_MAX_STACK` copies.
    """
    example_shape = tuple(int(s) for s in example_shape)
    if not stackable(net, len(example_shape) + 1) or not opacus_supports_stacking():
        return 1
    if torch.device(device).type != "cuda" and any(type(m) is nn.Conv2d for m in net):
        max_stack = min(CPU_CONV_MAX_STACK, CPU_CONV_MAX_STACK if max_stack is None else max_stack)
    if budget is None:
        budget = stack_memory_budget(device)
    per_copy = max(1, int(n_rows)) * activation_floats(net, example_shape) * BYTES_PER_ACTIVATION
    fits = max(1, int(budget) // per_copy)
    if max_stack is not None:
        fits = min(fits, max(1, int(max_stack)))
    return 1 << (fits.bit_length() - 1)


def _stacked_layer(module: nn.Module, copies: int, weights_after: bool) -> nn.Module:
    if type(module) is nn.Linear:
        return StackedLinear(module, copies)
    if type(module) is nn.Conv2d:
        return StackedConv2d(module, copies)
    if type(module) is nn.Tanh:
        # Followed by a layer with weights, the gradient reaching the tanh is that layer's fresh
        # input-gradient product (through parameter-free layers only), which nothing else keeps.
        return StackedTanh(reuse_grad=weights_after)
    if is_two_by_two_average(module):
        return StackedAvgPool2d(copy.deepcopy(module))
    return copy.deepcopy(module)


def stack_model(net: nn.Module, copies: int, grouped_maps: bool = True) -> nn.Sequential:
    """A stacked copy of a :func:`stackable` ``net``: every copy starts from ``net``'s weights.

    ``grouped_maps``: keep convolutions' maps in the grouped layout between convolutions where
    the layers allow (:mod:`rdpest.auditing.dpsgd.stacked_conv`); False lays every layer's
    output out as rows (the same numbers, more layout copies).
    """
    if not any(stackable(net, ndim) for ndim in (2, 3, 4)):
        raise ValueError(f"this model cannot be stacked: {net!r}")
    weighted = [i for i, m in enumerate(net) if type(m) in (nn.Linear, nn.Conv2d)]
    layers = [_stacked_layer(m, copies, i < weighted[-1]) for i, m in enumerate(net)]
    if grouped_maps:
        grouped = False  # whether the maps reaching layer i are grouped
        for i, kept in enumerate(grouped_outputs(net, ELEMENTWISE_ACTIVATIONS)):
            if isinstance(layers[i], StackedConv2d):
                layers[i].grouped_input, layers[i].grouped_output = grouped, kept
                grouped = kept
            elif grouped and type(layers[i]) is nn.Flatten:
                layers[i], grouped = StackedFlatten(copies), False
    return nn.Sequential(*layers).to(next(net.parameters()).device)


def unstack_model(stacked: nn.Sequential, template: nn.Module) -> list[nn.Module]:
    """The K plain models inside a stacked network (copies of ``template`` with each slice)."""
    kinds = (StackedLinear, StackedConv2d)
    copies = next(m.copies for m in stacked if isinstance(m, kinds))
    models = []
    for k in range(copies):
        model = copy.deepcopy(template)
        with torch.no_grad():
            for plain, layer in zip(model, stacked, strict=True):
                if isinstance(layer, kinds):
                    plain.weight.copy_(layer.weight[k])
                    if layer.bias is not None:
                        plain.bias.copy_(layer.bias[k])
        models.append(model)
    return models
