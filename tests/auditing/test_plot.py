"""AuditResult.plot: leaves matplotlib's state alone, draws into given Axes, says the settings."""

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.figure import Figure

from rdpest.auditing import AuditResult

ZERO_LABEL = "0 (nothing certified)"


def _result(*, bounds=(0.4, 0.0), sequential=False, config=None) -> AuditResult:
    """A result built directly: 50 runs per side, alpha 2, claim 1, beta 0.05."""
    rng = np.random.default_rng(0)
    estimates = {
        name: {
            "divergence": 0.6,
            "lower_bound": bound,
            "certified": True,
            "beta": 0.025,
            "estimator": "DVRenyiEstimator",
        }
        for name, bound in zip(["dv", "markov"], bounds, strict=False)
    }
    rounds = []
    if sequential:
        rounds = [
            {"n_runs": 20, "lower_bound": 0.1, "beta": 0.025},
            {"n_runs": 50, "lower_bound": 0.4, "beta": 0.025},
        ]
    return AuditResult(
        rng.normal(0.0, 1.0, 50),
        rng.normal(0.5, 1.0, 50),
        claimed_epsilon=1.0,
        alpha=2.0,
        beta=0.05,
        estimates=estimates,
        verdict="not_refuted",
        config={} if config is None else config,
        rounds=rounds,
    )


@pytest.fixture
def other_backend():
    """Switch to a non-Agg backend for the test (the old plot forced Agg), then restore."""
    before = matplotlib.get_backend()
    matplotlib.use("svg", force=True)
    yield "svg"
    matplotlib.use(before, force=True)


def _zero_markers(ax):
    return [c for c in ax.collections if c.get_label() == ZERO_LABEL]


