"""AuditResult: the samples, the claim, every estimator's estimate and bound, and the verdict."""

from __future__ import annotations

import math
import os
import platform
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from rdpest.auditing.analyses import earlier_line
from rdpest.auditing.membership import membership_line
from rdpest.auditing.power import claim_text, dp_claim_text, power_sentence
from rdpest.utils.io import atomic_write_text, dumps_strict, load_json, refuse_symlink

__all__ = ["AuditResult", "provenance"]

_FORMAT = "rdpest.AuditResult/1"


def provenance() -> dict[str, str | None]:
    """Versions of rdpest, Python, numpy, torch and Opacus, and the time (UTC) of this moment.

    Read from the installed distributions' metadata (Opacus is not imported); ``None`` for a
    package that is not installed.

    Examples
    --------
    >>> sorted(provenance())
    ['created_utc', 'numpy', 'opacus', 'python', 'rdpest', 'torch']
    """
    from rdpest import __version__

    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    return {
        "rdpest": __version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": version("torch"),
        "opacus": version("opacus"),
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


@dataclass
class AuditResult:
    """Outcome of an audit.

    Attributes
    ----------
    losses_without_canary : ndarray of shape (n_runs,)
        O: the canary's score after each run trained WITHOUT the canary.
    losses_with_canary : ndarray of shape (n_runs,)
        O′: the canary's score after each run trained WITH the canary.
    claimed_epsilon : float
        The ε_α that the training claims at order ``alpha``.
    alpha : float
    beta : float
        Overall error level of the verdict (split across the certified estimators).
    estimates : dict of str to dict
        Per estimator: ``divergence`` (point estimate), ``lower_bound``, ``certified``, ``beta``
        (its share of the level) and ``estimator`` (its class name).
    verdict : {"violation", "not_refuted", "underpowered"}
        "violation" when a certified lower bound exceeds the claim (false with probability at
        most ``beta``); "underpowered" when no certified bound could have exceeded it at these
        sample sizes (``power["max_certifiable"]`` is at or below the claim), or when the scores
        are perfectly separated and still no bound exceeds it (``power["separated"]``), or all
        one number (``power["constant"]``: the score function does not vary); "not_refuted"
        otherwise, with ``power["detectable_epsilon"]`` saying what the audit would have seen.
    config : dict
        The audit's configuration (training settings, seeds, store).
    power : dict
        What the audit could have seen (:mod:`rdpest.auditing.power`): ``max_certifiable``,
        ``detectable_epsilon`` (None when nothing above the claim is detectable),
        ``target_power``, ``model_power``, ``reference_model`` and ``unmodelled`` (certified
        estimators whose power the model does not cover at this α, not counted); with a power
        target, ``power_target`` and, if it was not met and some estimator is covered,
        ``runs_needed``. Empty for results written before it existed.
    rounds : list of dict
        One record per round of the audit (a fixed-size audit has one): ``n_runs`` per side,
        ``beta`` (the round's level), ``lower_bound`` (the largest certified bound),
        ``lower_bounds`` per estimator, ``verdict`` and ``detectable_epsilon``.
    provenance : dict
        Versions of rdpest, Python, numpy, torch and Opacus and the UTC time the result was made
        (:func:`provenance`).
    membership : dict
        Membership-inference readouts (:func:`rdpest.auditing.membership.membership_readouts`):
        ``auroc`` and ``tpr_at_fpr`` (point estimates), ``epsilon_lower_bound`` (certified lower
        bound on ε of (ε, δ)-DP at ``delta``, level 1 − its own ``beta``; a readout that never
        decides the verdict), ``side`` and the rest of the certificate. Empty for results
        written before it existed.

    Examples
    --------
    >>> r = AuditResult(np.zeros(3), np.ones(3), 1.0, 2.0, 0.05,
    ...                 {"dv": {"divergence": 0.5, "lower_bound": 0.1, "certified": True,
    ...                         "beta": 0.05, "estimator": "DVRenyiEstimator"}}, "not_refuted", {})
    >>> AuditResult.from_json(r.to_json()).verdict
    'not_refuted'
    """

    losses_without_canary: np.ndarray
    losses_with_canary: np.ndarray
    claimed_epsilon: float
    alpha: float
    beta: float
    estimates: dict[str, dict[str, Any]]
    verdict: str
    config: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    power: dict[str, Any] = field(default_factory=dict)
    rounds: list[dict[str, Any]] = field(default_factory=list)
    membership: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        def fail(what: str):
            raise ValueError(f"AuditResult: {what}")

        numbers = (self.claimed_epsilon, self.alpha, self.beta)
        if not all(_is_number(v) or isinstance(v, np.floating | np.integer) for v in numbers):
            fail(f"claimed_epsilon, alpha and beta must be numbers, got {numbers!r}")
        self.claimed_epsilon, self.alpha, self.beta = (float(v) for v in numbers)
        try:
            self.losses_without_canary = np.asarray(self.losses_without_canary, dtype=float)
            self.losses_with_canary = np.asarray(self.losses_with_canary, dtype=float)
        except (TypeError, ValueError) as exc:
            fail(f"the losses must be numbers ({exc})")
        _check_values(
            self.losses_without_canary,
            self.losses_with_canary,
            self.claimed_epsilon,
            self.alpha,
            self.beta,
            fail,
        )
        if self.verdict not in _VERDICTS:
            fail(f"'verdict' must be one of {', '.join(_VERDICTS)}, got {self.verdict!r}")

    @property
    def n_runs(self) -> int:
        return len(self.losses_without_canary)

    def to_json(self, path=None) -> str:
        """The result as JSON text; also written (atomically) to ``path`` if given."""
        payload = {
            "format": _FORMAT,
            "losses_without_canary": [float(v) for v in self.losses_without_canary],
            "losses_with_canary": [float(v) for v in self.losses_with_canary],
            "claimed_epsilon": float(self.claimed_epsilon),
            "alpha": float(self.alpha),
            "beta": float(self.beta),
            "estimates": self.estimates,
            "verdict": self.verdict,
            "config": self.config,
            "provenance": self.provenance,
            "power": self.power,
            "rounds": self.rounds,
            "membership": self.membership,
        }
        # standard JSON (no bare Infinity), numpy values as numbers; anything else JSON cannot
        # write (a path, a device) as its text
        text = dumps_strict(payload, indent=2, default=str)
        if path is not None:
            path = Path(path)
            refuse_symlink(path, "the result file")
            if path.exists() and not path.is_file():
                raise ValueError(f"cannot write the result to {path}: it is not a file")
            atomic_write_text(path, text)
        return text

    @classmethod
    def from_json(cls, source) -> AuditResult:
        """Rebuild a result from JSON text or from the path of a JSON file (str or Path).

        A str is JSON text when it starts with ``{``, else the path of a file; anything that is
        not a complete audit result (missing keys, wrong types) is a ValueError saying what.
        """
        if isinstance(source, str) and source.lstrip().startswith("{"):
            text, where = source, "the JSON text"
        elif isinstance(source, str | os.PathLike):
            path = Path(source)
            if not path.is_file():
                raise ValueError(
                    f"AuditResult.from_json takes JSON text or the path of a result file; "
                    f"{str(source)[:80]!r} is neither (no such file)"
                )
            text, where = path.read_text(), str(path)
        else:
            raise ValueError(
                f"AuditResult.from_json takes JSON text or a path, got {type(source).__name__}"
            )
        try:
            payload = load_json(text, non_finite=True, verbatim=("config", "provenance"))
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"{where} is not valid JSON: {exc}") from None
        if not isinstance(payload, dict) or payload.get("format") != _FORMAT:
            raise ValueError(f"{where} is not an rdpest audit result (missing format {_FORMAT!r})")
        return cls(**_checked_payload(payload, where))

    def summary(self) -> str:
        """A plain-text table of the estimates against the claim, and the verdict."""
        lines = [
            f"Rényi DP audit: alpha = {self.alpha:g}, claimed epsilon_alpha = "
            f"{claim_text(self.claimed_epsilon)}{dp_claim_text(self.config)}, {self.n_runs} "
            f"runs with and {self.n_runs} without the canary, beta = {self.beta:g}",
            f"{'estimator':<16}{'estimate':>10}{'lower bound':>13}{'level':>8}  certified",
        ]
        for name, e in self.estimates.items():
            lines.append(
                f"{name:<16}{e['divergence']:>10.4f}{e['lower_bound']:>13.4f}"
                f"{_level_text(e['beta']):>8}  {'yes' if e['certified'] else 'no (assumption)'}"
            )
        if len(self.config.get("rounds_planned", [])) > 1:
            planned = self.config["max_runs"]
            steps = " -> ".join(str(r["n_runs"]) for r in self.rounds)
            stop = ""
            if self.rounds and self.rounds[-1]["n_runs"] < planned:
                stop = (
                    "; stopped at a violation"
                    if self.verdict == "violation"
                    else "; stopped: the power target was reached"
                )
            lines.append(
                f"sequential: runs per side {steps} (of at most {planned}{stop}), each round at "
                f"beta {self.rounds[-1]['beta']:.3g} (beta / "
                f"{len(self.config['rounds_planned'])}); certified bound after each round: "
                + ", ".join(f"{r['lower_bound']:.3f}" for r in self.rounds)
            )
        if self.config.get("earlier_analyses"):
            lines.append(earlier_line(self.config["earlier_analyses"], self.beta))
        if self.membership:
            lines.append(
                membership_line(self.membership, self.alpha, self.claimed_epsilon, self.config)
            )
        lines.append(f"verdict: {self.verdict.upper().replace('_', ' ')}")
        lines.append(self.verdict_sentence())
        return "\n".join(lines)

    def verdict_sentence(self) -> str:
        """The verdict in words, with what the audit could have detected."""
        return power_sentence(
            self.verdict, self.power, self.n_runs, self.alpha, self.claimed_epsilon
        )

    def plot(self, path=None, *, ax=None):
        """Plot the scores O and O′, the bounds against the claim, any rounds and the membership
        ROC (needs matplotlib).

        Panels: histograms of O and O′; each estimator's bound and point estimate against the
        claim; for a sequential audit (more than one round), the certified bound after each
        round; when the result has membership readouts (every result made since they exist),
        the ROC of the membership test last. The plot never changes matplotlib's backend or
        pyplot's current figure beyond what is said here.

        Parameters
        ----------
        path : str or path-like, optional
            Save the figure here. Only when the plot makes its own figure (``ax`` not given): it
            is then made without pyplot, so no figure is left open.
        ax : matplotlib Axes or sequence of Axes, optional
            Draw into these and create no figure. One Axes receives the bounds panel only (the
            estimators' bounds against the claim, titled with the audit's settings); a sequence
            must hold one Axes per panel, in this order: histograms and bounds, plus the rounds of
            a sequential audit (when ``len(result.rounds) > 1``), plus the ROC (when
            ``result.membership`` is not empty): 2, 3 or 4 Axes.

        Returns
        -------
        matplotlib.figure.Figure or Axes or sequence of Axes
            ``ax`` as given; otherwise the new Figure, its title giving α, the claimed ε_α, the
            runs per side, β (and σ when the configuration records a noise multiplier) above the
            verdict in words. Without ``path`` that Figure is made with pyplot, so ``plt.show()``
            shows it and the caller closes it; with ``path`` it is a plain Figure.

        Notes
        -----
        An estimator whose certified bound is 0 (nothing certified) is drawn as a hollow marker
        at 0, labelled "0 (nothing certified)", since its bar has no length.
        """
        try:
            from matplotlib.axes import Axes
            from matplotlib.figure import Figure
        except ImportError:  # pragma: no cover - the dev extra installs matplotlib
            raise ImportError("plotting needs matplotlib: pip install 'rdpest[plot]'") from None
        panels = self._plot_panel_count
        if ax is not None:
            if path is not None:
                raise ValueError(
                    "give plot() either path or ax, not both: with ax the caller owns the figure "
                    "and saves it (ax.figure.savefig)"
                )
            if isinstance(ax, Axes):
                self._plot_bounds(ax)
                ax.set_title(self._plot_title(), fontsize="small", wrap=True)
                return ax
            axes = list(np.ravel(np.asarray(ax, dtype=object))) if _is_sequence(ax) else None
            if axes is None or len(axes) != panels or not all(isinstance(a, Axes) for a in axes):
                raise ValueError(
                    f"ax must be one matplotlib Axes or a sequence of {panels} Axes (one per "
                    f"panel of this audit: histograms, bounds{self._optional_panels()}), got "
                    f"{ax!r}"
                )
            self._plot_panels(axes)
            axes[1].set_title(self._plot_title(), fontsize="small", wrap=True)
            return ax
        figsize = (11 + 5 * (panels - 2), 4.6)
        if path is None:
            import matplotlib.pyplot as plt

            fig = plt.figure(figsize=figsize)
        else:
            fig = Figure(figsize=figsize)
        self._plot_panels(list(fig.subplots(1, panels)))
        fig.suptitle(
            self._plot_title() + "\n" + self.verdict_sentence(), fontsize="small", wrap=True
        )
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=120)
        return fig

    @property
    def _plot_panel_count(self) -> int:
        """How many panels :meth:`plot` draws: 2, plus one for a sequential audit's rounds, plus
        one for the membership ROC when the result has membership readouts."""
        return 2 + (len(self.rounds) > 1) + bool(self.membership)

    def _optional_panels(self) -> str:
        """The optional panels of this result, as the error message on bad ``ax`` names them."""
        names = ["rounds"] * (len(self.rounds) > 1) + ["membership ROC"] * bool(self.membership)
        return "".join(f", {name}" for name in names)

    def _plot_title(self) -> str:
        """The audit's settings in one line: α, the claim, runs per side, β and σ if known."""
        n_without, n_with = len(self.losses_without_canary), len(self.losses_with_canary)
        runs = (
            f"n = {n_without} runs per side"
            if n_without == n_with
            else f"n = {n_without} without + {n_with} with the canary"
        )
        parts = [
            f"α = {self.alpha:g}",
            f"claimed ε_α = {self.claimed_epsilon:.4g}",
            runs,
            f"β = {self.beta:g}",
        ]
        sigma = _noise_multiplier(self.config)
        if sigma is not None:
            parts.append(f"σ = {sigma:.4g}")
        return "Rényi DP audit: " + ", ".join(parts)

    def _plot_panels(self, axes: list) -> None:
        """Draw the histograms, the bounds and (sequential audits) the rounds into ``axes``."""
        ax_hist = axes[0]
        both = np.concatenate([self.losses_without_canary, self.losses_with_canary])
        # Scores whose range leaves double range (finite, near ±1.8e308) are drawn scaled.
        span = float(both.max()) - float(both.min())  # Python floats: inf, not a warning
        scale = 1.0 if math.isfinite(span) else float(np.max(np.abs(both)))
        bins = np.histogram_bin_edges(both / scale, bins=40)
        for losses, label in (
            (self.losses_without_canary, "O: without canary"),
            (self.losses_with_canary, "O′: with canary"),
        ):
            ax_hist.hist(losses / scale, bins=bins, alpha=0.6, label=label)
        ax_hist.set_xlabel("canary score (loss)" + ("" if scale == 1.0 else f" / {scale:.3g}"))
        ax_hist.set_ylabel("runs")
        ax_hist.legend()
        self._plot_bounds(axes[1])
        if self.membership:
            self._plot_roc(axes[-1])
        if len(self.rounds) > 1:
            ax_rounds = axes[2]
            runs = [r["n_runs"] for r in self.rounds]
            ax_rounds.plot(runs, [r["lower_bound"] for r in self.rounds], "o-", label="bound")
            ax_rounds.axhline(self.claimed_epsilon, color="tab:red", ls="--", label="claimed ε_α")
            ax_rounds.set_xlabel("runs per side")
            ax_rounds.set_ylabel(f"certified D_{self.alpha:g} bound (each round at β/K)")
            ax_rounds.legend(loc="best", fontsize="small")

    def _plot_roc(self, ax) -> None:
        """The membership test's ROC on log-log axes (all runs, oriented by ``side``), its TPR at
        1% and 0.1% FPR, and the (ε, δ) line TPR = e^ε·FPR + δ at the certified ε."""
        from sklearn.metrics import roc_curve

        from rdpest.auditing.membership import oriented_scores

        m = self.membership
        member, other = self.losses_with_canary, self.losses_without_canary
        fpr, tpr, _ = roc_curve(*oriented_scores(member, other, m.get("side", "upper")))
        at = m.get("tpr_at_fpr", {})
        xs = [float(k) for k in at]
        # Log axes: zero rates drawn at half a run, and room for the TPR-at-FPR markers (0.001
        # lay outside the axes below 500 runs without the canary).
        floor = min([0.5 / max(1, other.size), *(x / 2 for x in xs)])
        ax.plot(np.maximum(fpr, floor), np.maximum(tpr, floor), label="ROC (all runs)")
        grid = np.geomspace(floor, 1.0, 200)
        ax.plot(grid, grid, color="gray", ls=":", label="chance")
        eps, delta = float(m["epsilon_lower_bound"]), float(m["delta"])
        if eps > 0:
            ax.plot(
                grid,
                np.minimum(math.exp(eps) * grid + delta, 1.0),
                color="tab:green",
                ls="--",
                label=f"certified ε = {eps:.2f} (δ = {delta:g})",
            )
        ax.scatter(
            xs,
            [max(v, floor) for v in at.values()],
            color="black",
            zorder=3,
            label="TPR at FPR (certifying half)",
        )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(floor, 1.0)
        ax.set_ylim(floor, 1.0)
        ax.set_xlabel("FPR (runs without the canary)")
        ax.set_ylabel("TPR (runs with the canary)")
        ax.set_title(
            f"membership inference: AUROC {float(m['auroc']):.3f} (certifying half)",
            fontsize="small",
        )
        ax.legend(loc="lower right", fontsize="small")

    def _plot_bounds(self, ax) -> None:
        """Each estimator's bound (bar; a hollow marker at 0 when nothing is certified) and
        point estimate against the claim."""
        names = list(self.estimates)
        ys = np.arange(len(names))
        bounds = [float(self.estimates[n]["lower_bound"]) for n in names]
        points = [float(self.estimates[n]["divergence"]) for n in names]
        colors = ["tab:green" if self.estimates[n]["certified"] else "tab:gray" for n in names]
        ax.barh(ys, bounds, color=colors, alpha=0.7, label="lower bound")
        zero = [i for i, b in enumerate(bounds) if not b > 0.0]
        if zero:
            ax.scatter(
                np.zeros(len(zero)),
                ys[zero],
                marker="D",
                s=70,
                facecolors="none",
                edgecolors=[colors[i] for i in zero],
                linewidths=1.8,
                zorder=4,
                clip_on=False,
                label="0 (nothing certified)",
            )
        ax.scatter(points, ys, color="black", zorder=3, label="point estimate")
        ax.axvline(self.claimed_epsilon, color="tab:red", ls="--", label="claimed ε_α")
        ax.set_yticks(ys, names)
        finite = [v for v in [*points, *bounds, self.claimed_epsilon] if math.isfinite(v)]
        ax.set_xlim(0.0, 1.15 * max([*finite, 1e-3]))
        ax.set_xlabel(f"D_{self.alpha:g} (grey: not certified)")
        ax.legend(loc="best", fontsize="small")


