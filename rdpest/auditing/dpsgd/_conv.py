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
batched product over the examples, and its norm is taken without another copy. Off the CPU,
where an example's P² floats are fewer than its gradient's o·kh·kw·c, the norm comes from two
(P, P) Gram matrices instead (:func:`_gram_norms`). A layer whose maps are grouped
(:mod:`rdpest.auditing.dpsgd.stacked_conv`) hands its maps over as examples in the order
(example, copy), a view; its norms are laid back out as rows.

Shared data. A stack's first convolution sees the data repeated once per copy (row ``k·n + i``
is example i for copy k). Its patches are then the data's, the same at every full-batch step,
so they are gathered once; its K copies' outputs are one product of all the copies' kernels
with those patches (on the CPU; elsewhere one convolution with K·o output channels); row
k·n + i's gradient is the product of its (o, P) output gradients with example i's patches, one
batched product per copy on the rows as they are laid out; and, since a first layer has few input
channels, these per-row gradients are small and kept, and the clipped sums are their weighted sums.
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
# Off the CPU, chunks exist only to bound memory (1 GiB of float32 patches): each chunk costs a
# few kernel launches, and CPU-sized chunks made a stacked CNN's step on a GPU wait on hundreds
# of them.
DEVICE_CHUNK_FLOATS = 1 << 28
# The Gram-form norm's sum Σ (GᵀG)∘(UUᵀ) rounds with an error of a few ulps of Σ |GᵀG|∘|UUᵀ|,
# at most ‖GᵀG‖_F·‖UUᵀ‖_F (Cauchy–Schwarz): where the squared norm is below this fraction of that
# bound (gradients that nearly cancel over positions), the example's norm is recomputed from its
# gradient, so a cancellation costs at most about 1/GRAM_CANCELLATION ulps of relative error.
GRAM_CANCELLATION = 1e-2


def _on_host(t: torch.Tensor) -> bool:
    """Whether ``t`` lives on the CPU, which takes the CPU's forms of the products here (the other
    devices' forms are exercised on the CPU in tests by replacing this predicate)."""
    return t.device.type == "cpu"


def rows_to_grouped(rows: torch.Tensor, copies: int) -> torch.Tensor:
    """A stack's (K·n, c, ...) rows as grouped maps (n, K·c, ...): copy k's rows become channel
    group k (a copy)."""
    return (
        rows.reshape(copies, -1, *rows.shape[1:])
        .transpose(0, 1)
        .reshape(-1, copies * rows.shape[1], *rows.shape[2:])
    )


