"""Row helpers of the stacked layers (:mod:`rdpest.auditing.dpsgd.stacking`): their stacked
parameters, row norms by the kernel that is fast for the rows' layout, and two caches keyed on an
unchanged input tensor (the first layer's input norms, and whether its K row blocks are the same
data)."""

from __future__ import annotations

import torch
from torch import nn


def _stack_parameters(stacked: nn.Module, layer: nn.Module) -> None:
    """Give ``stacked`` ``stacked.copies`` copies of ``layer``'s weight and bias, stacked on a new
    leading dimension. A frozen parameter stays frozen: Opacus then leaves it out of the norms,
    the noise and the step, as in a single run."""

    def copies(param: torch.Tensor) -> nn.Parameter:
        repeated = param.detach().unsqueeze(0).repeat(stacked.copies, *([1] * param.ndim))
        return nn.Parameter(repeated.clone(), requires_grad=param.requires_grad)

    stacked.weight = copies(layer.weight)
    if layer.bias is None:
        stacked.register_parameter("bias", None)
    else:
        stacked.bias = copies(layer.bias)


def _same_data(earlier: torch.Tensor, a: torch.Tensor, version: int) -> bool:
    """Whether ``a`` is the very same unchanged data as ``earlier`` was at ``version``: the same
    memory (a cache holding ``earlier`` keeps that memory from being handed to another tensor),
    shape, strides, type and device, and the same version counter, which every in-place change
    to that memory (through any view) increments. Writes that bypass the counter (through
    ``.data``, or a numpy array sharing the memory) go unseen: the training that sets these
    caches builds the repeated data itself and hands it to no one else."""
    return (
        earlier.data_ptr() == a.data_ptr()
        and earlier.shape == a.shape
        and earlier.stride() == a.stride()
        and earlier.dtype == a.dtype
        and earlier.device == a.device
        and a._version == version
    )


# The most outputs for which a stacked linear layer uses the shared-input products. They win where
# torch's batched product is slow, for narrow outputs: on one CPU thread (torch 2.13, 898 rows of
# 64 features, 32 and 64 copies) 2 to 4 times faster at 2 and 10 outputs; from 16 outputs on, the
# copy that a following layer makes of the output-first result costs more than they save.
SHARED_MAX_OUTPUTS = 10


def _repeated_block(layer, x: torch.Tensor) -> torch.Tensor | None:
    """The first of ``x``'s K row blocks when ``layer.repeated_input`` and all K blocks are equal
    (checked once per unchanged input tensor, as :func:`_input_row_norms` caches); else None.

    Only for an input that needs no gradient (data): products over the shared block send no
    gradient to the other blocks' rows.
    """
    if not layer.repeated_input or x.requires_grad or x.shape[0] % layer.copies:
        return None
    blocks = x.reshape(layer.copies, -1, *x.shape[1:])
    cached = layer.repeat_check
    if cached is not None and _same_data(cached[0], x, cached[1]):
        repeated = cached[2]
    else:
        repeated = bool(torch.equal(blocks, blocks[:1].expand_as(blocks)))
        layer.repeat_check = (x, x._version, repeated)
    return blocks[0] if repeated else None


def _shared_block(layer, x: torch.Tensor) -> torch.Tensor | None:
    """For a stacked linear layer: :func:`_repeated_block` of its (rows, features) input when the
    layer has at most :data:`SHARED_MAX_OUTPUTS` outputs; else None."""
    if layer.out_features > SHARED_MAX_OUTPUTS or x.ndim != 2:
        return None
    return _repeated_block(layer, x)


def _row_norms(rows: torch.Tensor) -> torch.Tensor:
    """The Euclidean norm of each row of a 2-D tensor, by the kernel that is fast for its layout
    on the CPU in torch 2.13: ``vector_norm`` for rows contiguous in memory, a sum of squares for
    transposed ones (whose ``vector_norm`` is about 20 times slower; a transposed cross-entropy
    gradient is one)."""
    if rows.stride(-1) == 1:
        return torch.linalg.vector_norm(rows, dim=-1)
    return (rows * rows).sum(dim=-1).sqrt()


def _input_row_norms(layer, a: torch.Tensor) -> torch.Tensor:
    """The row norms of a layer's input ``a``; where ``layer.cache_input_norms``, reused while
    ``a`` is the very same unchanged data as at the last step (:func:`_same_data`)."""
    if not layer.cache_input_norms:
        return _row_norms(a)
    cached = layer.input_norms
    if cached is not None:
        earlier, version, norms = cached
        if _same_data(earlier, a, version):
            return norms
    norms = _row_norms(a)
    layer.input_norms = (a, a._version, norms)
    return norms