def _level_text(beta: float) -> str:
    """1 − β to two decimals beyond β's first significant digit (at least three): 0.9995 at
    β = 0.0005, where three decimals read as certainty (1.000)."""
    if 0.0 < beta < 1e-5:  # more digits would overflow the column (and round to 1 below 5e-16)
        return f"1-{beta:.0e}"
    digits = max(3, math.ceil(-math.log10(beta)) + 2) if 0.0 < beta < 1.0 else 3
    text = f"{1.0 - beta:.{min(digits, 15)}f}"
    return text[: max(len(text.rstrip("0")), text.index(".") + 4)]


def _is_sequence(value) -> bool:
    """Whether ``value`` is a list, tuple or array (of Axes, for :meth:`AuditResult.plot`)."""
    return isinstance(value, list | tuple | np.ndarray)


def _noise_multiplier(config: dict) -> float | None:
    """The noise multiplier σ a result's configuration records (a DP-SGD audit's pipeline), or
    None when it records none."""
    for where in (config.get("pipeline"), config):
        if isinstance(where, dict):
            sigma = where.get("noise_multiplier")
            if _is_number(sigma):
                return float(sigma)
    return None


#: The verdicts an audit gives (rdpest.auditing.power.verdict_of).
_VERDICTS = ("violation", "not_refuted", "underpowered")


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _checked_payload(payload: dict, where: str) -> dict[str, Any]:
    """The constructor arguments of an AuditResult from a parsed payload, each checked, so that
    what it reads back prints, plots and compares as the audit's own result did."""

    def need(key: str, kinds, what: str):
        if key not in payload:
            raise ValueError(f"{where} has no {key!r}")
        value = payload[key]
        if isinstance(value, bool) or not isinstance(value, kinds):
            raise ValueError(f"{where}: {key!r} must be {what}, got {type(value).__name__}")
        return value

    def fail(what: str):
        raise ValueError(f"{where}: {what}")

    arrays = {}
    for key in ("losses_without_canary", "losses_with_canary"):
        values = need(key, list, "a list of numbers")
        if not all(_is_number(v) for v in values):
            fail(f"{key!r} must be a flat list of numbers")
        arrays[key] = np.asarray(values, dtype=float).reshape(-1)
    alpha = float(need("alpha", int | float, "a number"))
    beta = float(need("beta", int | float, "a number"))
    claim = float(need("claimed_epsilon", int | float, "a number"))
    _check_values(*arrays.values(), claim, alpha, beta, fail)
    estimates = need("estimates", dict, "an object")
    for name, entry in estimates.items():
        if not isinstance(entry, dict) or not {
            "divergence",
            "lower_bound",
            "certified",
            "beta",
        } <= set(entry):
            fail(f"estimate {name!r} must have divergence, lower_bound, certified, beta")
        if not (_is_number(entry["divergence"]) and _is_number(entry["lower_bound"])):
            fail(f"estimate {name!r}: divergence and lower_bound must be numbers")
        if not (_is_number(entry["beta"]) and 0.0 < entry["beta"] < 1.0):
            fail(f"estimate {name!r}: beta must be a number in (0, 1)")
        if not isinstance(entry["certified"], bool):
            fail(f"estimate {name!r}: certified must be true or false")
    verdict = need("verdict", str, "a string")
    if verdict not in _VERDICTS:
        fail(f"'verdict' must be one of {', '.join(_VERDICTS)}, got {verdict!r}")
    sections = {
        key: value if isinstance(value := payload.get(key, {}), dict) else {}
        for key in ("config", "provenance", "power")
    }
    rounds = rounds if isinstance(rounds := payload.get("rounds", []), list) else []
    _check_power(sections["power"], verdict, fail)
    _check_rounds(sections["config"], rounds, fail)
    return {
        **arrays,
        "claimed_epsilon": claim,
        "alpha": alpha,
        "beta": beta,
        "estimates": estimates,
        "verdict": verdict,
        **sections,
        "rounds": rounds,
        "membership": _checked_membership(payload.get("membership", {}), where),
    }