def grouped_to_rows(grouped: torch.Tensor, copies: int) -> torch.Tensor:
    """Grouped maps (n, K·c, ...) as the stack's rows (K·n, c, ...), the inverse of
    :func:`rows_to_grouped` (a copy)."""
    n = grouped.shape[0]
    per_copy = grouped.reshape(n, copies, -1, *grouped.shape[2:]).transpose(0, 1)
    return per_copy.reshape(copies * n, -1, *grouped.shape[2:])


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
    conv: nn.Conv2d,
    activations: torch.Tensor,
    backprops: torch.Tensor,
    gram: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Per-example norms of a convolution's weight and bias gradients, each (n,); the bias's
    are those of Σ_positions g whether or not ``conv`` has a bias. None where the gathered
    patches do not apply (see :func:`_fits`).

    ``gram`` (default: off the CPU, where P² < o·kh·kw·c) takes the weight's norm from the
    examples' (P, P) Gram matrices instead of their gradients (see :func:`_gram_norms`).

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
    positions, taps = g.shape[2], math.prod(conv.kernel_size) * conv.in_channels
    host = _on_host(g)
    if gram is None:
        gram = not host and positions * positions < o * taps
    if host:
        chunk = max(1, CHUNK_FLOATS // (positions * taps))
    else:  # every per-example buffer counts: the patches, and three (P, P) or one (o, d) product
        products = 3 * positions * positions if gram else o * taps
        chunk = max(1, DEVICE_CHUNK_FLOATS // (positions * taps + products))
    for start in range(0, n, chunk):
        rows = slice(start, start + chunk)
        patches = conv2d_patches(conv, activations[rows], backprops.shape[2:], g.dtype)
        if gram:
            _gram_norms(g[rows], patches, out=weight[rows])
        else:
            torch.linalg.vector_norm(torch.bmm(g[rows], patches), dim=(1, 2), out=weight[rows])
    return weight, torch.linalg.vector_norm(g.sum(dim=2), dim=1)


def _gram_norms(g: torch.Tensor, patches: torch.Tensor, out: torch.Tensor) -> None:
    """‖G·U‖_F per example, for output gradients G (n, o, P) and patches U (n, P, d), written
    to ``out``: ‖G·U‖_F² = trace(Gᵀ·G·U·Uᵀ) = Σ_{p,q} (GᵀG)_{pq} (UUᵀ)_{pq}, the "ghost norm"
    of Li et al. 2022 (which Opacus uses for linear layers on sequences), over two (P, P)
    matrices per example instead of the (o, d) gradient: fewer floats written and read where
    P² < o·d. The sum squares the products' conditioning: an example whose square is below
    GRAM_CANCELLATION of its rounding scale takes the explicit product instead."""
    gram_g = torch.bmm(g.transpose(1, 2), g)
    gram_u = torch.bmm(patches, patches.transpose(1, 2))
    squares = (gram_g * gram_u).sum(dim=(1, 2))
    scale = torch.linalg.matrix_norm(gram_g) * torch.linalg.matrix_norm(gram_u)
    torch.sqrt(squares.clamp(min=0), out=out)
    unsure = torch.nonzero(squares < GRAM_CANCELLATION * scale).squeeze(1)
    if len(unsure):
        out[unsure] = torch.linalg.vector_norm(torch.bmm(g[unsure], patches[unsure]), dim=(1, 2))


def shared_images(layer, x: torch.Tensor) -> torch.Tensor | None:
    """The data block that all K row blocks of ``x`` repeat, for a stacked convolution whose
    ``repeated_input`` is set and whose geometry the gathered patches take; else None."""
    if not _fits(layer.geometry) or x.ndim != 4:
        return None
    return _repeated_block(layer, x)


def shared_forward(layer, shared: torch.Tensor) -> torch.Tensor:
    """The K copies on the shared data, as rows (K·n, o, h', w'), or grouped (n, K·o, h', w')
    where ``layer.grouped_output``.

    On the CPU, the data's patches (gathered once) times all copies' kernels in one matrix
    product (with the bias: ``addmm``): torch's convolution ran a first layer of one input
    channel several times slower than that product. Elsewhere, one convolution with K·o output
    channels. The bias is added apart from the convolution or the kernels' product, so that a
    backward pass that needs the bias's gradient alone (the one-pass norms') skips theirs.
    """
    g = layer.geometry
    k, o, n = layer.copies, layer.out_channels, shared.shape[0]
    if _on_host(shared):
        h, w = shared.shape[2:]
        (kh, kw), (sh, sw) = g.kernel_size, g.stride
        (dh, dw), (ph, pw) = g.dilation, g.padding
        size = (
            (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1,
            (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1,
        )
        # (kh·kw·c, n·P): laid out so that the product below is (K·o, n·P), whose layout change
        # to rows moves runs of P contiguous floats (an (n·P, K·o) product's would move single
        # floats, several times slower on the CPU).
        patches = _shared_patches(layer, shared, size, layer.weight.dtype, transposed=True)
        kernels = layer.weight.permute(0, 1, 3, 4, 2).reshape(k * o, -1)  # taps as (kh, kw, c)
        if layer.bias is None:
            flat = kernels @ patches  # (K·o, n·P)
        else:
            flat = torch.addmm(layer.bias.reshape(-1, 1), kernels, patches)
        if layer.grouped_output:  # (n, K·o, h', w'), as runs of P floats too
            return flat.view(k, o, n, *size).permute(2, 0, 1, 3, 4).reshape(n, k * o, *size)
        out = flat.view(k, o, n, *size).transpose(1, 2)  # (K, n, o, h', w')
        return out.reshape(k * n, o, *size)  # a copy, laid out as rows
    weight = layer.weight.reshape(k * o, *layer.weight.shape[2:])
    grouped = nn.functional.conv2d(
        shared, weight, stride=g.stride, padding=g.padding, dilation=g.dilation
    )
    if layer.bias is not None:
        grouped = grouped + layer.bias.reshape(1, -1, 1, 1)
    return grouped if layer.grouped_output else grouped_to_rows(grouped, k)


def _shared_patches(
    layer, shared: torch.Tensor, out_size, dtype, transposed: bool = False
) -> torch.Tensor:
    """The shared data's patches, (n, P, kh·kw·c), gathered once per unchanged data tensor (as
    _rows caches); ``transposed``: the same as one contiguous (kh·kw·c, n·P) matrix, also kept."""
    cached = layer.patch_cache
    if not (
        cached is not None and _same_data(cached[0], shared, cached[1]) and cached[2].dtype == dtype
    ):
        patches = conv2d_patches(layer.geometry, shared, out_size, dtype)
        cached = layer.patch_cache = (shared, shared._version, patches, None)
    if not transposed:
        return cached[2]
    if cached[3] is None:
        flat = cached[2].reshape(-1, cached[2].shape[-1])
        cached = layer.patch_cache = (*cached[:3], flat.t().contiguous())
    return cached[3]


def shared_gradients(
    layer, shared: torch.Tensor, backprops: torch.Tensor, batched: bool | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every row's gradients of the first convolution, from its output gradients as rows
    (K·n, o, h', w') or grouped (n, K·o, h', w') as ``layer.grouped_output`` says: the
    weight's (K, n, o, kh·kw·c), kernel axes in the order (kh, kw, c), and the bias's (K, n, o),
    whether or not the layer has a bias.

    A first layer sees few input channels, so these are small (o·kh·kw·c floats per row) and
    are kept for the clipped sums instead of another pass over the output gradients.
    ``batched`` (default: off the CPU) forms them in one product rather than one per copy;
    grouped output gradients take that product on every device, since they are laid out for it.
    """
    k, o, n = layer.copies, layer.out_channels, shared.shape[0]
    patches = _shared_patches(layer, shared, backprops.shape[2:], backprops.dtype)
    if layer.grouped_output:  # example i's rows side by side: (n, K·o, P) as laid out
        by_example = torch.bmm(backprops.reshape(n, k * o, -1), patches)
        weight = by_example.view(n, k, o, -1).transpose(0, 1).contiguous()
        return weight, backprops.reshape(n, k, o, -1).sum(dim=3).transpose(0, 1)
    g = backprops.reshape(k, n, o, -1)  # copy k's block of rows, as laid out
    if not _on_host(g) if batched is None else batched:
        # One product for all copies, example by example: (K·o, P) output gradients of example
        # i's rows times its patches; a loop over the copies waited on K launches per step.
        by_example = torch.bmm(g.transpose(0, 1).reshape(n, k * o, -1), patches)
        weight = by_example.view(n, k, o, -1).transpose(0, 1).contiguous()
        return weight, g.sum(dim=3)
    weight = g.new_empty(k, n, o, patches.shape[2])
    for block in range(k):  # row k·n + i: its output gradients (o, P) times example i's patches
        torch.bmm(g[block], patches, out=weight[block])
    return weight, g.sum(dim=3)


def shared_clipped_sums(layer, weight: torch.Tensor, bias: torch.Tensor, coeff) -> None:
    """Each copy's sum of clipped per-row gradients of the first convolution: Σ_i c_{k·n+i}
    times row k·n + i's gradients (from :func:`shared_gradients`), for clipping factors c (K·n,)."""
    k, n, o = weight.shape[:3]
    factors = coeff.to(weight.dtype).reshape(k, 1, n)
    if layer.weight.requires_grad:
        kh, kw = layer.geometry.kernel_size
        summed = torch.bmm(factors, weight.reshape(k, n, -1)).reshape(k, o, kh, kw, -1)
        layer.weight.grad = summed.permute(0, 1, 4, 2, 3).contiguous().to(layer.weight.dtype)
    if layer.bias is not None and layer.bias.requires_grad:
        layer.bias.grad = torch.bmm(factors, bias).reshape(k, o).to(layer.bias.dtype)


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
    shared = None if layer.grouped_input else shared_images(layer, a)
    as_rows = _same_order
    if shared is not None:
        weight, bias = shared_gradients(layer, shared, backprops)
        if layer.keep_rows:
            layer.kept_rows = (weight, bias, True)
        fast = [
            torch.linalg.vector_norm(t.reshape(-1, t[0, 0].numel()), dim=1) for t in (weight, bias)
        ]
    else:
        if layer.keep_rows:
            layer.kept_rows = (a.to(backprops.dtype), backprops, False)
        a, backprops, as_rows = _as_examples(layer, a, backprops)
        fast = conv2d_grad_norms(geometry, a, backprops)
    if fast is not None:
        return {
            stacked: as_rows(norm)
            for (_, stacked), norm in zip(pairs, fast, strict=True)
            if stacked is not None and stacked.requires_grad
        }
    for plain, stacked in pairs:
        if plain is not None:
            plain.requires_grad_(stacked.requires_grad)
    samples = compute_conv_grad_sample(geometry, [a], backprops)
    norms = {}
    for plain, stacked in pairs:
        if plain is not None and stacked.requires_grad and plain in samples:
            sample = samples[plain].flatten(1)
            norms[stacked] = as_rows((sample * sample).sum(dim=1).sqrt())
    return norms


def _same_order(norms: torch.Tensor) -> torch.Tensor:
    return norms


def _as_examples(layer, a: torch.Tensor, backprops: torch.Tensor):
    """A stacked convolution's input and output gradients as one batch of examples in the same
    order, and the function that lays per-example values of that order out as rows.

    Both as rows: returned as they are. Otherwise example-major, index i·K + k for example i of
    copy k: grouped maps (n, K·c, h, w) are that batch as laid out (a view), rows are transposed
    to it (a copy; only where one side is grouped and the other is not).
    """
    k = layer.copies
    if not (layer.grouped_input or layer.grouped_output):
        return a, backprops, _same_order

    def examples(t: torch.Tensor, grouped: bool) -> torch.Tensor:
        grouped_maps = t if grouped else rows_to_grouped(t, k)
        return grouped_maps.reshape(grouped_maps.shape[0] * k, -1, *t.shape[2:])

    n = backprops.shape[0] if layer.grouped_output else backprops.shape[0] // k

    def as_rows(values: torch.Tensor) -> torch.Tensor:
        return values.view(n, k).t().reshape(-1)

    return examples(a, layer.grouped_input), examples(backprops, layer.grouped_output), as_rows
