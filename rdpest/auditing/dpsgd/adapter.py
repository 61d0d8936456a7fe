"""Audit your own Opacus training: an existing training function as an audit's score function.

- :func:`with_canary`: a torch data set with one example (the canary) appended, as a
  ``ConcatDataset`` that works with any ``DataLoader`` (Opacus's ``DPDataLoader`` included).
- :class:`OpacusTraining`: turns ``train_fn(dataset, seed) -> model`` (your own
  ``PrivacyEngine``, optimizer, sampling and augmentation) into the picklable
  ``score_fn(include_canary, seed) -> float`` that :class:`rdpest.auditing.Auditor` calls: it
  trains on the data set with or without the canary and returns the canary's loss under the
  trained model.
- :func:`epsilon_alpha_from_opacus`: the ε_α that Opacus's RDP accountant claims for the steps it
  recorded, the claim the audit tests.

The sample-rate trap: Opacus's ``make_private`` accounts with the sample rate
``1 / len(data_loader)``. A loader of batch size B over N examples has ceil(N / B) batches, so
adding the canary can change the rate (64 examples in batches of 8: q = 1/8; 65: q = 1/9), and
the two neighbouring trainings are then accounted differently. :class:`OpacusTraining` warns
(``UserWarning`` naming both rates) when the accountants of the two arms disagree; the fix is a
sample rate fixed in advance from the data set WITHOUT the canary, e.g.
``DPDataLoader(dataset, sample_rate=B / N)`` passed to ``make_private(poisson_sampling=False)``.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from rdpest.auditing.dpsgd.canaries import canary_loss
from rdpest.auditing.identity import callable_identity
from rdpest.stats.conversions import dpsgd_epsilon_alpha
from rdpest.utils.io import array_digest
from rdpest.utils.torch_helpers import forked_rng, resolve_device
from rdpest.utils.validation import check_alpha, check_seed

__all__ = ["OpacusTraining", "epsilon_alpha_from_opacus", "with_canary"]


def _as_numpy(value) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def _numbers(value, what: str) -> np.ndarray:
    """The canary's ``what`` as a numeric array, or a ValueError: it is never coerced from text,
    and never NaN or inf."""
    if isinstance(value, str | bytes):
        raise ValueError(f"the canary's {what} must be numbers, got {value!r}")
    try:
        array = _as_numpy(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the canary's {what} must be numbers ({exc})") from None
    if array.dtype == object or array.dtype.kind not in "biuf":
        raise ValueError(f"the canary's {what} must be numbers, got dtype {array.dtype}")
    bad = ~np.isfinite(array) if array.dtype.kind == "f" else np.zeros(array.shape, bool)
    if bad.any():
        raise ValueError(
            f"the canary's {what} holds {int(bad.sum())} NaN or inf value(s) of {array.size}"
        )
    return array


def _exactly(array: np.ndarray, integral: bool, boolean: bool, what: str) -> None:
    """Refuse a value that the data set's type would silently change: a fraction into an integer
    type (2.7 would train as 2), a bool into a number type or a number into a bool type."""
    if boolean != (array.dtype.kind == "b"):
        kind = "bool" if boolean else "numbers"
        raise ValueError(
            f"the canary's {what} must be {kind}, as the data set's are, got dtype {array.dtype}"
        )
    if integral and array.dtype.kind == "f" and not np.array_equal(array, np.round(array)):
        fractions = array[array != np.round(array)]
        raise ValueError(
            f"the canary's {what} must be whole numbers, as the data set's are, got "
            f"{fractions.size} fraction(s), the first {fractions.flat[0]:g}"
        )


def _in_range(array: np.ndarray, dtype, integral: bool, what: str) -> None:
    """Refuse values the data set's type cannot hold: they would wrap (300 into uint8 is 44,
    2**40 into int32 is 0) or overflow to inf (1e39 into float32)."""
    if array.size == 0 or array.dtype.kind == "b":
        return
    if integral:
        info = torch.iinfo(dtype) if isinstance(dtype, torch.dtype) else np.iinfo(dtype)
    else:
        info = torch.finfo(dtype) if isinstance(dtype, torch.dtype) else np.finfo(dtype)
    # As Python numbers, compared exactly: a float 2**63 equals int64's max once that is rounded
    # to a float, and numpy casts the bound to a float16 canary's type (overflow warnings).
    low, high = array.min().item(), array.max().item()
    if low < int(info.min) or (high >= int(info.max) + 1 if integral else high > float(info.max)):
        raise ValueError(
            f"the canary's {what} holds values from {low} to {high}, outside what the data set's "
            f"type {dtype} holds ({info.min} to {info.max}): it would change on conversion"
        )


def _like(value, template, what: str):
    """``value`` converted to the type (tensor dtype, or Python/numpy number) of ``template``,
    the data set's first example's ``what``; a ValueError where that would change the value
    (text, NaN or inf, a fraction into integers, a bool, a shape other than the template's; a
    flat value with the template's number of elements is laid out in its shape)."""
    if isinstance(template, torch.Tensor | np.ndarray):
        array = _numbers(value, what)
        if isinstance(template, torch.Tensor):
            dtype, integral = template.dtype, not template.dtype.is_floating_point
            boolean = dtype == torch.bool
        else:
            dtype, integral = template.dtype, template.dtype.kind in "biu"
            boolean = template.dtype.kind == "b"
        _exactly(array, integral, boolean, what)
        shape = tuple(template.shape)
        if array.shape != shape:
            if array.ndim != 1 or array.size != int(np.prod(shape, dtype=np.int64)):
                raise ValueError(
                    f"the canary's {what} has shape {array.shape}, but the data set's examples "
                    f"have shape {shape} (a flat value of {int(np.prod(shape, dtype=np.int64))} "
                    "numbers is laid out in that shape)"
                )
            array = array.reshape(shape)
        _in_range(array, dtype, integral and not boolean, what)
        if isinstance(template, torch.Tensor):
            return torch.as_tensor(array).to(dtype)
        return array.astype(dtype)
    if isinstance(template, numbers.Number) and not isinstance(template, complex):
        array = _numbers(value, what)
        if array.size != 1:
            raise ValueError(
                f"the canary's {what} must be one number, as the data set's are, got shape "
                f"{array.shape}"
            )
        integral = isinstance(template, numbers.Integral)
        _exactly(
            array, integral and not isinstance(template, bool), isinstance(template, bool), what
        )
        item = array.reshape(()).item()
        if isinstance(template, bool):
            return bool(item)
        return int(item) if integral else item
    return value


class _OneExample(torch.utils.data.Dataset):
    """A data set of exactly one example ``(x, y)``."""

    def __init__(self, x, y):
        self.x = x
        self.y = y

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index):
        if index not in (0, -1):
            raise IndexError(f"index {index} out of range for a data set of one example")
        return self.x, self.y