def test_plot_leaves_the_backend_alone(other_backend, tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("plot() called matplotlib.use")

    monkeypatch.setattr(matplotlib, "use", refuse)
    fig = _result().plot(tmp_path / "audit.png")
    assert matplotlib.get_backend() == other_backend
    assert isinstance(fig, Figure) and (tmp_path / "audit.png").stat().st_size > 1000


def test_saving_to_a_file_leaves_no_open_figure(tmp_path):
    before = plt.get_fignums()
    _result(sequential=True).plot(tmp_path / "audit.png")
    assert plt.get_fignums() == before
    assert (tmp_path / "audit.png").stat().st_size > 1000


def test_without_a_path_the_figure_is_the_callers_to_show_and_close():
    before = plt.get_fignums()
    fig = _result().plot()
    try:
        assert fig.number not in before and fig.number in plt.get_fignums()
    finally:
        plt.close(fig)
    assert plt.get_fignums() == before


def test_given_axes_receive_the_panels_and_no_figure_is_made():
    fig, axes = plt.subplots(1, 3)
    try:
        before = plt.get_fignums()
        result = _result(sequential=True)
        assert result.plot(ax=axes) is axes
        assert plt.get_fignums() == before and len(fig.axes) == 3
        hist, bounds, rounds = axes
        assert len(hist.patches) == 2 * 40  # two histograms of 40 bins
        assert [t.get_text() for t in bounds.get_yticklabels()] == ["dv", "markov"]
        xs, ys = rounds.lines[0].get_data()
        assert list(xs) == [20, 50] and list(ys) == [0.1, 0.4]
        assert "α = 2" in bounds.get_title()
    finally:
        plt.close(fig)


def test_one_given_axes_receives_the_bounds_panel():
    fig = Figure()
    ax = fig.add_subplot()
    before = plt.get_fignums()
    assert _result().plot(ax=ax) is ax
    assert plt.get_fignums() == before and fig.axes == [ax]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["dv", "markov"]
    assert [round(p.get_width(), 6) for p in ax.patches] == [0.4, 0.0]
    assert "claimed ε_α = 1" in ax.get_title()


def test_bad_axes_are_refused():
    fig = Figure()
    two = fig.subplots(1, 2)
    with pytest.raises(ValueError, match="sequence of 3 Axes"):
        _result(sequential=True).plot(ax=two)
    with pytest.raises(ValueError, match="one matplotlib Axes or a sequence of 2"):
        _result().plot(ax="left")
    with pytest.raises(ValueError, match="either path or ax"):
        _result().plot("audit.png", ax=two[0])


def test_the_title_gives_the_settings_and_sigma_for_dpsgd():
    fig = _result().plot(ax=None, path=None)
    try:
        title = fig.get_suptitle()
    finally:
        plt.close(fig)
    for part in ("α = 2", "claimed ε_α = 1", "n = 50 runs per side", "β = 0.05"):
        assert part in title
    assert "σ" not in title
    assert "could" in title or "refute" in title.lower()  # the verdict sentence follows

    dpsgd = {"pipeline": {"mechanism": "opacus-dp-sgd", "noise_multiplier": 1.3}}
    fig = _result(config=dpsgd).plot(ax=None, path=None)
    try:
        assert "σ = 1.3" in fig.get_suptitle()
    finally:
        plt.close(fig)


def test_a_zero_bound_gets_a_visible_marker_at_zero(tmp_path):
    fig = _result(bounds=(0.4, 0.0)).plot(tmp_path / "audit.png")
    bounds_axis = fig.axes[1]
    (marker,) = _zero_markers(bounds_axis)
    np.testing.assert_array_equal(marker.get_offsets(), [[0.0, 1.0]])  # markov's row, at 0
    faces = marker.get_facecolors()
    assert len(faces) == 0 or faces[:, 3].max() == 0.0  # hollow: no face colour
    assert marker.get_edgecolors()[:, 3].min() > 0.0 and marker.get_sizes()[0] > 0
    assert not marker.get_clip_on()  # a marker at the axis edge is not cut in half
    legend = [t.get_text() for t in bounds_axis.get_legend().get_texts()]
    assert ZERO_LABEL in legend
    # Positive bounds get no such marker.
    fig = _result(bounds=(0.4, 0.3)).plot(tmp_path / "audit2.png")
    assert _zero_markers(fig.axes[1]) == []


def test_scores_beyond_the_histograms_range_are_drawn_scaled(tmp_path):
    # ±1e308 are finite (evaluate accepts them), but their range overflowed numpy's bin edges
    # ("Too many bins for data range").
    result = _result()
    result.losses_without_canary = np.full(50, -1e308)
    result.losses_with_canary = np.full(50, 1e308)
    fig = result.plot()
    try:
        assert fig.axes[0].get_xlabel() == "canary score (loss) / 1e+308"
    finally:
        plt.close(fig)
    assert _result().plot().axes[0].get_xlabel() == "canary score (loss)"
    plt.close("all")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"losses_with_canary": np.zeros(30)}, "one loss per run each"),
        ({"losses_without_canary": np.array([0.0, np.nan] * 25)}, "must hold finite numbers"),
        ({"losses_without_canary": [], "losses_with_canary": []}, "non-empty 1-D"),
        ({"losses_with_canary": np.zeros((25, 2))}, "non-empty 1-D"),
        ({"alpha": 1.0}, "'alpha' must be a finite number > 1"),
        ({"alpha": float("inf")}, "'alpha' must be a finite number > 1"),
        ({"beta": 0.0}, r"'beta' must be in \(0, 1\)"),
        ({"claimed_epsilon": float("inf")}, "'claimed_epsilon' must be a finite number"),
        ({"claimed_epsilon": "one"}, "must be numbers"),
        ({"alpha": "2"}, "must be numbers"),
        ({"losses_with_canary": ["a"] * 50}, "the losses must be numbers"),
        ({"verdict": "ok"}, "'verdict' must be one of"),
    ],
)
def test_a_result_built_directly_is_checked_as_a_read_one_is(change, message):
    # Unchecked, unequal sides printed "30 runs with and 30 without", and NaN losses were written
    # to result.json, which from_json then refused: a saved result that could not be read.
    good = _result()
    fields = {key: getattr(good, key) for key in good.__dataclass_fields__}
    with pytest.raises(ValueError, match=f"AuditResult: .*{message}"):
        AuditResult(**{**fields, **change})


def test_the_claim_is_printed_with_the_bounds_digits():
    # A bound of 1.25187 above a claim of 1.2518: "1.252" beside "1.2519" read as below it.
    result = _result(bounds=(1.25187, 0.0))
    result.claimed_epsilon = 1.2518
    assert "claimed epsilon_alpha = 1.2518," in result.summary()
    result.claimed_epsilon = 1.0
    assert "claimed epsilon_alpha = 1," in result.summary()
    result.claimed_epsilon = 2e-5
    assert "claimed epsilon_alpha = 2e-05," in result.summary()