def _check_values(without, with_, claim, alpha, beta, fail) -> None:
    """The scores and the audit's numbers, as every result (built or read) must have them."""
    for key, losses in (("losses_without_canary", without), ("losses_with_canary", with_)):
        if losses.ndim != 1 or losses.size == 0:
            fail(f"{key!r} must hold one loss per run (a non-empty 1-D array)")
        if not np.isfinite(losses).all():
            fail(f"{key!r} must hold finite numbers")
    if without.size != with_.size:
        fail("'losses_with_canary' and 'losses_without_canary' must have one loss per run each")
    if not (math.isfinite(alpha) and alpha > 1.0):
        fail(f"'alpha' must be a finite number > 1, got {alpha!r}")
    if not 0.0 < beta < 1.0:
        fail(f"'beta' must be in (0, 1), got {beta!r}")
    if not (math.isfinite(claim) and claim >= 0.0):
        fail(f"'claimed_epsilon' must be a finite number >= 0, got {claim!r}")


def _check_power(power: dict, verdict: str, fail) -> None:
    """What the verdict's sentence reads from the power record has the type it needs."""
    for key in ("max_certifiable", "target_power", "power_target", "target_epsilon"):
        if key in power and not _is_number(power[key]):
            fail(f"power {key!r} must be a number")
    for key in ("detectable_epsilon", "runs_needed"):
        if power.get(key) is not None and not _is_number(power[key]):
            fail(f"power {key!r} must be a number or null")
    unmodelled = power.get("unmodelled", [])
    if not (isinstance(unmodelled, list) and all(isinstance(n, str) for n in unmodelled)):
        fail("power 'unmodelled' must be a list of estimator names")
    for key in ("separated", "constant"):
        if not isinstance(power.get(key, False), bool):
            fail(f"power {key!r} must be true or false")
    if verdict == "underpowered" and "max_certifiable" not in power:
        fail("an 'underpowered' verdict needs power 'max_certifiable'")
    if "runs_needed" in power and not ("power_target" in power or "target_epsilon" in power):
        fail("power 'runs_needed' needs 'power_target'")


