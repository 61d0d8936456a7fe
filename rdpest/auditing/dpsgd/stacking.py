"""Several full-batch DP-SGD runs of one small network, trained as one stacked network.

Why: an audit trains hundreds of copies of a small model, and for a small model most of an
Opacus step is per-step Python work in Opacus and autograd (hooks, clipping, noise, the
optimizer), not arithmetic; it is paid once per model per step. Stacking K runs into one module
pays it once per K models (models per second: ``benchmarks/results/auditing/throughput.md``).

What is stacked: an ``nn.Sequential`` made of ``nn.Linear`` layers and parameter-free
elementwise activations (optionally led by ``nn.Flatten``), such as the ``"lr"`` and ``"mlp"``
models. :class:`StackedLinear` holds K copies of a linear layer as (K, out, in) and (K, out)
parameters. The training batch is the data repeated K times: row ``r = k·n + i`` is example ``i``
as seen by copy ``k``, and its output depends on copy ``k``'s parameters alone.

Why each copy is exactly one DP-SGD run (Abadi et al. 2016) through Opacus's ``PrivacyEngine``:

1. Clipping. Row r's gradient is zero outside copy k's slices, so its norm over all parameters,
   which Opacus's ghost clipping computes (from activations and output gradients: for a linear
   layer ‖a‖·‖g‖ for the weight and ‖g‖ for the bias, Li et al. 2022) and clips, is the norm of
   example i's gradient in model k.
2. Summing. Ghost clipping's second backward pass forms Σ_r c_r ∇loss_r; slice k of it is model
   k's sum of clipped per-example gradients.
3. Noise. Opacus's optimizer would draw one noise stream for each stacked parameter; here
   (:class:`PerRunNoiseOptimizer`) slice k draws from run k's own generator, parameter by
   parameter in the order a single run draws, so copy k gets exactly the noise that a single run
   with the same seed gets.
4. The SGD step is elementwise.

Two Opacus classes are specialised for this, each by one method, on the instances that
``make_private`` returns (nothing global changes): the optimizer's noise (3) and, for speed only,
the module's sum of per-row norms (:class:`StackedGradSampleModule`).

So each copy follows the trajectory of :func:`rdpest.auditing.dpsgd.training.train_dp_sgd` with
its seed, up to float rounding (tested with binding clipping and noise).
"""

from __future__ import annotations

import copy

import torch
from opacus.grad_sample.grad_sample_module_fast_gradient_clipping import (
    GradSampleModuleFastGradientClipping,
)
from opacus.grad_sample.utils import register_norm_sampler
from opacus.optimizers import DPOptimizerFastGradientClipping
from opacus.optimizers.optimizer import (
    _check_processed_flag,
    _generate_noise,
    _mark_as_processed,
)
from torch import nn

