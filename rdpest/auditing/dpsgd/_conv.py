"""Row helpers of the stacked convolution (:mod:`rdpest.auditing.dpsgd.stacking`): per-example
gradient norms without Opacus's per-example gradients, and the first convolution's products
over the data shared by every copy.

Norms. For an example with input ``a`` (c, h, w) and output gradient ``g`` (o, h', w'), the
gradient of a convolution's weight is the product ``G·U`` of ``g`` as an (o, P) matrix, P = h'·w'
output positions, with the (P, kh·kw·c) matrix ``U`` of the input patch that each position sees
(the unfolded input, im2col); the bias gradient is ``g`` summed over positions. Opacus's
convolution sampler forms the same products from ``torch.nn.functional.unfold``'s layout,
(c·kh·kw, P) per example, then squares them into a second tensor of their size; on the CPU that
unfold (a strided copy whose innermost run is a few floats) and the squaring took most of a
stacked CNN's step. Here the patches are gathered from the zero-padded input laid out
channels-last, where each patch row is a run of kw·c contiguous floats, in the kernel-axis order
(kh, kw, c): that permutes the gradient's entries and leaves its norm unchanged. ``G·U`` is one
batched product over the examples, and its norm is taken without another copy.

Shared data. A stack's first convolution sees the data repeated once per copy (row ``k·n + i``
is example i for copy k). Its patches are then the data's, the same at every full-batch step,
so they are gathered once; its K copies' outputs are one product of those patches with all the
copies' kernels (on the CPU; elsewhere one convolution with K·o output channels); example i's
K per-copy gradients are one product of its (K·o, P) output gradients with its patches; and its
clipped sums are one weight gradient of a convolution of the data with K·o output channels.
"""

from __future__ import annotations

import math

import torch
from opacus.grad_sample.conv import compute_conv_grad_sample
from torch import nn

from rdpest.auditing.dpsgd._rows import _repeated_block, _same_data

# The patches of one chunk of examples in conv2d_grad_norms, in floats (2 MiB of float32): on one
# CPU thread (torch 2.13, 7,200 rows of 8 x 4 x 4 inputs, 3 x 3 kernel, 16 outputs) chunks of
# 128 to 512 rows took 20 ms against 29 ms for all rows at once, 27 ms for chunks of 2,048.
CHUNK_FLOATS = 1 << 19


def _fits(conv: nn.Conv2d) -> bool:
    """Whether the gathered patches apply: an ungrouped zero-padded convolution with numeric
    padding (grouped ones are left to Opacus's sampler)."""
    return (
        type(conv) is nn.Conv2d
        and conv.groups == 1
        and not isinstance(conv.padding, str)
        and conv.padding_mode == "zeros"
    )


def conv2d_patches(
    conv: nn.Conv2d, activations: torch.Tensor, out_size: tuple[int, int], dtype: torch.dtype
) -> torch.Tensor:
    """Every output position's input patch, (n, P, kh·kw·c) in ``dtype``, P = h'·w' for the
    output size ``out_size`` = (h', w'); kernel axes in the order (kh, kw, c)."""
    n, c, h, w = activations.shape
    oh, ow = out_size
    (kh, kw), (sh, sw) = conv.kernel_size, conv.stride
    (dh, dw), (ph, pw) = conv.dilation, conv.padding
    if (
        c != conv.in_channels
        or (oh - 1) * sh + (kh - 1) * dh >= h + 2 * ph
        or (ow - 1) * sw + (kw - 1) * dw >= w + 2 * pw
    ):
        # The strided view below would read outside the padded input: it is never built.
        raise ValueError(
            f"an input of shape {tuple(activations.shape)} and an output of size {out_size} do "
            f"not fit {conv!r}"
        )
    padded = activations.new_zeros((n, h + 2 * ph, w + 2 * pw, c), dtype=dtype)
    padded[:, ph : ph + h, pw : pw + w].copy_(activations.permute(0, 2, 3, 1))
    s_n, s_h, s_w, _ = padded.stride()
    # patches[i, y, x, u, v, :] = padded[i, y·sh + u·dh, x·sw + v·dw, :], the input under the
    # kernel's tap (u, v) at output position (y, x); the reshape copies it.
    return padded.as_strided(
        (n, oh, ow, kh, kw, c), (s_n, s_h * sh, s_w * sw, s_h * dh, s_w * dw, 1)
    ).reshape(n, oh * ow, kh * kw * c)