def _check_rounds(config: dict, rounds: list, fail) -> None:
    """A sequential audit's rounds, as the summary and the plot read them."""
    planned = config.get("rounds_planned", [])
    if not isinstance(planned, list):
        fail("config 'rounds_planned' must be a list")
    if not isinstance(config.get("earlier_analyses", []), list):
        fail("config 'earlier_analyses' must be a list")
    for r in rounds:
        if not (
            isinstance(r, dict)
            and all(_is_number(r.get(key)) for key in ("n_runs", "beta", "lower_bound"))
        ):
            fail("each round must have numbers 'n_runs', 'beta' and 'lower_bound'")
    if len(planned) > 1 and not (rounds and _is_number(config.get("max_runs"))):
        fail("a sequential audit ('rounds_planned') needs its 'rounds' and config 'max_runs'")


#: The keys a result's membership readouts must have (when it has any).
_MEMBERSHIP_KEYS = ("auroc", "tpr_at_fpr", "epsilon_lower_bound", "delta", "beta")


def _checked_membership(value, where: str) -> dict[str, Any]:
    """A payload's membership readouts: {} (older results) or a dict with numeric readouts."""
    if not isinstance(value, dict):
        raise ValueError(f"{where}: 'membership' must be an object, got {type(value).__name__}")
    if not value:
        return {}
    missing = [key for key in _MEMBERSHIP_KEYS if key not in value]
    if missing:
        raise ValueError(f"{where}: 'membership' has no {', '.join(map(repr, missing))}")
    numbers = [value[k] for k in _MEMBERSHIP_KEYS if k != "tpr_at_fpr"]
    rates = value["tpr_at_fpr"]
    if not isinstance(rates, dict):
        raise ValueError(f"{where}: membership 'tpr_at_fpr' must be an object")
    if not all(_is_number(v) for v in [*numbers, *rates.values()]):
        raise ValueError(f"{where}: the membership readouts must be numbers")
    return value
