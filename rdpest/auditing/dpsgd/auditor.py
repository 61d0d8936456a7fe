"""DPSGDAuditor: audit Opacus DP-SGD on real data (Kim, Varshney & Alabi 2026, Sec. 4).

The data are split into a pretraining part and an audited part; non-private pretraining on the
first gives the worst-case initial parameters θ₀ shared by all runs; each run trains DP-SGD
(Opacus, RDP accountant, sum-reduced loss, full batch by default) from θ₀ on the audited part
with or without the canary, and the canary's final loss is the run's score. The claimed ε_α comes
from Opacus's RDP analysis at the audited α.
Everything about running, resuming and estimating is the generic :class:`Auditor`.
"""

from __future__ import annotations

import logging
import math
import warnings
from pathlib import Path

import numpy as np
import torch

from rdpest.auditing.auditor import AUDIT_SETTINGS, Auditor, check_audit_settings
from rdpest.auditing.dpsgd.canaries import _check_label, clipbkd_from_span, make_canary
from rdpest.auditing.dpsgd.config import DPSGDConfig
from rdpest.auditing.dpsgd.data import (
    check_class_count,
    load_arrays,
    load_digits_data,
    split_pretrain,
)
from rdpest.auditing.dpsgd.models import check_model, factory_identity, make_model
from rdpest.auditing.dpsgd.run import DPSGDRun, resolve_stack_runs
from rdpest.auditing.dpsgd.stacking import (
    BYTES_PER_ACTIVATION,
    activation_floats,
    stack_memory_budget,
)
from rdpest.auditing.dpsgd.training import pretrain
from rdpest.auditing.membership import MEMBERSHIP_DELTA
from rdpest.auditing.result import AuditResult
from rdpest.stats.conversions import dpsgd_epsilon_alpha, noise_multiplier_for_epsilon_alpha
from rdpest.utils.io import array_digest, load_json, qualified_name
from rdpest.utils.torch_helpers import resolve_device
from rdpest.utils.validation import (
    check_alpha,
    check_int,
    check_open_unit,
    check_positive,
    check_real,
    check_sample_rate,
    check_steps,
)

__all__ = ["DPSGDAuditor"]

logger = logging.getLogger(__name__)