class CanaryDataset(torch.utils.data.ConcatDataset):
    """``dataset`` followed by one example, the canary (see :func:`with_canary`)."""

    def __init__(self, dataset, x, y):
        super().__init__([dataset, _OneExample(x, y)])
        self.dataset = dataset
        self.canary = (x, y)


def with_canary(dataset, x, y) -> torch.utils.data.Dataset:
    """The data set ``dataset`` with the example ``(x, y)`` appended as its last item.

    Parameters
    ----------
    dataset : torch.utils.data.Dataset
        A map-style data set (with ``__len__``) whose items are pairs ``(input, label)``.
    x, y : array-like, tensor or number
        The canary's input and label. They are converted to the types of the data set's first
        example (a tensor of its dtype and shape, or an int), so a ``DataLoader``'s default
        collation batches the canary with the other examples. The canary is returned as
        given: a transform or augmentation inside ``dataset`` is not applied to it (apply it
        in the training loop if the canary should see it too).

    Returns
    -------
    torch.utils.data.ConcatDataset
        A view (nothing is copied) of ``len(dataset) + 1`` examples; picklable when ``dataset``
        is, so it travels to ``DataLoader`` workers.

    Raises
    ------
    ValueError
        If ``dataset`` is not a non-empty map-style data set of pairs, or the canary would change
        on conversion: an input of another shape than the data set's (a flat one of as many
        numbers is laid out in it), text, NaN or inf, a fraction where the data set has
        integers (labels, integer images), or a bool where it has numbers.

    Examples
    --------
    >>> from torch.utils.data import TensorDataset
    >>> data = TensorDataset(torch.zeros(4, 3), torch.tensor([0, 1, 0, 1]))
    >>> full = with_canary(data, [1.0, 2.0, 3.0], 1)
    >>> len(full), full[4][0].tolist(), full[4][1].dtype
    (5, [1.0, 2.0, 3.0], torch.int64)
    """
    if isinstance(dataset, torch.utils.data.IterableDataset) or not hasattr(dataset, "__len__"):
        raise ValueError(
            "dataset must be a map-style torch Dataset with __len__ (an IterableDataset has no "
            f"place to append the canary), got {type(dataset).__name__}"
        )
    if len(dataset) == 0:
        raise ValueError("dataset is empty")
    first = dataset[0]
    if not isinstance(first, tuple | list) or len(first) != 2:
        raise ValueError(
            "the data set's items must be pairs (input, label) for the canary (x, y) to join them"
        )
    x = _like(x, first[0], "input")
    y = _like(y, first[1], "label")
    _check_label(dataset, y)
    return CanaryDataset(dataset, x, y)


