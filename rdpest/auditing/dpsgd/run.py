"""The audit's score function for DP-SGD: one run (or a stack of runs) to the canary's loss.

:class:`DPSGDRun` is a picklable ``score_fn(include_canary, seed) -> float`` for
:class:`rdpest.auditing.Auditor`: it builds the model, loads θ₀, trains DP-SGD
(:mod:`rdpest.auditing.dpsgd.training`) on the audited data with the canary appended when asked,
and returns the canary's loss (:func:`rdpest.auditing.dpsgd.canaries.canary_loss`). With
``score_many`` it trains several runs at once as one stacked network, when the model allows it
(:func:`resolve_stack_runs`).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import numbers
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from rdpest.auditing.dpsgd.canaries import canary_loss
from rdpest.auditing.dpsgd.config import DPSGDConfig
from rdpest.auditing.dpsgd.data import check_class_count, load_arrays
from rdpest.auditing.dpsgd.models import _first_line, check_model, factory_identity, make_model
from rdpest.auditing.dpsgd.stacking import (
    auto_stack_size,
    opacus_supports_stacking,
    opacus_version_message,
    stackable,
)
from rdpest.auditing.dpsgd.training import (
    _train_dp_sgd_tensors,
    _train_stacked_module,
    stacked_canary_losses,
)
from rdpest.utils.io import array_digest
from rdpest.utils.torch_helpers import forked_rng, num_threads, resolve_device
from rdpest.utils.validation import check_int, check_seed, check_seeds

__all__ = ["DPSGDRun", "resolve_stack_runs"]

logger = logging.getLogger(__name__)


def resolve_stack_runs(
    stack_runs,
    template: nn.Module,
    *,
    n_rows: int,
    example_shape: tuple[int, ...],
    sample_rate: float,
    grad_sample_mode: str = "auto",
    device: str | torch.device = "cpu",
    max_stack: int | None = None,
) -> int:
    """How many runs to train together for ``stack_runs`` (see :class:`DPSGDRun`).

    ``"auto"``: :func:`rdpest.auditing.dpsgd.stacking.auto_stack_size` on ``device`` (the largest
    power of two of copies, at most ``max_stack``, whose training on ``n_rows`` examples of shape
    ``example_shape`` fits the memory budget) for full-batch training with ghost clipping
    allowed, else 1. An integer above 1 that cannot be honoured raises ``ValueError`` saying why.

    Examples
    --------
    >>> from rdpest.auditing.dpsgd.models import make_model
    >>> from rdpest.auditing.dpsgd.stacking import opacus_supports_stacking
    >>> size = resolve_stack_runs("auto", make_model("lr", 64, 10), n_rows=900,
    ...                           example_shape=(64,), sample_rate=1.0, max_stack=100)
    >>> size == (64 if opacus_supports_stacking() else 1)  # 1 on an unchecked Opacus release
    True
    >>> resolve_stack_runs("auto", make_model("lr", 64, 10), n_rows=900, example_shape=(64,),
    ...                    sample_rate=0.5)
    1
    """
    example_shape = tuple(int(s) for s in example_shape)
    if stack_runs == "auto":
        obstacles = _stacking_obstacles(template, example_shape, sample_rate, grad_sample_mode)
        if obstacles:
            logger.info('stack_runs="auto" trains one run at a time: %s', "; ".join(obstacles))
            return 1
        size = auto_stack_size(template, n_rows, example_shape, device, max_stack=max_stack)
        logger.info('stack_runs="auto" trains %d run(s) together on %s', size, device)
        return size
    if isinstance(stack_runs, str):
        raise ValueError(f'stack_runs must be "auto" or an integer >= 1, got {stack_runs!r}')
    stack = check_int(stack_runs, "stack_runs", 1)
    if stack > 1:
        reasons = _stacking_obstacles(template, example_shape, sample_rate, grad_sample_mode)
        if reasons:
            raise ValueError(f"stack_runs={stack} is not possible: " + "; ".join(reasons))
    return stack


def _stacking_obstacles(template, example_shape, sample_rate, grad_sample_mode) -> list[str]:
    """Why runs of this configuration cannot be trained as a stack (none: they can)."""
    reasons = []
    if sample_rate < 1.0:
        reasons.append("it needs full-batch training (sample_rate=1)")
    if grad_sample_mode not in ("auto", "ghost"):
        reasons.append('it trains with ghost clipping (grad_sample_mode "auto" or "ghost")')
    if not stackable(template, len(example_shape) + 1):
        reasons.append(
            "it needs an nn.Sequential of nn.Linear and nn.Conv2d layers, elementwise "
            "activations, flattening and pooling"
        )
    if not opacus_supports_stacking():
        reasons.append(opacus_version_message())
    return reasons


class DPSGDRun:
    """Picklable score function of a DP-SGD audit: ``run(include_canary, seed) -> canary loss``.

    Each call builds the model, loads θ₀, trains one DP-SGD run (:func:`train_dp_sgd`) on the
    audited data with the canary appended when ``include_canary`` is true, and returns the
    canary's loss (:func:`canary_loss`). Instances hold only numpy arrays, floats and the model
    name (or a picklable factory), so they travel to joblib / Dask / Ray workers; tensors are
    rebuilt lazily once per process and reused across calls.

    Parameters
    ----------
    model : {"lr", "cnn"} or callable
        Passed to :func:`rdpest.auditing.dpsgd.models.make_model`.
    X, y : array-like
        The audited training data (WITHOUT the canary).
    canary : tuple (x, label)
        The canary, e.g. from :func:`rdpest.auditing.dpsgd.canaries.make_canary`.
    initial_state : mapping of str to tensor or array, optional
        θ₀ (e.g. from :func:`pretrain`), shared by all runs. ``None`` uses the model's default
        initialisation under seed 0 (the same for every run).
    config : DPSGDConfig
        The DP-SGD settings. Unless it fixes ``expected_batch_size``, both neighbouring runs use
        ``round(sample_rate * len(X))`` (the size WITHOUT the canary).
    device : {"cpu", "cuda", "auto"} or "cuda:N", default "cpu"
        Where each run trains.
    input_shape : tuple of int, optional
        Passed to ``make_model`` (for the CNN).
    n_classes : int, optional
        Number of classes; default ``max(max(y), canary label) + 1``.
    stack_runs : int >= 1 or "auto", default "auto"
        How many runs :meth:`score_many` trains together as one stacked network
        (:func:`train_dp_sgd_many`: each run is still one DP-SGD run, but the stack shares one
        noise generator, so a score depends on the stack its run trained in). ``"auto"``: the
        largest power of two of runs whose training fits the memory budget, at most 4 for
        convolutional models on the CPU (:func:`rdpest.auditing.dpsgd.stacking.auto_stack_size`)
        for full-batch training of a
        :func:`~rdpest.auditing.dpsgd.stacking.stackable` model with ``grad_sample_mode``
        ``"auto"`` or ``"ghost"``, else 1. A number above 1 for a model or setting that cannot be
        stacked is an error. The resolved number is
        :attr:`runs_per_call`.

    Examples
    --------
    >>> import pickle
    >>> X = np.random.default_rng(0).random((30, 4), dtype=np.float32)
    >>> y = (X[:, 0] > 0.5).astype(np.int64)
    >>> config = DPSGDConfig(noise_multiplier=1.0, steps=5)
    >>> run = DPSGDRun("lr", X, y, (np.zeros(4, np.float32), 0), config=config)
    >>> clone = pickle.loads(pickle.dumps(run))
    >>> run(True, seed=7) == clone(True, seed=7)
    True
    """

    def __init__(
        self,
        model: str | Callable[[int, int], nn.Module],
        X,
        y,
        canary: tuple,
        initial_state: Mapping | None = None,
        *,
        config: DPSGDConfig,
        device: str = "cpu",
        input_shape: tuple[int, ...] | None = None,
        n_classes: int | None = None,
        stack_runs: int | str = "auto",
    ):
        self.X, self.y = load_arrays(X, y)
        if not isinstance(canary, tuple | list) or len(canary) != 2:
            raise ValueError("canary must be a tuple (x, label)")
        canary_x = np.asarray(canary[0], dtype=np.float32)
        if canary_x.size != self.X[0].size:
            raise ValueError(
                f"the canary input has {canary_x.size} values but one row of X has {self.X[0].size}"
            )
        if not np.all(np.isfinite(canary_x)):
            raise ValueError("the canary input must be finite")
        self.canary_x = canary_x.reshape(self.X.shape[1:])
        label = canary[1]
        if isinstance(label, bool) or not isinstance(label, numbers.Integral) or label < 0:
            raise ValueError(f"the canary label must be an integer >= 0, got {label!r}")
        self.canary_y = int(label)
        if n_classes is None:
            n_classes = check_class_count(np.r_[self.y, self.canary_y])
        self.n_classes = check_int(n_classes, "n_classes", 2)
        if self.canary_y >= self.n_classes or int(self.y.max()) >= self.n_classes:
            raise ValueError(f"labels must lie in [0, n_classes={self.n_classes})")
        if not (callable(model) or isinstance(model, str)):
            raise ValueError(f"model must be a model name or a factory, got {model!r}")
        self.model = model
        self.input_shape = None if input_shape is None else tuple(int(s) for s in input_shape)
        if not isinstance(config, DPSGDConfig):
            raise ValueError(f"config must be a DPSGDConfig, got {config!r}")
        resolve_device(device)  # fail early on an unavailable device
        self.device = device
        config.warn_if_faulty("DPSGDRun")
        self.config = config.with_batch_size_of(len(self.y))
        template = self._build_model(initial_state=None)
        check_model(template, torch.from_numpy(self.X[:2]), self.n_classes)
        if initial_state is None:
            state = template.state_dict()
        else:
            if not isinstance(initial_state, Mapping):
                raise ValueError("initial_state must be a state dict (a mapping)")
            state = {k: torch.as_tensor(np.asarray(v)) for k, v in initial_state.items()}
            try:
                template.load_state_dict(state)
            except RuntimeError as exc:
                raise ValueError(f"initial_state does not fit the model: {exc}") from None
        self.initial_state = {k: v.detach().cpu().numpy().copy() for k, v in state.items()}
        self.stack_runs = stack_runs
        self.runs_per_call = resolve_stack_runs(
            stack_runs,
            template,
            n_rows=len(self.y) + 1,
            example_shape=self.X.shape[1:],
            sample_rate=self.config.sample_rate,
            grad_sample_mode=self.config.grad_sample_mode,
            device=resolve_device(device),
        )
        self._cache: dict | None = None

    def describe(self) -> dict:
        """What determines this score function's scores, for a run store's fingerprint.

        Digests of the data, the canary and θ₀, the model's name (or its factory's identity,
        :func:`~rdpest.auditing.dpsgd.models.factory_identity`), the number of classes, the
        DP-SGD settings and the stack size (a stack draws its runs' noise together, so another
        stack size gives other scores). Not the device: it changes scores by float rounding only.
        """
        model = self.model if isinstance(self.model, str) else factory_identity(self.model)
        state = sorted(self.initial_state.items())
        return {
            "mechanism": "rdpest.DPSGDRun",
            "model": model,
            "data_sha256": array_digest(self.X, self.y),
            "canary_sha256": array_digest(self.canary_x, np.asarray([self.canary_y])),
            "initial_state_sha256": array_digest(*[np.asarray(v) for _, v in state]),
            "initial_state_keys": [k for k, _ in state],
            "input_shape": None if self.input_shape is None else list(self.input_shape),
            "n_classes": self.n_classes,
            "config": dataclasses.asdict(self.config),
            "stack_size": self.runs_per_call,
        }

    def _build_model(self, initial_state: Mapping | None) -> nn.Module:
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(0)
            net = make_model(self.model, int(self.X[0].size), self.n_classes, self.input_shape)
        if initial_state is not None:
            net.load_state_dict({k: torch.from_numpy(v) for k, v in initial_state.items()})
        return net

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_cache"] = None  # tensors and modules are rebuilt in the receiving process
        return state

    def _prepared(self) -> dict:
        if self._cache is None:
            dev = resolve_device(self.device)
            X = torch.from_numpy(self.X).to(dev)
            y = torch.from_numpy(self.y).to(dev)
            cx = torch.from_numpy(self.canary_x).to(dev).unsqueeze(0)
            cy = torch.tensor([self.canary_y], dtype=torch.int64, device=dev)
            self._cache = {
                "device": dev,
                "template": self._build_model(self.initial_state).to(dev),
                "data": {False: (X, y), True: (torch.cat([X, cx]), torch.cat([y, cy]))},
            }
        return self._cache

    def __call__(self, include_canary: bool, seed: int) -> float:
        """Train once (with or without the canary) and return the canary's loss."""
        if not isinstance(include_canary, bool | np.bool_):
            raise ValueError(f"include_canary must be a bool, got {include_canary!r}")
        seed = check_seed(seed)
        with num_threads(1):
            cache = self._prepared()
            dev = cache["device"]
            X, y = cache["data"][bool(include_canary)]
            net = copy.deepcopy(cache["template"])
            with forked_rng(seed, dev), _memory_hint(dev, 1, len(y)):
                trained = _train_dp_sgd_tensors(net, X, y, self.config, seed=seed, device=dev)
            return canary_loss(trained, self.canary_x, self.canary_y)

    def score_many(self, include_canary: bool, seeds: Sequence[int]) -> list[float]:
        """The canary's loss after one run per seed.

        With ``runs_per_call`` 1 this is ``[self(include_canary, s) for s in seeds]``. Above 1,
        consecutive chunks of ``runs_per_call`` seeds train as one stacked network
        (:func:`train_dp_sgd_many`): each score is one DP-SGD run's, with noise drawn for the
        whole chunk from a generator seeded by all its seeds, so the same seeds in the same
        chunks give the same scores. The copies' canary losses come from the stacked network
        in one pass (``rdpest.auditing.dpsgd.training.stacked_canary_losses``), equal to
        :func:`canary_loss` of the unstacked copies to float rounding.
        """
        if not isinstance(include_canary, bool | np.bool_):
            raise ValueError(f"include_canary must be a bool, got {include_canary!r}")
        seeds = check_seeds(seeds)
        if self.runs_per_call == 1:
            return [self(include_canary, s) for s in seeds]
        with num_threads(1):
            cache = self._prepared()
            dev = cache["device"]
            X, y = cache["data"][bool(include_canary)]
            scores = []
            for start in range(0, len(seeds), self.runs_per_call):
                chunk = seeds[start : start + self.runs_per_call]
                with forked_rng(chunk[0], dev), _memory_hint(dev, len(chunk), len(y)):
                    trained = _train_stacked_module(
                        cache["template"], X, y, self.config, seeds=chunk, device=dev
                    )
                scores += stacked_canary_losses(trained, self.canary_x, self.canary_y)
                del trained  # its caches (data repeated per copy, patches) before the next stack
            return scores

    def __repr__(self) -> str:
        name = self.model if isinstance(self.model, str) else getattr(self.model, "__name__", "?")
        return (
            f"DPSGDRun(model={name!r}, n={len(self.y)}, config={self.config!r}, "
            f"device={self.device!r}, runs_per_call={self.runs_per_call})"
        )


@contextlib.contextmanager
def _memory_hint(device: torch.device, copies: int, rows: int):
    """Out-of-memory errors of a training (a GPU's, or the CPU allocator's), with what to change:
    torch's own message says which allocation failed, not which setting made it."""
    try:
        yield
    except RuntimeError as exc:
        if not (isinstance(exc, torch.OutOfMemoryError) or "can't allocate memory" in str(exc)):
            raise
        fewer = "DPSGDAuditor(stack_runs=...) below this, " if copies > 1 else ""
        raise type(exc)(
            f"out of memory training {copies} run(s) at once on {device}, {rows} rows each: pass "
            f"{fewer}n_jobs=1 (workers share the memory) or a smaller sample_rate "
            f"({_first_line(exc)})"
        ) from exc