__all__ = [
    "ELEMENTWISE_ACTIVATIONS",
    "MAX_STACK",
    "MAX_STACK_CUDA",
    "TESTED_OPACUS",
    "PerRunNoiseOptimizer",
    "StackedGradSampleModule",
    "StackedLinear",
    "auto_stack_size",
    "opacus_supports_stacking",
    "opacus_version_message",
    "stack_model",
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

# Largest stack that "auto" uses on the CPU: past about 16 copies of logistic regression on the
# digits the arithmetic dominates and larger stacks stop paying
# (benchmarks/results/auditing/throughput.md).
MAX_STACK = 16
# On a GPU a step of a small model is mostly launch latency, so larger stacks keep paying
# (benchmarks/results/auditing/throughput_cuda.md); 64 takes most of the gain while keeping
# groups, the unit of work that an interrupted audit redoes, small.
MAX_STACK_CUDA = 64
# "auto" also keeps the stacked activations under this many floats (256 MB in float32), so a
# large data set (e.g. MNIST at full batch) trains one run at a time.
_AUTO_STACK_FLOATS = 2**26


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
        # A frozen weight stays frozen: Opacus then leaves it out of the norms, the noise and the
        # step, as in a single run.
        weight = layer.weight.detach().unsqueeze(0).repeat(self.copies, 1, 1).clone()
        self.weight = nn.Parameter(weight, requires_grad=layer.weight.requires_grad)
        if layer.bias is None:
            self.register_parameter("bias", None)
        else:
            bias = layer.bias.detach().unsqueeze(0).repeat(self.copies, 1).clone()
            self.bias = nn.Parameter(bias, requires_grad=layer.bias.requires_grad)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 2 or x.shape[0] % self.copies:
            raise ValueError(
                f"StackedLinear expects rows (copies * n, features), got shape {tuple(x.shape)}"
            )
        # (K, in, n): the product is computed as (K, out, in) @ (K, in, n), whose layout is several
        # times faster on the CPU than (K, n, in) @ (K, in, out) for narrow outputs.
        blocks = x.reshape(self.copies, -1, x.shape[-1]).transpose(1, 2)
        if self.bias is None:
            out = torch.bmm(self.weight, blocks)
        else:
            out = torch.baddbmm(self.bias.unsqueeze(2), self.weight, blocks)
        return out.transpose(1, 2).reshape(-1, self.out_features)

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
    g2 = (backprops * backprops).sum(dim=-1)
    norms = {}
    if layer.weight.requires_grad:
        norms[layer.weight] = torch.sqrt(g2 * (a * a).sum(dim=-1))
    if layer.bias is not None and layer.bias.requires_grad:
        norms[layer.bias] = torch.sqrt(g2)
    return norms


class PerRunNoiseOptimizer(DPOptimizerFastGradientClipping):
    """Opacus's ghost-clipping DP optimizer, with the noise of each stacked copy from its own run.

    The only change is :meth:`add_noise`: slice k of every (stacked) parameter draws its noise
    N(0, σ²C²) from ``run_generators[k]`` through Opacus's own ``_generate_noise``, parameter by
    parameter, which is the order and shape in which a single run with that generator draws. An
    instance is made by re-classing the optimizer that ``PrivacyEngine.make_private`` returns
    (:func:`rdpest.auditing.dpsgd.training` does this), after setting ``run_generators``.
    """

    run_generators: list[torch.Generator]

    def add_noise(self) -> None:
        multiplier = getattr(self, "_adjusted_noise_multiplier", self.noise_multiplier)
        std = multiplier * self.max_grad_norm
        for p in self.params:
            _check_processed_flag(p.summed_grad)
            if p.summed_grad.shape[0] != len(self.run_generators):
                raise RuntimeError(
                    f"a stacked parameter has {p.summed_grad.shape[0]} copies but "
                    f"{len(self.run_generators)} run generators were given"
                )
            noise = torch.stack(
                [
                    _generate_noise(
                        std=std,
                        reference=p.summed_grad[k],
                        generator=generator,
                        secure_mode=self.secure_mode,
                    )
                    for k, generator in enumerate(self.run_generators)
                ]
            )
            p.grad = (p.summed_grad + noise).view_as(p)
            _mark_as_processed(p.summed_grad)


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


def stackable(net: nn.Module, input_ndim: int = 2) -> bool:
    """Whether ``net`` can be trained stacked: see the module docstring.

    An ``nn.Sequential`` of ``nn.Linear`` layers and :data:`ELEMENTWISE_ACTIVATIONS` (not in
    place), optionally led by a default ``nn.Flatten``, with no module or parameter used twice;
    inputs with more than two dimensions need the leading ``nn.Flatten``.

    Examples
    --------
    >>> stackable(nn.Sequential(nn.Flatten(), nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2)))
    True
    >>> stackable(nn.Sequential(nn.Linear(4, 3), nn.Dropout(), nn.Linear(3, 2)))
    False
    """
    if type(net) is not nn.Sequential:
        return False
    children = list(net)
    if len({id(m) for m in children}) != len(children):
        return False
    params = [p for _, p in net.named_parameters(remove_duplicate=False)]
    if len({id(p) for p in params}) != len(params) or not params:
        return False
    if children and type(children[0]) is nn.Flatten:
        flatten = children.pop(0)
        if (flatten.start_dim, flatten.end_dim) != (1, -1):
            return False
    elif input_ndim != 2:
        return False
    if not any(type(m) is nn.Linear for m in children):
        return False
    return all(
        type(m) is nn.Linear
        or (type(m) in ELEMENTWISE_ACTIVATIONS and not getattr(m, "inplace", False))
        for m in children
    )


# The two specialised methods mirror Opacus's own ``add_noise`` and ``get_norm_sample`` of these
# releases (and use their private helpers); "auto" does not stack under any other release.
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


def auto_stack_size(
    net: nn.Module, n_rows: int, input_ndim: int = 2, device: str | torch.device = "cpu"
) -> int:
    """Copies that ``stack_runs="auto"`` trains together; 1 if ``net`` is not :func:`stackable`.

    :data:`MAX_STACK` on the CPU and :data:`MAX_STACK_CUDA` on a GPU, fewer when the stacked
    inputs and layer outputs of ``n_rows`` examples would exceed about 256 MB of float32.
    """
    if not stackable(net, input_ndim) or not opacus_supports_stacking():
        return 1
    largest = MAX_STACK_CUDA if torch.device(device).type == "cuda" else MAX_STACK
    linears = [m for m in net if type(m) is nn.Linear]
    per_copy = n_rows * (linears[0].in_features + sum(m.out_features for m in linears))
    return int(max(1, min(largest, _AUTO_STACK_FLOATS // max(1, per_copy))))


def stack_model(net: nn.Module, copies: int) -> nn.Sequential:
    """A stacked copy of a :func:`stackable` ``net``: every copy starts from ``net``'s weights."""
    if not stackable(net, 2) and not stackable(net, 3):
        raise ValueError(f"this model cannot be stacked: {net!r}")
    layers = [StackedLinear(m, copies) if type(m) is nn.Linear else copy.deepcopy(m) for m in net]
    return nn.Sequential(*layers).to(next(net.parameters()).device)


def unstack_model(stacked: nn.Sequential, template: nn.Module) -> list[nn.Module]:
    """The K plain models inside a stacked network (copies of ``template`` with each slice)."""
    copies = next(m.copies for m in stacked if isinstance(m, StackedLinear))
    models = []
    for k in range(copies):
        model = copy.deepcopy(template)
        with torch.no_grad():
            for plain, layer in zip(model, stacked, strict=True):
                if isinstance(layer, StackedLinear):
                    plain.weight.copy_(layer.weight[k])
                    if layer.bias is not None:
                        plain.bias.copy_(layer.bias[k])
        models.append(model)
    return models