def _check_label(dataset, y) -> None:
    """A warning when a TensorDataset's integer class labels never take the canary's (one
    integer): a model with one output per class of the data cannot train on it, and a negative
    one is refused by cross-entropy or ignored (-100, its ignore_index). Labels of other kinds
    (one-hot, ±1 with a loss of your own, other data sets) are not checked."""
    tensors = getattr(dataset, "tensors", ())
    if not (isinstance(dataset, torch.utils.data.TensorDataset) and len(tensors) == 2):
        return
    labels = tensors[1]
    if labels.ndim != 1 or labels.is_floating_point() or labels.is_complex():
        return
    if labels.dtype == torch.bool:
        return
    value = int(y)  # _like made it what the items hold: a 0-d integer tensor
    low, high = int(labels.min()), int(labels.max())
    if not low <= value <= high:
        warnings.warn(
            f"the canary's label {value} lies outside the data set's labels ({low} to {high}): "
            "a model with one output per class of the data cannot train on it (cross-entropy "
            "refuses a negative label, or ignores the canary at -100)",
            UserWarning,
            stacklevel=3,
        )


# ------------------------------------------------------------------------------- the claim


def _history(source) -> list[tuple[float, float, int]]:
    """The (noise_multiplier, sample_rate, steps) entries of an engine, accountant or list."""
    from opacus.accountants import IAccountant, RDPAccountant

    if isinstance(source, list | tuple):
        if not all(isinstance(entry, list | tuple) for entry in source):
            raise ValueError(
                "a history must be a list of (noise_multiplier, sample_rate, steps) entries, "
                f"got {source!r}" + (" (one entry: wrap it in a list)" if len(source) == 3 else "")
            )
        return [tuple(entry) for entry in source]
    accountant = getattr(source, "accountant", source)  # a PrivacyEngine holds its accountant
    if not isinstance(accountant, IAccountant):
        raise ValueError(
            "expected an Opacus PrivacyEngine, an accountant or its history (a list of "
            f"(noise_multiplier, sample_rate, steps)), got {type(source).__name__}"
        )
    if not isinstance(accountant, RDPAccountant):
        raise ValueError(
            f"the accountant is Opacus's {accountant.mechanism()!r} accountant, whose claim is an "
            "(epsilon, delta) pair, not the RDP epsilon_alpha an audit tests; train with "
            'PrivacyEngine(accountant="rdp"), or pass the steps it recorded explicitly, '
            "epsilon_alpha_from_opacus(engine.accountant.history, alpha), for the RDP of the same "
            "steps by Opacus's RDP analysis"
        )
    return [tuple(entry) for entry in accountant.history]


