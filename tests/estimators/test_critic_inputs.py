"""The critic's input transform (DVRenyiEstimator.critic_inputs, rdpest.estimators.critics).

"asinh" feeds the critic asinh((x − median)/s), s the interquartile range scaled to a normal's
standard deviation. Its claim is steadier point estimates on heavy-tailed pairs whose log ratio
levels off; the positive control below is the Student-t shift where the standard inputs gave
estimates from −1 to 8 for a divergence of 1. The bound's validity under it is checked by a
coverage cell in test_coverage_of_what_users_run.py.

"quadratic" appends the products z_i·z_j (i ≤ j) to the standardised z: the log ratio of two
Gaussians is a quadratic form, so a critic on these inputs can follow it where Q's sample stops.
Its positive control is a Gaussian scale change, where the standard critic levels off there and
underestimates by more than half; its bound is checked by coverage cells too.
"""

import pickle

import numpy as np
import pytest
import torch
from scipy import stats

from rdpest import DVRenyiEstimator
from rdpest.datasets import family_parameters, make_renyi_pair
from rdpest.estimators.critics import INPUT_TRANSFORMS, BoundedMLP, _standardisation

FAST = {"max_epochs": 30, "hidden_layer_sizes": (16,), "random_state": 0}


def test_asinh_inputs_are_the_robust_standardisation():
    rng = np.random.default_rng(0)
    x = rng.standard_t(3, (1000, 2)) * [1.0, 50.0] + [0.0, -7.0]
    x[0, 0] = 1e6  # one far outlier: it sets the standard deviation, not the robust scale
    centre, scale = _standardisation(x, "asinh")
    np.testing.assert_allclose(centre, np.median(x, axis=0), rtol=1e-12)
    q25, q75 = np.percentile(x, [25, 75], axis=0)
    # 2·Φ⁻¹(3/4): the interquartile range of a standard normal.
    np.testing.assert_allclose(scale, (q75 - q25) / (2 * stats.norm.ppf(0.75)), rtol=1e-12)
    assert scale[0] < 2.0 < _standardisation(x)[1][0]
    critic = BoundedMLP(centre, scale, (4,), "relu", 20.0, "asinh")
    z = critic.standardise(torch.as_tensor(x)).double().numpy()
    np.testing.assert_allclose(z, np.arcsinh((x - centre) / scale), rtol=1e-6, atol=1e-6)
    assert abs(z[0, 0]) < 15.0  # asinh(1e6/1.1): the outlier is a moderate input


def test_features_without_an_interquartile_range_keep_the_standard_scaling():
    x = np.zeros((100, 3))
    x[:20, 0] = np.arange(1, 21)  # over half the rows are 0: no interquartile range
    x[:, 1] = 5.0  # constant
    x[:, 2] = np.linspace(-1.0, 1.0, 100)
    standard, robust = _standardisation(x), _standardisation(x, "asinh")
    for i in (0, 1):
        assert robust[0][i] == standard[0][i] and robust[1][i] == standard[1][i]
    assert robust[0][2] == pytest.approx(0.0, abs=1e-15) and robust[1][2] != standard[1][2]
    # Rows near the float64 limit: the quantiles are taken on the rows over their peak.
    centre, scale = _standardisation(np.array([[1e308], [-1e308], [5e307], [0.0]]), "asinh")
    assert np.isfinite(centre).all() and np.isfinite(scale).all() and scale[0] > 0


def test_unknown_transforms_are_refused():
    X, Y, _ = make_renyi_pair("gaussian_shift", 2.0, 1.0, 100, random_state=0)
    with pytest.raises(ValueError, match="critic_inputs"):
        DVRenyiEstimator(critic_inputs="log").fit(X, Y)
    with pytest.raises(ValueError, match="critic inputs"):
        BoundedMLP(np.zeros(1), np.ones(1), (), "relu", 5.0, "log")
    assert INPUT_TRANSFORMS == ("standard", "asinh", "quadratic")


def test_quadratic_inputs_are_z_and_its_pairwise_products():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(50, 3)) * [1.0, 1e-9, 1e9] + [0.0, 4.0, -1e12]
    centre, scale = _standardisation(x, "quadratic")
    standard = _standardisation(x)
    np.testing.assert_array_equal(centre, standard[0])
    np.testing.assert_array_equal(scale, standard[1])
    critic = BoundedMLP(centre, scale, (4,), "relu", 20.0, "quadratic")
    assert critic.net[0].in_features == 3 + 6
    assert BoundedMLP(centre, scale, (), "relu", 20.0, "quadratic").net[0].in_features == 9
    features = critic.standardise(torch.as_tensor(x)).double().numpy()
    z = (x - centre) / scale
    products = [z[:, i] * z[:, j] for i in range(3) for j in range(i, 3)]
    np.testing.assert_allclose(features, np.column_stack([z, *products]), rtol=1e-6, atol=1e-6)
    # One feature: x ↦ (z, z²); any leading batch shape.
    one = BoundedMLP(np.zeros(1), np.full(1, 2.0), (), "relu", 20.0, "quadratic")
    out = one.standardise(torch.tensor([[[3.0]], [[-1.0]]], dtype=torch.float64))
    np.testing.assert_allclose(out.numpy(), [[[1.5, 2.25]], [[-0.5, 0.25]]])