class DPSGDAuditor:
    """Black-box Rényi DP audit of DP-SGD trained with Opacus.

    Parameters
    ----------
    alpha : float, default=2.0
        Rényi order of the audited claim.
    noise_multiplier : float, optional
        DP-SGD's σ; the claim is then ε_α of these settings by Opacus's RDP analysis. Give
        exactly one of ``noise_multiplier``, ``claimed_epsilon`` and ``target_epsilon`` (with
        ``target_delta``).
    claimed_epsilon : float, optional
        The ε_α the training claims: σ is solved with Opacus's RDP analysis so that it holds.
    target_epsilon, target_delta : float, optional
        The claim in Opacus's (ε, δ) vocabulary, as ``PrivacyEngine.make_private_with_epsilon``
        takes it: σ is what Opacus's ``get_noise_multiplier`` solves for (ε, δ) at these
        ``steps`` and ``sample_rate`` with its RDP accountant, and the audited claim is ε_α of
        that σ (Opacus's RDP analysis at order ``alpha``).
    steps : int, default=100
        Number of DP-SGD steps (full-batch steps at ``sample_rate=1``).
    n_runs : int, default=500
        Runs with and runs without the canary (the first round of a sequential audit).
    max_runs : int, optional
        Make the audit sequential: train in rounds up to ``max_runs`` runs per side and stop at
        the first certified violation (see :class:`rdpest.auditing.Auditor`).
    power_target : float, optional
        A sequential audit also stops once it detects ε_α >= ``power_target`` with 80%
        probability (see :class:`rdpest.auditing.Auditor`).
    model : {"lr", "mlp", "cnn", "mnist_cnn", "cifar10_cnn"} or callable, default="lr"
        Logistic regression, a one-hidden-layer MLP, a small CNN for 8×8 digits, the DP-SGD
        literature's CNNs for MNIST (1×28×28) and CIFAR-10 (3×32×32) images (see
        :mod:`rdpest.auditing.dpsgd.models`), or a factory
        ``f(n_features, n_classes) -> torch.nn.Module`` (picklable for ``n_jobs != 1``). It is
        fed batches shaped like the data's rows and must return float32 logits of shape
        ``(b, n_classes)``; it is checked on two rows before any training. With a ``store`` the
        factory must be identifiable (a module-level function, a ``functools.partial`` of one,
        or an object with ``describe()``; not a lambda): the store records its code digest,
        default arguments and parameter shapes, so an edited factory is refused, not mixed.
    canary : {"blank", "clipbkd"} or tuple (x, y), default="blank"
    canary_label : int, optional
        Label of the canary, one of the data's classes 0..max(y) (default: the class the
        initial model finds least likely for the canary's input, which maximises the canary's
        gradient norm; see :mod:`rdpest.auditing.dpsgd.canaries`).
    data : tuple (X, y) or str, optional
        Data to audit on: arrays, or files the user already has named by a ``"KIND:PATH"``
        string read with :func:`~rdpest.auditing.dpsgd.data.load_data` (``"mnist:DIR"``,
        ``"cifar10:DIR"``, ``"npz:FILE"``, ``"digits"``; nothing is downloaded). Default
        scikit-learn's digits (ships with scikit-learn). The store's fingerprint digests the
        arrays, not the path.
    pretrain : bool, default=True
        Worst-case initialisation by non-private pretraining on a disjoint part of the data;
        False uses one shared random θ₀.
    pretrain_fraction : float, default=0.5
    pretrain_epochs : int, default=50
        Passes over the pretraining data.
    max_grad_norm : float, default=1.0
    learning_rate : float, default=1.0
        Step on the mean noisy clipped gradient (see
        :class:`~rdpest.auditing.dpsgd.config.DPSGDConfig`).
    sample_rate : float, default=1.0
        Poisson sampling rate (1: full batch).
    beta : float, default=0.05
    estimators : dict, optional
        As in :class:`Auditor` (default: DV, Bernoulli, and the GDP route).
    n_jobs : int, default=1
    device : {"auto", "cpu", "cuda"}, default="auto"
        Where each run trains (CUDA when present for "auto").
    store : path, optional
        Directory for finished runs, the result JSON, and resume.
    random_state : int, default=0
    progress : bool, default=True
    noise_scale_bug : float, default=1.0
        FAULT INJECTION for tests: the noise actually used is σ·noise_scale_bug while the claim
        keeps σ. Never set it outside tests and demonstrations.
    stack_runs : int or "auto", default="auto"
        Runs trained together as one stacked network (see
        :class:`~rdpest.auditing.dpsgd.run.DPSGDRun`): ``"auto"`` stacks full-batch runs of
        stackable models, the largest power of two of runs that fits the memory budget
        (:func:`rdpest.auditing.dpsgd.stacking.auto_stack_size`; at most 4 for convolutional
        models on the CPU, where larger stacks train slower) and at most ``n_runs / 4``, so
        the first round of each arm splits into at least four groups (parallel work, visible
        progress, little lost to an interruption); 1 never stacks. A stack draws its runs' noise
        together, so the stack size is part of the store's configuration: resuming a store
        with ``"auto"`` keeps the stack size it was started with, and another explicit number is
        refused.
    membership_delta : float, default=1e-5
        The δ of the membership readouts' certified (ε, δ) bound, as in :class:`Auditor`.

    Examples
    --------
    >>> from rdpest.auditing import DPSGDAuditor
    >>> result = DPSGDAuditor(alpha=2.0, claimed_epsilon=1.0, steps=20, n_runs=100,
    ...                       progress=False).run()  # doctest: +SKIP
    >>> print(result.summary())  # doctest: +SKIP
    """

    def __init__(
        self,
        alpha: float = 2.0,
        noise_multiplier: float | None = None,
        claimed_epsilon: float | None = None,
        *,
        target_epsilon: float | None = None,
        target_delta: float | None = None,
        steps: int = 100,
        n_runs: int = 500,
        max_runs: int | None = None,
        power_target: float | None = None,
        model="lr",
        canary="blank",
        canary_label: int | None = None,
        data=None,
        pretrain: bool = True,
        pretrain_fraction: float = 0.5,
        pretrain_epochs: int = 50,
        max_grad_norm: float = 1.0,
        learning_rate: float = 1.0,
        sample_rate: float = 1.0,
        beta: float = 0.05,
        estimators: dict | None = None,
        n_jobs: int = 1,
        device: str = "auto",
        store=None,
        random_state: int = 0,
        progress: bool = True,
        noise_scale_bug: float = 1.0,
        stack_runs: int | str = "auto",
        membership_delta: float = MEMBERSHIP_DELTA,
    ):
        self.alpha = alpha
        self.noise_multiplier = noise_multiplier
        self.claimed_epsilon = claimed_epsilon
        self.target_epsilon = target_epsilon
        self.target_delta = target_delta
        self.steps = steps
        self.n_runs = n_runs
        self.max_runs = max_runs
        self.power_target = power_target
        self.model = model
        self.canary = canary
        self.canary_label = canary_label
        self.data = data
        self.pretrain = pretrain
        self.pretrain_fraction = pretrain_fraction
        self.pretrain_epochs = pretrain_epochs
        self.max_grad_norm = max_grad_norm
        self.learning_rate = learning_rate
        self.sample_rate = sample_rate
        self.beta = beta
        self.estimators = estimators
        self.n_jobs = n_jobs
        self.device = device
        self.store = store
        self.random_state = random_state
        self.progress = progress
        self.noise_scale_bug = noise_scale_bug
        self.stack_runs = stack_runs
        self.membership_delta = membership_delta

    # ------------------------------------------------------------------ set-up
    def _config_and_claim(self) -> tuple[DPSGDConfig, float]:
        """The DP-SGD settings (σ solved from the claim if given) and the claimed ε_α.

        ``steps`` and ``sample_rate`` are checked where they are first used: by the solver for σ,
        or by :class:`DPSGDConfig`.
        """
        alpha = check_alpha(self.alpha)
        if not isinstance(self.pretrain, bool | np.bool_):  # "no" would have pretrained
            raise ValueError(f"pretrain must be True or False, got {self.pretrain!r}")
        dp_claim = self.target_epsilon is not None or self.target_delta is not None
        given = (self.noise_multiplier is not None) + (self.claimed_epsilon is not None) + dp_claim
        if given != 1:
            raise ValueError(
                "give exactly one of noise_multiplier, claimed_epsilon and "
                "(target_epsilon, target_delta)"
            )
        if self.noise_multiplier is not None:
            sigma = check_positive(self.noise_multiplier, "noise_multiplier")
        elif dp_claim:
            sigma = self._sigma_for_dp_claim()
        else:
            if check_real(self.claimed_epsilon, "claimed_epsilon") == 0.0:
                # the noise is calibrated to the claim, and ε_α = 0 needs infinite noise
                # (rdpest.auditing.evaluate audits a claim of 0 on scores a user already has)
                raise ValueError(
                    "claimed_epsilon must be > 0: the noise is calibrated to the claim, and "
                    "a claim of 0 would need infinite noise"
                )
            target = check_positive(self.claimed_epsilon, "claimed_epsilon")
            sigma = noise_multiplier_for_epsilon_alpha(target, self.sample_rate, self.steps, alpha)
        config = DPSGDConfig(
            noise_multiplier=sigma,
            max_grad_norm=self.max_grad_norm,
            steps=self.steps,
            learning_rate=self.learning_rate,
            sample_rate=self.sample_rate,
            noise_scale_bug=self.noise_scale_bug,
        )
        noise_sd = config.noise_multiplier * config.max_grad_norm
        if not noise_sd < _MAX_NOISE_SD:
            # Beyond it the float32 noise overflows and training returns NaN scores, which were
            # reported as "a training run diverged? Lower the learning rate".
            raise ValueError(
                f"the noise multiplier {sigma:.3g} (times max_grad_norm {config.max_grad_norm:g}: "
                f"a noise standard deviation of {noise_sd:.3g}) is beyond what float32 training "
                f"can add (below {_MAX_NOISE_SD:.1e}); "
                + (
                    f"claimed_epsilon={self.claimed_epsilon!r} needs it: claim a larger ε_α"
                    if self.claimed_epsilon is not None
                    else "the (target_epsilon, target_delta) claim needs it: claim a larger ε"
                    if dp_claim
                    else "give a smaller one"
                )
            )
        claimed = dpsgd_epsilon_alpha(sigma, config.sample_rate, config.steps, alpha)
        if self.claimed_epsilon is not None and math.isclose(claimed, target, rel_tol=1e-9):
            claimed = target  # the claim as given, not 0.9999999999999998 from the solve for σ
        return config, claimed

    def _checked_settings(self) -> tuple[DPSGDConfig, float]:
        """:meth:`_config_and_claim` after checking every setting that needs no data: the DP-SGD
        settings and the claim, and the generic audit's (n_runs against the estimators' splits,
        beta, n_jobs, ...), so that a bad value fails before any data is read or model trained.
        """
        config, claimed = self._config_and_claim()
        check_audit_settings(**self._audit_settings(claimed))
        return config, claimed

    def _sigma_for_dp_claim(self) -> float:
        """σ for the (``target_epsilon``, ``target_delta``) claim, solved by Opacus."""
        from opacus.accountants.utils import get_noise_multiplier

        if self.target_epsilon is None or self.target_delta is None:
            raise ValueError(
                "target_epsilon and target_delta must be given together: the (ε, δ) claim is "
                "the pair"
            )
        epsilon = check_positive(self.target_epsilon, "target_epsilon")
        delta = check_open_unit(self.target_delta, "target_delta")
        steps, rate = check_steps(self.steps), check_sample_rate(self.sample_rate)
        try:
            return float(
                get_noise_multiplier(
                    target_epsilon=epsilon,
                    target_delta=delta,
                    sample_rate=rate,
                    steps=steps,
                    accountant="rdp",
                )
            )
        except ValueError as exc:  # e.g. a budget no finite noise reaches
            raise ValueError(
                f"Opacus found no noise multiplier for (epsilon, delta) = ({epsilon}, {delta}) "
                f"at {steps} steps and sample rate {rate}: {exc}"
            ) from None

    def _data(self):
        if self.data is None:
            return load_digits_data()
        if isinstance(self.data, str):
            from rdpest.auditing.dpsgd.data import load_data

            return load_data(self.data)
        if not isinstance(self.data, tuple | list) or len(self.data) != 2:
            raise ValueError(
                "data must be a tuple (X, y) of arrays or a 'KIND:PATH' string (digits, "
                f"mnist:DIR, cifar10:DIR or npz:FILE), got {type(self.data).__name__}"
            )
        return load_arrays(*self.data)

    def build(self) -> tuple[DPSGDRun, float, dict]:
        """Validate everything, pretrain θ₀ and build the score function (no audit runs yet).

        Returns
        -------
        score_fn : DPSGDRun
        claimed_epsilon : float
        config : dict
            The fingerprint that identifies this audit in a store.
        """
        config, claimed = self._checked_settings()
        device = resolve_device(self.device)
        check_int(self.pretrain_epochs, "pretrain_epochs", 1)
        X, y = self._data()
        if not 0.0 < float(self.pretrain_fraction) < 1.0:
            raise ValueError(f"pretrain_fraction must lie in (0, 1), got {self.pretrain_fraction}")
        X_pre, y_pre, X_audit, y_audit = split_pretrain(
            X, y, self.pretrain_fraction, seed=int(self.random_state)
        )
        if not isinstance(self.canary, str):
            make_canary(self.canary, X_audit, y_audit)  # a user canary's shape, before training
        n_classes = check_class_count(y)
        if self.canary_label is not None:  # before pretraining, naming the parameter
            try:
                _check_label(self.canary_label, n_classes)
            except ValueError as exc:
                raise ValueError(f"canary_label: {exc} (the data's classes)") from None
        input_shape = X.shape[1:] if X.ndim > 2 else None
        n_features = int(np.prod(X.shape[1:]))
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(int(self.random_state))
            initial = make_model(self.model, n_features, n_classes, input_shape)
        check_model(initial, torch.from_numpy(np.asarray(X_audit[:2], np.float32)), n_classes)
        model_identity = self._model_identity(initial)  # an unidentifiable factory fails here
        layout = {
            "n_rows": len(y_audit) + 1,
            "example_shape": X.shape[1:],
            "sample_rate": config.sample_rate,
            "device": device,
        }
        stack_runs = self._stored_stack_size()
        if stack_runs is not None:
            try:
                resolve_stack_runs(stack_runs, initial, **layout)
            except ValueError:
                # The store's stacks cannot train this configuration (another sample rate or
                # model): another pipeline, which the store refuses below naming what differs,
                # not "stack_runs=4 is not possible", a parameter the user never set.
                stack_runs = None
            else:
                _warn_if_stack_exceeds_budget(stack_runs, initial, layout)
        if stack_runs is None:
            stack_runs = resolve_stack_runs(  # an impossible stack_runs fails before pretraining
                self.stack_runs, initial, **layout, max_stack=max(1, int(self.n_runs) // 4)
            )
            if device.type == "cuda" and self.stack_runs == "auto" and self.n_jobs != 1:
                # Sized from one measurement of the free memory, for each worker alike (the size
                # must not depend on n_jobs, or the scores would).
                warnings.warn(
                    f"n_jobs={self.n_jobs} on a GPU: every worker trains stacks of {stack_runs} "
                    "runs sized for half of the GPU's free memory, so together they may run out "
                    "of it; a stack already trains its runs in parallel (use n_jobs=1, or an "
                    "explicit stack_runs)",
                    UserWarning,
                    stacklevel=3,
                )
        if self.pretrain:
            state = pretrain(
                initial,
                X_pre,
                y_pre,
                epochs=int(self.pretrain_epochs),
                seed=int(self.random_state),
                device=str(device),
            )
            initial.load_state_dict(state)
        state = {k: v.detach().cpu().numpy() for k, v in initial.state_dict().items()}
        canary = make_canary(self.canary, X_audit, y_audit, model=initial, label=self.canary_label)
        score_fn = DPSGDRun(
            self.model,
            X_audit,
            y_audit,
            canary,
            state,
            config=config,
            device=str(device),
            input_shape=input_shape,
            n_classes=n_classes,
            stack_runs=stack_runs,
        )
        fingerprint = {
            "mechanism": "opacus-dp-sgd",
            "data_sha256": array_digest(X, y),
            "model": model_identity,
            "canary": self.canary if isinstance(self.canary, str) else array_digest(*self.canary),
            "canary_label": int(canary[1]),
            # ClipBKD's input with no more rows than values per example comes from the rows' span
            # (a construction that replaced an arbitrary completion of the SVD's basis):
            # fingerprinted, so that a store never mixes runs of two canaries. With more rows it
            # is the SVD's last direction, as in stores written before the fingerprint existed.
            **(
                {"canary_sha256": array_digest(canary[0])}
                if self.canary == "clipbkd" and clipbkd_from_span(X_audit)
                else {}
            ),
            "pretrain": bool(self.pretrain),
            "pretrain_fraction": float(self.pretrain_fraction),
            "pretrain_epochs": int(self.pretrain_epochs),
            "noise_multiplier": config.noise_multiplier,
            "steps": config.steps,
            "max_grad_norm": config.max_grad_norm,
            "learning_rate": config.learning_rate,
            "sample_rate": config.sample_rate,
            "noise_scale_bug": config.noise_scale_bug,
            # A stack draws its runs' noise together, so a run's score depends on the stack it
            # was trained in: a store keeps one layout.
            "stack_size": score_fn.runs_per_call,
        }
        return score_fn, claimed, fingerprint

    def _model_identity(self, net) -> str | dict:
        """The model in the store's fingerprint: a built-in model's name; for a factory, its
        identity (name, code digest and defaults, a partial's arguments, or its ``describe()``)
        and the names and shapes of the parameters it built, so an edited factory is another
        pipeline. Without a store a factory that cannot be identified (a lambda) is named.
        """
        if isinstance(self.model, str):
            return self.model
        shapes = [[name, list(value.shape)] for name, value in net.state_dict().items()]
        try:
            factory = factory_identity(self.model)
        except ValueError:
            if self.store is not None:
                raise
            factory = qualified_name(self.model)
        return {"factory": factory, "parameters": shapes}

    def _stored_stack_size(self) -> int | None:
        """With ``stack_runs="auto"``, the stack size of the store this audit resumes, if any.

        "auto" depends on the free memory, which changes between sessions; a resumed audit keeps
        its store's layout instead of being refused for a new one. Anything unreadable is left
        to the store's own checks (None here).
        """
        if self.stack_runs != "auto" or self.store is None:
            return None
        try:
            stored = load_json((Path(self.store) / "config.json").read_text())
            size = stored["pipeline"]["stack_size"]
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            return None
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            return None
        return size

    def _audit_settings(self, claimed: float) -> dict:
        """The generic audit's settings (what :func:`check_audit_settings` validates)."""
        return {
            "claimed_epsilon": claimed,
            **{name: getattr(self, name) for name in AUDIT_SETTINGS},
        }

    def _generic_auditor(self, score_fn, claimed: float, config: dict) -> Auditor:
        settings = self._audit_settings(claimed)
        claimed_epsilon = settings.pop("claimed_epsilon")
        auditor = Auditor(
            score_fn,
            claimed_epsilon,
            **settings,
            store=self.store,
            config=config,
            progress=self.progress,
        )
        auditor._config_is_identity = True  # the fingerprint built in build() is complete
        if self.target_epsilon is not None:  # the user's claim, which the summary names
            auditor._dp_claim = {
                "epsilon": float(self.target_epsilon),
                "delta": float(self.target_delta),
                "noise_multiplier": float(config["noise_multiplier"]),
                "solved_by": "opacus.accountants.utils.get_noise_multiplier (RDP accountant)",
            }
        return auditor

    def auditor(self) -> Auditor:
        """The generic :class:`Auditor` this audit runs (validated before any training)."""
        return self._generic_auditor(*self.build())

    def run(self) -> AuditResult:
        """Train the runs (resuming from ``store``), estimate, and return the verdict."""
        return self.auditor().run()


#: The largest noise standard deviation σ·C that DP-SGD's float32 training can add: a tenth of
#: float32's largest value, so that draws of several standard deviations stay finite.
_MAX_NOISE_SD = float(np.finfo(np.float32).max) / 10


def _warn_if_stack_exceeds_budget(stack_runs: int, initial, layout: dict) -> None:
    """Warn when a resumed store's stacks need more memory than the budget here
    (:func:`~rdpest.auditing.dpsgd.stacking.stack_memory_budget`; less free memory than when
    the store was started): the stored size is kept, since a stack draws its runs' noise
    together and a store never mixes layouts, but it may exhaust this machine's memory, which
    the user should hear before training, not as a kill. Only memory counts: a stack that
    ``"auto"`` would not choose here for other reasons (a power of two, the CPU's cap on
    convolutional stacks) but that fits is no cause for a warning."""
    if stack_runs <= 1:
        return
    device, budget = layout["device"], stack_memory_budget(layout["device"])
    per_copy = (
        max(1, int(layout["n_rows"]))
        * activation_floats(initial, tuple(int(s) for s in layout["example_shape"]))
        * BYTES_PER_ACTIVATION
    )
    if stack_runs * per_copy <= budget:
        return
    warnings.warn(
        f"the store trains its runs in stacks of {stack_runs}, which need about "
        f"{stack_runs * per_copy / 2**20:.0f} MiB of activations; the memory budget on {device} "
        f"now is {budget / 2**20:.0f} MiB (stacks of {max(1, budget // per_copy)} would fit). "
        "The store's stack size is kept (a stack draws its runs' noise together, so another "
        "size would mix two layouts in one audit); if training runs out of memory, resume "
        "where more memory is free, or start a new store",
        UserWarning,
        stacklevel=5,  # the user's DPSGDAuditor(...).run()
    )