def epsilon_alpha_from_opacus(source, alpha: float) -> float:
    """The ε_α that Opacus's RDP accountant claims for the steps it recorded.

    Opacus's RDP analysis of the sampled Gaussian mechanism
    (``opacus.accountants.analysis.rdp.compute_rdp``, as in
    :func:`rdpest.stats.conversions.dpsgd_epsilon_alpha`) at the order ``alpha`` for each entry
    (noise multiplier σ, sample rate q, steps T) of the accountant's history, summed over the
    entries (RDP composes additively).

    Parameters
    ----------
    source : opacus.PrivacyEngine, opacus.accountants.RDPAccountant or list of tuples
        After training: the engine (its ``accountant``), an RDP accountant, or a history, a list
        of ``(noise_multiplier, sample_rate, steps)``. Another accountant (``"prv"``, ``"gdp"``)
        is refused: its claim is not an ε_α. Its ``history`` records the same steps and may be
        passed as a list to get their RDP by Opacus's RDP analysis.
    alpha : float
        The Rényi order, > 1.

    Returns
    -------
    float
        The claimed ε_α (T·α/(2σ²) for full-batch training, q = 1).

    Raises
    ------
    ValueError
        For a non-RDP accountant, an empty history (nothing trained yet) or an entry that is not
        a valid (σ > 0, q in (0, 1], T >= 1).

    Examples
    --------
    >>> from opacus.accountants import RDPAccountant
    >>> accountant = RDPAccountant()
    >>> for _ in range(8):
    ...     accountant.step(noise_multiplier=2.0, sample_rate=1.0)
    >>> epsilon_alpha_from_opacus(accountant, alpha=2.0)  # 8 * 2 / (2 * 2**2)
    2.0
    """
    alpha = check_alpha(alpha)
    history = _history(source)
    if not history:
        raise ValueError(
            "the accountant has recorded no steps: call epsilon_alpha_from_opacus after training"
        )
    total = 0.0
    for i, entry in enumerate(history):
        if len(entry) != 3:
            raise ValueError(
                f"history entry {i} is {entry!r}, not (noise_multiplier, sample_rate, steps)"
            )
        sigma, rate, steps = entry
        try:
            total += dpsgd_epsilon_alpha(sigma, rate, steps, alpha)
        except ValueError as exc:
            raise ValueError(f"history entry {i} {entry!r}: {exc}") from None
    return float(total)


# ------------------------------------------------------------------------------- the adapter


def _split_output(out, where: str):
    """The trained module and the accountant (or None) of what ``train_fn`` returned."""
    from opacus.accountants import IAccountant

    accountant = None
    if isinstance(out, tuple | list):
        if len(out) != 2:
            raise ValueError(
                f"{where} returned {len(out)} values; return a model, or (model, privacy_engine)"
            )
        out, extra = out
        accountant = getattr(extra, "accountant", extra)
        if not isinstance(accountant, IAccountant):
            raise ValueError(
                f"{where} returned (model, {type(extra).__name__}); the second value must be an "
                "Opacus PrivacyEngine or accountant"
            )
    if not isinstance(out, nn.Module):
        raise ValueError(
            f"{where} must return the trained torch.nn.Module (or (model, privacy_engine)), got "
            f"{type(out).__name__}"
        )
    return out, accountant


def _dataset_digest(dataset):
    """A digest of a ``TensorDataset``'s tensors, a data set's own ``describe()``, else None."""
    describe = getattr(dataset, "describe", None)
    if callable(describe):
        return describe()
    if isinstance(dataset, torch.utils.data.TensorDataset):
        return array_digest(*[_as_numpy(t) for t in dataset.tensors])
    return None