def test_quadratic_critic_pickles_and_follows_a_quadratic_beyond_q():
    """A linear critic on quadratic inputs is h = a + b·z + c·z²: its second differences on an
    even grid are constant (float32 rounding: measured below 1e-4 relative). It is the form of a
    Gaussian scale change's log ratio, and on one (P's sd 2.15 against Q's 1) the fitted
    curvature is that of the exact log ratio, L(x) = x²/2·(1 − 1/2.15²) + const, within 20%
    (measured 2% on this seed); the standard critic, fitted on the same samples, gains less
    than half as much from x = 4 to 8, where Q has no rows (measured 6.7 against L's
    18.8: it levels off)."""
    X, Y, _ = make_renyi_pair("gaussian_scale", 1.25, 4.0, 2000, random_state=0)
    # L(x) = c·x² + const with c = (1 − 1/sd²)/2, sd P's standard deviation (Q's is 1).
    curvature = 0.5 * (1 - 1 / family_parameters("gaussian_scale", 1.25, 4.0)["std"] ** 2)
    params = {"alpha": 1.25, "random_state": 0, "critic_bound": 50.0}
    est = DVRenyiEstimator(**params, critic_inputs="quadratic", hidden_layer_sizes=()).fit(X, Y)
    assert est.critic_.inputs == "quadratic"
    restored = pickle.loads(pickle.dumps(est))
    grid = np.linspace(-8.0, 8.0, 9)
    np.testing.assert_array_equal(restored.log_ratio(grid), est.log_ratio(grid))
    h = est.critic_bound * np.arctanh(est.log_ratio(grid) / est.critic_bound)
    second = np.diff(h, 2)
    np.testing.assert_allclose(second, second.mean(), rtol=1e-4)
    exact_second = curvature * 2 * (grid[1] - grid[0]) ** 2
    assert second.mean() == pytest.approx(exact_second, rel=0.2)
    standard = DVRenyiEstimator(**params).fit(X, Y)
    g = standard.log_ratio(np.array([4.0, 8.0]))
    exact_rise = curvature * (64.0 - 16.0)
    assert g[1] - g[0] < exact_rise / 2


@pytest.mark.parametrize("scale, offset", [(1e-13, 0.0), (1.0, 1e8), (1e6, 1e12), (-2.0, 3.0)])
def test_asinh_estimates_are_invariant_to_an_affine_change_of_both_samples(scale, offset):
    """The median and the interquartile range move with the samples, so z is unchanged (for a
    negative scale z changes sign, and asinh is odd: the critic's first layer sees −z, which a
    ReLU network does not learn identically; that case only has to give a close estimate)."""
    X, Y, _ = make_renyi_pair("student_t_shift", 2.0, 1.0, 600, random_state=0)
    params = {**FAST, "critic_inputs": "asinh"}
    plain = DVRenyiEstimator(**params).fit(X, Y)
    moved = DVRenyiEstimator(**params).fit(X * scale + offset, Y * scale + offset)
    assert plain.divergence_ > 0.3
    if scale > 0:
        # Same float32 inputs up to rare last-bit flips (as for the standard transform in
        # test_dv.py: measured 0 for scalings and <= 1e-8 with offsets).
        assert moved.divergence_ == pytest.approx(plain.divergence_, abs=1e-6)
        assert moved.lower_bound_ == pytest.approx(plain.lower_bound_, abs=1e-6)
    else:
        assert np.isfinite(moved.divergence_) and moved.lower_bound_ >= 0.0


def test_asinh_critic_pickles_and_is_used_by_log_ratio_and_score():
    X, Y, _ = make_renyi_pair("student_t_shift", 2.0, 1.0, 400, random_state=1)
    est = DVRenyiEstimator(**FAST, critic_inputs="asinh").fit(X, Y)
    assert est.critic_.inputs == "asinh"
    restored = pickle.loads(pickle.dumps(est))
    grid = np.linspace(-1e4, 1e4, 7)
    np.testing.assert_array_equal(restored.log_ratio(grid), est.log_ratio(grid))
    assert restored.score(X, Y) == est.score(X, Y)
    # Beyond the bulk the network h = M·atanh(g/M) is linear in asinh z ≈ log|x| + const: equal
    # increments per decade of x (measured equal to 5e-5 relative from 1e4 to 1e6, float32). The
    # standard critic is a ramp in x there: it gains ~100 over the decade 1e2 -> 1e3 and sits at
    # its bound beyond.
    for sign in (1.0, -1.0):
        decades = sign * np.array([1e4, 1e5, 1e6])
        g = est.log_ratio(decades)
        h = est.critic_bound * np.arctanh(g / est.critic_bound)
        steps = np.diff(h)
        assert steps[1] == pytest.approx(steps[0], rel=1e-3)
        assert np.all(np.abs(g) < 0.9 * est.critic_bound)
    standard = DVRenyiEstimator(**FAST).fit(X, Y)
    assert np.all(np.abs(standard.log_ratio(np.array([-1e4, 1e4]))) > 0.99 * est.critic_bound)