def conv2d_grad_norms(
    conv: nn.Conv2d, activations: torch.Tensor, backprops: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Per-example norms of a convolution's weight and bias gradients, each (n,); the bias's
    are those of Σ_positions g whether or not ``conv`` has a bias. None where the gathered
    patches do not apply (see :func:`_fits`).

    Examples
    --------
    >>> conv = nn.Conv2d(2, 3, 3, padding=1, stride=2)
    >>> a, g = torch.randn(4, 2, 5, 5), torch.randn(4, 3, 3, 3)
    >>> w, b = conv2d_grad_norms(conv, a, g)
    >>> grads = [torch.autograd.grad(conv(a[i : i + 1]), conv.weight, g[i : i + 1])[0]
    ...          for i in range(4)]
    >>> bool(torch.allclose(w, torch.stack([t.norm() for t in grads]), rtol=1e-5))
    True
    """
    if not _fits(conv) or activations.ndim != 4 or backprops.ndim != 4:
        return None
    n, o = backprops.shape[:2]
    g = backprops.reshape(n, o, -1)
    weight = g.new_empty(n)
    # In chunks of examples whose patches take about CHUNK_FLOATS: a chunk's patches and
    # products stay in the CPU's cache, and no step allocates (and page-faults) them whole.
    per_example = g.shape[2] * math.prod(conv.kernel_size) * conv.in_channels
    chunk = max(1, CHUNK_FLOATS // per_example)
    for start in range(0, n, chunk):
        rows = slice(start, start + chunk)
        patches = conv2d_patches(conv, activations[rows], backprops.shape[2:], g.dtype)
        torch.linalg.vector_norm(torch.bmm(g[rows], patches), dim=(1, 2), out=weight[rows])
    return weight, torch.linalg.vector_norm(g.sum(dim=2), dim=1)


def shared_images(layer, x: torch.Tensor) -> torch.Tensor | None:
    """The data block that all K row blocks of ``x`` repeat, for a stacked convolution whose
    ``repeated_input`` is set and whose geometry the gathered patches take; else None."""
    if not _fits(layer.geometry) or x.ndim != 4:
        return None
    return _repeated_block(layer, x)


def shared_forward(layer, shared: torch.Tensor) -> torch.Tensor:
    """The K copies on the shared data, as rows (K·n, o, h', w').

    On the CPU, the data's patches (gathered once) times all copies' kernels in one matrix
    product (with the bias: ``addmm``): torch's convolution ran a first layer of one input
    channel several times slower than that product. Elsewhere, one convolution with K·o output
    channels. The bias is added apart from the convolution or the kernels' product, so that a
    backward pass that needs the bias's gradient alone (the one-pass norms') skips theirs.
    """
    g = layer.geometry
    k, o, n = layer.copies, layer.out_channels, shared.shape[0]
    if shared.device.type == "cpu":
        h, w = shared.shape[2:]
        (kh, kw), (sh, sw) = g.kernel_size, g.stride
        (dh, dw), (ph, pw) = g.dilation, g.padding
        size = (
            (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1,
            (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1,
        )
        patches = _shared_patches(layer, shared, size, layer.weight.dtype)
        kernels = layer.weight.permute(0, 1, 3, 4, 2).reshape(k * o, -1)  # taps as (kh, kw, c)
        patches = patches.reshape(-1, patches.shape[-1])
        if layer.bias is None:
            flat = patches @ kernels.t()  # (n·P, K·o)
        else:
            flat = torch.addmm(layer.bias.reshape(-1), patches, kernels.t())
        out = flat.view(n, *size, k, o).permute(3, 0, 4, 1, 2)  # (K, n, o, h', w')
    else:
        weight = layer.weight.reshape(k * o, *layer.weight.shape[2:])
        grouped = nn.functional.conv2d(
            shared, weight, stride=g.stride, padding=g.padding, dilation=g.dilation
        )
        if layer.bias is not None:
            grouped = grouped + layer.bias.reshape(1, -1, 1, 1)
        out = grouped.view(n, k, o, *grouped.shape[2:]).transpose(0, 1)
    return out.reshape(k * n, o, *out.shape[3:])  # a copy, laid out as rows


def _shared_patches(layer, shared: torch.Tensor, out_size, dtype) -> torch.Tensor:
    """The shared data's patches, gathered once per unchanged data tensor (as _rows caches)."""
    cached = layer.patch_cache
    if cached is not None and _same_data(cached[0], shared, cached[1]) and cached[2].dtype == dtype:
        return cached[2]
    patches = conv2d_patches(layer.geometry, shared, out_size, dtype)
    layer.patch_cache = (shared, shared._version, patches)
    return patches