class OpacusTraining:
    """Your own Opacus training as an audit's score function ``(include_canary, seed) -> loss``.

    Each call trains once with ``train_fn`` on ``dataset``, or on ``with_canary(dataset, *canary)``
    when ``include_canary`` is true, and returns the canary's loss under the trained model. Pass
    the instance to :class:`rdpest.auditing.Auditor`.

    Parameters
    ----------
    train_fn : callable ``(dataset, seed) -> torch.nn.Module or (module, privacy_engine)``
        Trains from scratch on the data set it is given (build the ``DataLoader`` from it) and
        returns the trained model; returning ``(model, privacy_engine)`` (or the accountant)
        lets the adapter check the privacy accounting of the two arms (see below). It should
        draw its randomness from ``seed``; torch's global generator is also forked and seeded
        with ``seed`` around the call, so one that ignores the seed is still reproducible (numpy's
        and Python's generators are not touched). Define it at module level: the instance is
        then picklable (``n_jobs != 1``) and identified in a run store by the function's
        qualified name and code.
    dataset : torch.utils.data.Dataset
        The training data WITHOUT the canary, items ``(input, label)``.
    canary : tuple (x, y)
        The canary's input (shaped like one input of ``dataset``) and label.
    loss_fn : callable ``(model, x, y) -> float``, optional
        The score of the trained model on the canary; default the cross-entropy of ``(x, y)``
        (:func:`~rdpest.auditing.dpsgd.canaries.canary_loss`, in eval mode). ``x`` and ``y`` are
        the canary as the data set's items hold it.
    data_id : str or dict, optional
        Names the data set in a run store. Default: a digest of a ``TensorDataset``'s tensors
        (or the data set's own ``describe()``); other data sets need it for a store.
    device : {"auto", "cpu", "cuda"} or "cuda:N", default "auto"
        Which CUDA device's global generator is forked and seeded with the run's seed around
        ``train_fn``, besides the CPU's (cuDNN is made deterministic there too): "auto" the
        current one where CUDA is available, so that a training that draws its noise from the
        global CUDA generator is reproducible; "cpu" none.

    Notes
    -----
    The sample-rate trap: ``make_private`` accounts with the rate ``1 / len(data_loader)``, which
    adding the canary can change. When ``train_fn`` returns the engine, a call records the
    accountant's history of its arm, and the first call of the other arm that disagrees warns
    (``UserWarning`` naming both); :meth:`check_accounting` trains both arms once and warns
    likewise (the workers of ``n_jobs != 1`` do not report warnings, so check first). Fix it by
    fixing the rate from the data set without the canary:
    ``DPDataLoader(dataset, sample_rate=batch_size / n_without_canary)`` and
    ``make_private(..., poisson_sampling=False)``.

    Examples
    --------
    See the guide page "Audit your own Opacus training".
    """

    def __init__(
        self,
        train_fn: Callable,
        dataset,
        canary: tuple,
        *,
        loss_fn: Callable | None = None,
        data_id: str | dict | None = None,
        device: str = "auto",
    ):
        if not callable(train_fn):
            raise ValueError(f"train_fn must be callable, got {train_fn!r}")
        if loss_fn is not None and not callable(loss_fn):
            raise ValueError(f"loss_fn must be None or callable, got {loss_fn!r}")
        if not isinstance(canary, tuple | list) or len(canary) != 2:
            raise ValueError("canary must be a tuple (x, y)")
        if data_id is not None and not isinstance(data_id, str | dict):
            raise ValueError(f"data_id must be None, a str or a dict, got {data_id!r}")
        resolve_device(device)  # fail early on an unavailable device
        self.train_fn = train_fn
        self.dataset = dataset
        self.loss_fn = loss_fn
        self.data_id = data_id
        self.device = device
        # Validates the data set and the canary, and holds the canary as the items hold it.
        self._with_canary = with_canary(dataset, canary[0], canary[1])
        self.canary = self._with_canary.canary
        self._histories: dict[bool, list] = {}
        self._warned = False
        self._last_accountant = None

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_histories"] = {}  # what one process saw is not another's
        state["_warned"] = False
        state["_last_accountant"] = None
        return state

    def _train(self, include_canary: bool, seed: int):
        if not isinstance(include_canary, bool | np.bool_):
            raise ValueError(f"include_canary must be a bool, got {include_canary!r}")
        seed = check_seed(seed)
        data = self._with_canary if include_canary else self.dataset
        with forked_rng(seed, resolve_device(self.device)):
            out = self.train_fn(data, seed)
        model, accountant = _split_output(out, "train_fn")
        if accountant is not None and accountant is self._last_accountant:
            raise ValueError(
                "train_fn returned the same Opacus accountant as the run before: one "
                "PrivacyEngine kept across runs adds every run's steps to its history, so the "
                "accounting (and a claim read from it) grows with the number of runs. Create the "
                "PrivacyEngine inside train_fn, a new one in every call"
            )
        self._last_accountant = accountant  # held, so no later object can take its identity
        history = None if accountant is None else [tuple(e) for e in accountant.history]
        return model, history

    def score(self, model: nn.Module) -> float:
        """The canary's score under a trained ``model`` (``loss_fn``, or its cross-entropy)."""
        x, y = self.canary
        if self.loss_fn is not None:
            return self.loss_fn(model, x, y)
        return canary_loss(model, x, y)

    def __call__(self, include_canary: bool, seed: int) -> float:
        """Train once (with or without the canary) and return the canary's score."""
        model, history = self._train(include_canary, seed)
        if history is not None:
            self._histories.setdefault(bool(include_canary), history)
            if len(self._histories) == 2 and not self._warned:
                self._warned = _warn_if_different(self._histories[False], self._histories[True])
        return self.score(model)

    def check_accounting(self, seed: int = 0) -> tuple[list, list]:
        """Train without the canary twice and with it once; warn if the two arms' accounting
        differs, or if the same seed gave two different scores.

        The first training also scores the canary, so (with the default cross-entropy score) a
        label outside the model's classes is a ``ValueError`` here, not an error inside torch in
        the with-canary training. The second shows whether ``train_fn`` is reproducible from its
        seed (a draw from numpy's or Python's global generator is not): runs that are not cannot
        be repeated, and a store resumed from them mixes runs no one can check. Returns the two
        accountants' histories (lists of ``(noise_multiplier, sample_rate, steps)``), without
        the canary first. Raises ``ValueError`` if ``train_fn`` does not return
        ``(model, privacy_engine)``.
        """
        model, without = self._train(False, seed)
        _require_history(without)
        first = self.score(model)  # a label outside the model's classes fails here
        second = self.score(self._train(False, seed)[0])
        if first != second and first == first:  # NaN is left to the audit, which refuses it
            warnings.warn(
                f"train_fn gave two different scores for seed {seed} ({first!r} and {second!r}): "
                "it draws from a generator it does not seed from its seed (numpy's or Python's "
                "global ones, a DataLoader's workers, ...), so its runs cannot be repeated and a "
                "resumed store mixes runs no one can check; seed every generator from the seed "
                "(on a GPU, kernels that are not deterministic differ in the last bits too)",
                UserWarning,
                stacklevel=2,
            )
        with_ = _require_history(self._train(True, seed)[1])
        _warn_if_different(without, with_)
        return without, with_

    def describe(self) -> dict:
        """What determines the scores, for a run store: ``train_fn``, the data, the canary.

        ``train_fn`` and ``loss_fn`` by their identity (a module-level function's qualified name
        and a digest of its code), the data set by ``data_id`` or a digest of its tensors, the
        canary by a digest. Raises ``ValueError`` when one of them cannot be identified.
        """
        data = self.data_id if self.data_id is not None else _dataset_digest(self.dataset)
        if data is None:
            raise ValueError(
                f"cannot identify the data set ({type(self.dataset).__name__}) for the run "
                "store: pass OpacusTraining(data_id=...) naming it, or use a TensorDataset"
            )
        return {
            "pipeline": "rdpest.OpacusTraining",
            "train_fn": _callable_identity(self.train_fn, "train_fn"),
            "loss_fn": "cross_entropy"
            if self.loss_fn is None
            else _callable_identity(self.loss_fn, "loss_fn"),
            "data": data,
            "n_examples": len(self.dataset),
            "canary_sha256": array_digest(*[_as_numpy(v) for v in self.canary]),
        }

    def __repr__(self) -> str:
        name = getattr(self.train_fn, "__qualname__", type(self.train_fn).__name__)
        return f"OpacusTraining(train_fn={name}, n={len(self.dataset)})"