@pytest.mark.slow
def test_asinh_inputs_steady_a_heavy_tailed_pair():
    """Positive control of the option's claim, a smaller spread: Student-t (3 degrees of freedom)
    shift, D_4 = 1, n = 500. Over these 10 fixed seeds the standard inputs' estimates ranged from
    −1.5 to 8.1 (sd 2.6, worst error 7.1: the critic extrapolates linearly into the tails, where
    the log ratio levels off to 0); asinh inputs' from 0.11 to 1.57 (sd 0.41, worst error 0.89).
    The thresholds (a third of the standard sd and worst error) sit a factor 2.5 or more from
    both; a transform that changed nothing fails both. The median error is not the claim: it
    favoured asinh on these seeds (0.33 against 0.60) and standard inputs over 20
    (benchmarks/results/point_estimates/inputs/: 0.34 against 0.24). Both use the range window,
    under which those figures were measured, so the test isolates the inputs: the default
    window ("guarded") itself removes most of the standard inputs' overshoot here (on these
    seeds sd 0.49, worst error 0.99; asinh 0.34 and 0.61)."""
    estimates = {"standard": [], "asinh": []}
    for seed in range(10):
        X, Y, truth = make_renyi_pair("student_t_shift", 4.0, 1.0, 500, random_state=seed)
        for inputs in estimates:
            est = DVRenyiEstimator(
                alpha=4.0, critic_inputs=inputs, point_window="range", random_state=seed
            ).fit(X, Y)
            estimates[inputs].append(est.divergence_)
    standard, robust = np.array(estimates["standard"]), np.array(estimates["asinh"])
    assert np.std(robust) < np.std(standard) / 3
    assert np.max(np.abs(robust - truth)) < np.max(np.abs(standard - truth)) / 3


@pytest.mark.slow
def test_quadratic_inputs_close_most_of_a_scale_changes_underestimate():
    """Positive control of the option's claim: Gaussian scale change (P's sd 1.78 against Q's 1),
    D_1.25 = 1, n = 2000, defaults otherwise. The standard critic levels off where Q's sample
    stops and underestimates on every seed (the control: a transform that changed nothing fails
    the second assertion); quadratic inputs keep rising there. Over 20 seeds the median
    relative errors were 0.36 and 0.14 (benchmarks/results/point_estimates/critic_inputs/), the
    exact log ratio's own bracket 0.13. On these 6 seeds: 0.39 and 0.18, the standard errors
    between −0.41 and −0.20. The thresholds sit a factor 1.5 or more from what was measured:
    a standard error below −0.1 on every seed, and quadratic's median below 0.7 of standard's
    (a transform that changed nothing gives 1)."""
    errors = {"standard": [], "quadratic": []}
    for seed in range(6):
        X, Y, truth = make_renyi_pair("gaussian_scale", 1.25, 1.0, 2000, random_state=seed)
        for inputs in errors:
            est = DVRenyiEstimator(alpha=1.25, critic_inputs=inputs, random_state=seed).fit(X, Y)
            errors[inputs].append((est.divergence_ - truth) / truth)
    standard, quadratic = np.array(errors["standard"]), np.array(errors["quadratic"])
    assert np.all(standard < -0.1)
    assert np.median(np.abs(quadratic)) < 0.7 * np.median(np.abs(standard))


@pytest.mark.parametrize("inputs", INPUT_TRANSFORMS)
def test_a_row_far_beyond_float32_gives_a_finite_critic_estimate_and_score(inputs):
    """Estimator reviewer's finding: a P row at 1e100 among N(1, 1) rows, landing in the
    certifying part, made the standardised input inf in float32 and the critic NaN there:
    divergence_ and score() were NaN, log_ratio([1e39]) NaN ("quadratic" from 1e20), and the
    certificate's NaN became a bound of 0. The critic must stay finite (its bound) however far
    out a row lies, and the fit match the one with the row at 1e10, beyond which the clamped
    critic is the same."""
    rng = np.random.default_rng(0)
    X, Y = rng.normal(1, 1, 200), rng.normal(0, 1, 200)
    fits = [
        DVRenyiEstimator(
            alpha=2.0, max_epochs=10, random_state=0, point_estimate="split", critic_inputs=inputs
        ).fit(np.r_[X[:-1], far], Y)
        for far in (1e10, 1e100, 1.7e308)
    ]
    for est in fits:
        values = est.log_ratio(np.array([0.0, 1e20, 1e39, 1e100, -1e300, 1.7e308]))
        assert np.all(np.isfinite(values)) and np.all(np.abs(values) <= est.critic_bound)
        assert np.isfinite(est.divergence_) and np.isfinite(est.score(X, Y))
    if inputs != "asinh":  # asinh keeps growing (asinh(1e100) = 231): a different critic there
        assert len({(e.divergence_, e.lower_bound_) for e in fits}) == 1
        assert fits[0].lower_bound_ > 0.0