def shared_norms(layer, shared: torch.Tensor, grouped: torch.Tensor) -> list[torch.Tensor]:
    """Per-row weight and bias gradient norms, (K·n,) each, of the first convolution from its
    output gradients laid out as its shared forward's output, (n, K·o, h', w')."""
    n, k = grouped.shape[0], layer.copies
    patches = _shared_patches(layer, shared, grouped.shape[2:], grouped.dtype)
    g = grouped.reshape(n, k * layer.out_channels, -1)
    # (n, K·o, kh·kw·c): example i's gradient in each copy, the copies' blocks one after another.
    weight = torch.bmm(g, patches).reshape(n, k, -1)
    bias = g.reshape(n, k, layer.out_channels, -1).sum(dim=3)
    # (n, K) norms, as rows k·n + i
    return [torch.linalg.vector_norm(t, dim=2).t().reshape(-1) for t in (weight, bias)]


def shared_clipped_sums(layer, shared: torch.Tensor, grouped: torch.Tensor, coeff) -> None:
    """Each copy's sum of clipped per-row gradients of the first convolution, from its output
    gradients in the shared forward's layout (n, K·o, h', w') and the clipping factors (K·n,)."""
    n, k, o = grouped.shape[0], layer.copies, layer.out_channels
    # In place, as StackedConv2d.clipped_sums: nothing else reads these gradients now.
    by_copy = grouped.view(n, k, o, *grouped.shape[2:])
    by_copy.mul_(coeff.to(grouped.dtype).reshape(k, n).t().reshape(n, k, 1, 1, 1))
    if layer.weight.requires_grad:
        g = layer.geometry
        grad = nn.grad.conv2d_weight(
            shared.to(grouped.dtype),
            (k * o, *layer.weight.shape[2:]),
            grouped,
            stride=g.stride,
            padding=g.padding,
            dilation=g.dilation,
        )
        layer.weight.grad = grad.reshape(layer.weight.shape).to(layer.weight.dtype)
    if layer.bias is not None and layer.bias.requires_grad:
        layer.bias.grad = by_copy.sum(dim=(0, 3, 4)).to(layer.bias.dtype)


def stacked_conv_norm_sample(layer, activations: list[torch.Tensor], backprops: torch.Tensor):
    """Per-row gradient norms of a stacked convolution for Opacus's ghost clipping, as a dict
    from its trainable parameters to (K·n,) norms; keeps the rows for the one-pass clipped sums
    where ``layer.keep_rows`` (:mod:`rdpest.auditing.dpsgd.one_pass`).

    Row r's gradient lies in its copy's slice and is the per-example gradient of a plain
    convolution of the same geometry at the same activations and output gradients: its norms
    come from the gathered patches (over the shared data for a first layer), or, for grouped
    convolutions and string padding, from the sums of squares of Opacus's own convolution
    per-sample gradients.
    """
    a = activations[0]
    geometry = layer.geometry
    pairs = [(geometry.weight, layer.weight), (geometry.bias, layer.bias)]
    shared = shared_images(layer, a)
    if shared is not None:
        # The output gradients in the shared forward's layout: one copy, used twice.
        grouped = layer._grouped(backprops)
        if layer.keep_rows:
            layer.kept_rows = (shared, grouped, True)
        fast = shared_norms(layer, shared, grouped)
    else:
        if layer.keep_rows:
            layer.kept_rows = (a.to(backprops.dtype), backprops, False)
        fast = conv2d_grad_norms(geometry, a, backprops)
    if fast is not None:
        return {
            stacked: norm
            for (_, stacked), norm in zip(pairs, fast, strict=True)
            if stacked is not None and stacked.requires_grad
        }
    for plain, stacked in pairs:
        if plain is not None:
            plain.requires_grad_(stacked.requires_grad)
    samples = compute_conv_grad_sample(geometry, activations, backprops)
    norms = {}
    for plain, stacked in pairs:
        if plain is not None and stacked.requires_grad and plain in samples:
            sample = samples[plain].flatten(1)
            norms[stacked] = (sample * sample).sum(dim=1).sqrt()
    return norms