def _require_history(history):
    if history is None:
        raise ValueError(
            "check_accounting needs train_fn to return (model, privacy_engine) or "
            "(model, accountant)"
        )
    return history


def _callable_identity(fn, name: str) -> dict:
    how = f"define {name} at module level, or pass Auditor(config={{...}}) naming the pipeline"
    return callable_identity(fn, name, name, how)


def _warn_if_different(without: list, with_: list) -> bool:
    """Warn (UserWarning) when the two arms' accountant histories differ; say whether it did."""
    if without == with_:
        return False
    rates_without = sorted({float(e[1]) for e in without})
    rates_with = sorted({float(e[1]) for e in with_})
    if rates_without != rates_with:
        advice = (
            f"sample rates {rates_without} without the canary, {rates_with} with it. "
            "make_private(poisson_sampling=True) accounts with 1 / len(data_loader), which the "
            "canary changes; fix the rate from the data set WITHOUT the canary: "
            "DPDataLoader(dataset, sample_rate=batch_size / n_without_canary) and "
            "make_private(..., poisson_sampling=False)"
        )
    else:  # same rates: the noise or the number of steps differs
        advice = (
            "the sample rates agree, so the noise or the number of steps differs: train both "
            "for a fixed number of steps with the same noise (epochs over a loader that the "
            "canary lengthens add steps)"
        )
    warnings.warn(
        "the privacy accounting differs between the two neighbouring data sets (histories of "
        f"(noise_multiplier, sample_rate, steps): without the canary {without}, with it "
        f"{with_}): {advice}",
        UserWarning,
        stacklevel=3,
    )
    return True
