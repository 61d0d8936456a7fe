"""Stacked DP-SGD runs (rdpest.auditing.dpsgd.stacking): each copy must be exactly one DP-SGD run.

The claim tested: run k of ``train_dp_sgd_many(seeds=...)`` follows the trajectory of
``train_dp_sgd(seed=seeds[k])`` (plain Opacus, one model) with clipping that binds and noise on,
so it is the same DP-SGD, not an approximation of it. Tolerances: the two paths compute the same
float32 sums in a different order (batched products instead of one per model), so parameters
agree to rounding, about 1e-7 relative per step; 1e-5 absolute after tens of steps leaves room
for that and is far below any real difference (one noise draw moves a parameter by
σ·C·lr/n ≈ 1e-2 here).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from rdpest import DVRenyiEstimator
from rdpest.auditing import Auditor
from rdpest.auditing.auditor import runs_per_call
from rdpest.auditing.dpsgd import DPSGDAuditor
from rdpest.auditing.dpsgd import auditor as dpsgd_module
from rdpest.auditing.dpsgd.canaries import make_canary
from rdpest.auditing.dpsgd.config import DPSGDConfig
from rdpest.auditing.dpsgd.models import make_model
from rdpest.auditing.dpsgd.run import DPSGDRun, resolve_stack_runs
from rdpest.auditing.dpsgd.stacking import (
    MAX_STACK,
    MAX_STACK_CUDA,
    TESTED_OPACUS,
    StackedLinear,
    auto_stack_size,
    opacus_supports_stacking,
    opacus_version_message,
    stack_model,
    stackable,
    unstack_model,
)
from rdpest.auditing.dpsgd.training import train_dp_sgd, train_dp_sgd_many
from tests.helpers import flat_parameters

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")
# Stacked training specialises two Opacus methods of the releases it was checked against and is
# refused on any other (stacking.TESTED_OPACUS); tests that train stacked are skipped there, and
# test_stacking_is_refused_on_an_unchecked_opacus_release checks the refusal itself.
NEEDS_STACKING = pytest.mark.skipif(
    not opacus_supports_stacking(),
    reason=f"stacking is refused on this Opacus release: {opacus_version_message()}",
)


@pytest.fixture(scope="module")
def data(digits_slice):
    return digits_slice


def _model(name_or_net, n_features=64, n_classes=10, seed=0):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if isinstance(name_or_net, str):
            return make_model(name_or_net, n_features, n_classes)
        return name_or_net()


def _gradient_norms(model: nn.Module, X, y) -> np.ndarray:
    """Per-example gradient norms at the model's current weights (to check clipping binds)."""
    norms = []
    for xi, yi in zip(torch.from_numpy(X), torch.from_numpy(y), strict=True):
        model.zero_grad()
        nn.functional.cross_entropy(model(xi[None]), yi[None]).backward()
        norms.append(float(torch.cat([p.grad.flatten() for p in model.parameters()]).norm()))
    model.zero_grad()
    return np.array(norms)


def _relu_no_bias():
    return nn.Sequential(
        nn.Flatten(), nn.Linear(64, 16, bias=False), nn.ReLU(), nn.Linear(16, 10, bias=False)
    )


# ------------------------------------------------------------------------------------------------
# each stacked copy is the single Opacus run with its seed
@NEEDS_STACKING
@pytest.mark.parametrize("name", ["lr", "mlp", "relu_no_bias"])
@pytest.mark.parametrize("noise_multiplier", [0.0, 1.0])
def test_each_stacked_copy_is_the_single_run_with_its_seed(data, name, noise_multiplier):
    X, y = data
    model = _model(_relu_no_bias if name == "relu_no_bias" else name)
    C = 0.05
    # Clipping must bind for the comparison to test it: most gradients are longer than C.
    assert np.median(_gradient_norms(model, X, y)) > 2 * C
    seeds = [11, 3, 11, 250]  # a repeated seed must give the identical run
    kwargs = {"noise_multiplier": noise_multiplier, "max_grad_norm": C, "steps": 20}
    many = train_dp_sgd_many(model, X, y, seeds=seeds, **kwargs)
    assert len(many) == len(seeds)
    for seed, stacked in zip(seeds, many, strict=True):
        single = train_dp_sgd(model, X, y, seed=seed, **kwargs)
        assert type(stacked) is type(model)
        assert torch.allclose(flat_parameters(stacked), flat_parameters(single), atol=1e-5, rtol=0)
    assert torch.equal(flat_parameters(many[0]), flat_parameters(many[2]))
    moved = (flat_parameters(many[0]) - flat_parameters(model)).abs().max()
    assert moved > 1e-3  # training did something
    if noise_multiplier > 0:
        assert not torch.allclose(flat_parameters(many[0]), flat_parameters(many[1]), atol=1e-4)


@NEEDS_STACKING
@pytest.mark.parametrize("frozen", ["0.weight", "0.bias", "2.weight"])
def test_frozen_parameters_stay_frozen_as_in_a_single_run(frozen):
    # A frozen layer is left out of Opacus's norms, noise and step; stacked copies must do the
    # same, or they would train it, clip the other layers harder and shift every noise draw.
    rng = np.random.default_rng(0)
    X = rng.random((40, 8), dtype=np.float32)
    y = (X[:, 0] > 0.5).astype(np.int64)
    model = _model(lambda: nn.Sequential(nn.Linear(8, 6), nn.Tanh(), nn.Linear(6, 2)))
    model.get_parameter(frozen).requires_grad_(False)
    kwargs = {"noise_multiplier": 1.0, "max_grad_norm": 0.05, "steps": 10, "learning_rate": 5.0}
    many = train_dp_sgd_many(model, X, y, seeds=[2, 3], **kwargs)
    for seed, stacked in zip([2, 3], many, strict=True):
        single = train_dp_sgd(model, X, y, seed=seed, **kwargs)
        assert torch.allclose(flat_parameters(stacked), flat_parameters(single), atol=1e-5, rtol=0)
        assert torch.equal(stacked.get_parameter(frozen), model.get_parameter(frozen))
        assert not stacked.get_parameter(frozen).requires_grad


@NEEDS_STACKING
def test_stacked_noise_is_sigma_c_per_copy_and_independent_across_copies():
    # As in test_noise_is_sigma_c_on_the_summed_gradient: C = 1e-6 makes the clipped gradient
    # negligible, so one step of size 1 moves every parameter of copy k by -N(0, (σC)²) drawn
    # from run k's stream. 3 copies × 62 parameters: the sd estimate of each copy is within 15%
    # (about 1.7 standard errors of sqrt(1/(2·62))); copies are uncorrelated (|r| < 0.4, about
    # 3 standard errors of 1/sqrt(62)).
    rng = np.random.default_rng(0)
    X = rng.random((50, 30), dtype=np.float32)
    y = (X[:, 0] > 0.5).astype(np.int64)
    model = _model("lr", 30, 2)
    out = train_dp_sgd_many(
        model,
        X,
        y,
        seeds=[0, 1, 2],
        noise_multiplier=1e6,
        max_grad_norm=1e-6,
        steps=1,
        learning_rate=50.0,
    )
    deltas = [(flat_parameters(m) - flat_parameters(model)).numpy() for m in out]
    for delta in deltas:
        assert np.std(delta) == pytest.approx(1.0, rel=0.15)
    corr = np.corrcoef(deltas)
    assert np.all(np.abs(corr[np.triu_indices(3, 1)]) < 0.4)


@NEEDS_STACKING
def test_stacking_leaves_the_model_and_global_rng_alone(data):
    X, y = data
    model = _model("lr")
    before = flat_parameters(model)
    state = torch.get_rng_state()
    train_dp_sgd_many(model, X, y, seeds=[1, 2], noise_multiplier=1.0, steps=2)
    assert torch.equal(flat_parameters(model), before)
    assert torch.equal(torch.get_rng_state(), state)


# ------------------------------------------------------------------------------------------------
# the stacked layer and what can be stacked
def test_stacked_linear_rows_use_their_own_copy():
    layer = nn.Linear(3, 2)
    stacked = StackedLinear(layer, 3)
    with torch.no_grad():
        stacked.weight[1] += 1.0
    x = torch.randn(3 * 4, 3)
    out = stacked(x)
    assert torch.allclose(out[:4], layer(x[:4]), atol=1e-6)
    assert torch.allclose(out[8:], layer(x[8:]), atol=1e-6)
    assert not torch.allclose(out[4:8], layer(x[4:8]), atol=1e-3)
    with pytest.raises(ValueError, match="rows"):
        stacked(torch.randn(5, 3))


def test_stack_and_unstack_round_trip():
    model = _model("mlp")
    stacked = stack_model(model, 4)
    models = unstack_model(stacked, model)
    assert len(models) == 4
    assert all(torch.equal(flat_parameters(m), flat_parameters(model)) for m in models)


def test_what_can_be_stacked():
    assert stackable(make_model("lr", 64, 10)) and stackable(make_model("mlp", 64, 10))
    assert stackable(make_model("lr", 64, 10), input_ndim=4)  # led by Flatten
    assert stackable(nn.Sequential(nn.Linear(4, 2)))
    assert not stackable(nn.Sequential(nn.Linear(4, 2)), input_ndim=3)  # no Flatten
    assert not stackable(make_model("cnn", 64, 10))
    assert not stackable(nn.Linear(4, 2))
    assert not stackable(nn.Sequential(nn.Linear(4, 3), nn.Dropout(), nn.Linear(3, 2)))
    assert not stackable(nn.Sequential(nn.Linear(4, 3), nn.PReLU(), nn.Linear(3, 2)))
    assert not stackable(nn.Sequential(nn.Tanh()))
    assert not stackable(nn.Sequential(nn.Linear(4, 3), nn.ReLU(inplace=True), nn.Linear(3, 2)))
    assert not stackable(nn.Sequential(nn.Flatten(start_dim=2), nn.Linear(4, 2)), input_ndim=3)
    layer = nn.Linear(3, 3)
    assert not stackable(nn.Sequential(layer, nn.Tanh(), layer))  # a layer used twice
    tied = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    tied[1].weight = tied[0].weight
    assert not stackable(tied)

    class MyLinear(nn.Linear):  # a subclass may use its weights differently
        pass

    assert not stackable(nn.Sequential(MyLinear(4, 2)))


@NEEDS_STACKING
def test_auto_stack_size_caps_memory():
    assert auto_stack_size(make_model("lr", 64, 10), 900) == MAX_STACK
    assert auto_stack_size(make_model("lr", 64, 10), 900, device="cuda") == MAX_STACK_CUDA
    assert auto_stack_size(make_model("cnn", 64, 10), 900, device="cuda") == 1
    assert auto_stack_size(make_model("cnn", 64, 10), 900) == 1
    # MNIST-sized full batch: 60,000 × (784 + 10) floats per copy is over the budget alone.
    assert auto_stack_size(make_model("lr", 784, 10), 60_000) == 1
    assert 1 < auto_stack_size(make_model("lr", 784, 10), 10_000) < MAX_STACK


@NEEDS_STACKING
def test_resolve_stack_runs():
    lr, cnn = make_model("lr", 64, 10), make_model("cnn", 64, 10)
    common = {"n_rows": 900, "input_ndim": 2}
    assert resolve_stack_runs("auto", lr, sample_rate=1.0, **common) == MAX_STACK
    assert resolve_stack_runs("auto", lr, sample_rate=0.5, **common) == 1
    assert resolve_stack_runs("auto", lr, sample_rate=1.0, grad_sample_mode="ew", **common) == 1
    assert resolve_stack_runs("auto", cnn, sample_rate=1.0, **common) == 1
    assert resolve_stack_runs(1, cnn, sample_rate=0.5, **common) == 1
    assert resolve_stack_runs(40, lr, sample_rate=1.0, **common) == 40
    for value, match in [(0, "stack_runs"), (True, "stack_runs"), ("all", "stack_runs")]:
        with pytest.raises(ValueError, match=match):
            resolve_stack_runs(value, lr, sample_rate=1.0, **common)
    with pytest.raises(ValueError, match=r"nn\.Sequential of nn\.Linear"):
        resolve_stack_runs(4, cnn, sample_rate=1.0, **common)
    with pytest.raises(ValueError, match="full-batch"):
        resolve_stack_runs(4, lr, sample_rate=0.5, **common)
    with pytest.raises(ValueError, match="ghost"):
        resolve_stack_runs(4, lr, sample_rate=1.0, grad_sample_mode="hooks", **common)


@NEEDS_STACKING
def test_train_dp_sgd_many_rejects_bad_input(data):
    X, y = data
    with pytest.raises(ValueError, match=r"nn\.Sequential of nn\.Linear"):
        train_dp_sgd_many(make_model("cnn", 64, 10), X, y, seeds=[1], noise_multiplier=1.0)
    with pytest.raises(ValueError, match="seeds is empty"):
        train_dp_sgd_many(make_model("lr", 64, 10), X, y, seeds=[], noise_multiplier=1.0)
    with pytest.raises(ValueError, match="seed"):
        train_dp_sgd_many(make_model("lr", 64, 10), X, y, seeds=[-1], noise_multiplier=1.0)
    for seeds in (7, np.array(5), np.zeros((2, 2), dtype=int), "12"):
        with pytest.raises(ValueError, match="seeds must be a 1-D sequence"):
            train_dp_sgd_many(make_model("lr", 64, 10), X, y, seeds=seeds, noise_multiplier=1.0)
    a, b = train_dp_sgd_many(
        make_model("lr", 64, 10), X, y, seeds=np.array([4, 5]), noise_multiplier=1.0, steps=2
    )
    assert not torch.equal(flat_parameters(a), flat_parameters(b))
    with pytest.raises(ValueError, match="noise_multiplier"):
        train_dp_sgd_many(make_model("lr", 64, 10), X, y, seeds=[1], noise_multiplier=-1.0)


# ------------------------------------------------------------------------------------------------
# the score function and the auditor
def _run(data, stack_runs="auto", **settings):
    X, y = data
    canary = make_canary("blank", X, y, label=3)
    config = DPSGDConfig(**{"noise_multiplier": 1.0, "steps": 5, **settings})
    return DPSGDRun("lr", X, y, canary, config=config, stack_runs=stack_runs)


@NEEDS_STACKING
def test_score_many_equals_one_call_per_seed(data):
    stacked, single = _run(data, stack_runs=3), _run(data, stack_runs=1)
    assert stacked.runs_per_call == 3 and single.runs_per_call == 1
    assert _run(data).runs_per_call == MAX_STACK
    assert _run(data, sample_rate=0.5).runs_per_call == 1
    seeds = [5, 6, 7, 8, 9]  # two stacks: 3 + 2
    for include in (False, True):
        many = stacked.score_many(include, seeds)
        assert many == pytest.approx([single(include, s) for s in seeds], abs=1e-5)
        assert single.score_many(include, seeds) == [single(include, s) for s in seeds]
    with pytest.raises(ValueError, match="stack_runs=4 is not possible"):
        _run(data, stack_runs=4, sample_rate=0.5)
    with pytest.raises(ValueError, match="seeds must be a 1-D sequence"):
        stacked.score_many(True, 5)


class _GroupScore:
    """A score function with score_many that records the groups it is given."""

    def __init__(self, runs_per_call=4, wrong_length=False):
        self.runs_per_call = runs_per_call
        self.wrong_length = wrong_length
        self.groups: list[tuple[bool, tuple[int, ...]]] = []

    def __call__(self, include_canary, seed):
        return float(seed % 1000) / 1000 + (0.5 if include_canary else 0.0)

    def score_many(self, include_canary, seeds):
        self.groups.append((include_canary, tuple(seeds)))
        scores = [self(include_canary, s) for s in seeds]
        return scores[:-1] if self.wrong_length else scores


def _auditor(score_fn, **kwargs):
    estimators = {"dv": DVRenyiEstimator(alpha=2.0, random_state=0, max_epochs=5)}
    options = {"n_runs": 10, "estimators": estimators, "progress": False, **kwargs}
    return Auditor(score_fn, 1.0, **options)


def test_auditor_hands_out_fixed_groups_and_resumes_by_group(tmp_path):
    fn = _GroupScore()
    without, with_ = _auditor(fn).collect()
    reference = _GroupScore()
    expected = ([reference(False, s) for s in _seeds(0)], [reference(True, s) for s in _seeds(1)])
    np.testing.assert_array_equal(without, expected[0])
    np.testing.assert_array_equal(with_, expected[1])
    # Groups are runs 0-3, 4-7 and 8-9 of each arm.
    assert sorted((arm, len(g)) for arm, g in fn.groups) == sorted(
        [(False, 4), (False, 4), (False, 2), (True, 4), (True, 4), (True, 2)]
    )
    assert (False, tuple(_seeds(0)[4:8])) in fn.groups
    # Resume: drop runs 5 and 9 of the arm without the canary from a finished store; only their
    # groups are trained again, whole, and only the missing runs are appended.
    store = tmp_path / "store"
    _auditor(_GroupScore(), store=store).collect()
    lines = (store / "runs.jsonl").read_text().splitlines()
    kept = [
        ln
        for ln in lines
        if not ('"arm": 0' in ln and ('"index": 5,' in ln or '"index": 9,' in ln))
    ]
    assert len(kept) == len(lines) - 2
    (store / "runs.jsonl").write_text("\n".join(kept) + "\n")
    again = _GroupScore()
    without2, with2 = _auditor(again, store=store).collect()
    assert sorted(again.groups) == sorted(
        [(False, tuple(_seeds(0)[4:8])), (False, tuple(_seeds(0)[8:]))]
    )
    np.testing.assert_array_equal(without2, without)
    np.testing.assert_array_equal(with2, with_)
    assert len((store / "runs.jsonl").read_text().splitlines()) == 20


def _seeds(arm):
    from rdpest.auditing.auditor import run_seed

    return [run_seed(0, arm, i) for i in range(10)]


def test_auditor_rejects_a_bad_group_protocol():
    for value in (0, 2.5, None, True):
        with pytest.raises(ValueError, match="runs_per_call"):
            _auditor(_GroupScore(runs_per_call=value)).collect()
    with pytest.raises(ValueError, match="returned 3 scores for 4 seeds"):
        _auditor(_GroupScore(wrong_length=True)).collect()
    assert runs_per_call(lambda include, seed: 0.0) == 1


# A small stacked DP-SGD audit (the auditor clones the estimator, so sharing it is safe).
_STACKED_AUDIT = {
    "noise_multiplier": 1.0,
    "steps": 3,
    "n_runs": 10,
    "stack_runs": 4,
    "progress": False,
    "estimators": {"dv": DVRenyiEstimator(alpha=2.0, random_state=0, max_epochs=5)},
}


@NEEDS_STACKING
def test_stacked_audit_is_identical_for_any_n_jobs_and_after_interruption(tmp_path):
    options = _STACKED_AUDIT
    one = DPSGDAuditor(n_jobs=1, **options).auditor().collect()
    two = DPSGDAuditor(n_jobs=2, **options).auditor().collect()
    np.testing.assert_array_equal(one[0], two[0])
    np.testing.assert_array_equal(one[1], two[1])
    unstacked = DPSGDAuditor(**{**options, "stack_runs": 1}).auditor().collect()
    np.testing.assert_allclose(one[0], unstacked[0], atol=1e-5, rtol=0)
    np.testing.assert_allclose(one[1], unstacked[1], atol=1e-5, rtol=0)
    # Interrupted after a few runs (a truncated store), then resumed: the same numbers, bit for bit.
    store = tmp_path / "audit"
    DPSGDAuditor(store=store, **options).auditor().collect()
    lines = (store / "runs.jsonl").read_text().splitlines()
    (store / "runs.jsonl").write_text("\n".join(lines[:7]) + "\n" + lines[7][:10])
    resumed = DPSGDAuditor(store=store, **options).auditor().collect()
    np.testing.assert_array_equal(resumed[0], one[0])
    np.testing.assert_array_equal(resumed[1], one[1])


@pytest.mark.parametrize("version", ["1.7.0", "9.0.0", "1.4.2"])
def test_stacking_is_refused_on_an_unchecked_opacus_release(data, monkeypatch, version):
    """Catches stacked training on an Opacus release it was not checked against (its two
    specialised Opacus methods may no longer mirror Opacus's, silently changing the noise or the
    clipping of every stacked run): "auto" falls back to one run at a time, giving the plain
    runs' scores, and an explicit stack size, or train_dp_sgd_many, is refused naming the
    release; an audit asking for a stack is refused before it pretrains."""
    import opacus

    monkeypatch.setattr(opacus, "__version__", version)
    assert not opacus_supports_stacking()
    assert version in opacus_version_message() and TESTED_OPACUS[0] in opacus_version_message()
    lr = make_model("lr", 64, 10)
    assert resolve_stack_runs("auto", lr, n_rows=900, input_ndim=2, sample_rate=1.0) == 1
    assert auto_stack_size(lr, 900) == 1
    with pytest.raises(ValueError, match=rf"checked against Opacus.*not the installed {version}"):
        resolve_stack_runs(4, lr, n_rows=900, input_ndim=2, sample_rate=1.0)
    X, y = data
    with pytest.raises(ValueError, match="checked against Opacus"):
        train_dp_sgd_many(lr, X, y, seeds=[1], noise_multiplier=1.0)
    # The fallback trains the runs one by one: score_many gives exactly the single runs' scores.
    fallback = _run(data)
    assert fallback.runs_per_call == 1
    seeds = [5, 6]
    assert fallback.score_many(True, seeds) == [fallback(True, s) for s in seeds]
    with pytest.raises(ValueError, match=r"stack_runs=4 is not possible.*checked against Opacus"):
        _run(data, stack_runs=4)

    def no_training(*args, **kw):
        raise AssertionError("pretraining started before the stack size was checked")

    monkeypatch.setattr(dpsgd_module, "pretrain", no_training)
    with pytest.raises(ValueError, match=r"stack_runs=4 is not possible.*checked against Opacus"):
        DPSGDAuditor(noise_multiplier=1.0, stack_runs=4, n_runs=20).build()


def test_the_installed_opacus_is_recognised_by_its_release():
    """Catches a version check that compares the wrong part of the version (a patch release of
    a checked minor release must stack, another minor release must not)."""
    import opacus

    assert opacus_supports_stacking() == (
        ".".join(opacus.__version__.split(".")[:2]) in TESTED_OPACUS
    )
    for release in TESTED_OPACUS:
        for version in (f"{release}.0", f"{release}.7", f"{release}.1.dev3"):
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(opacus, "__version__", version)
                assert opacus_supports_stacking(), version


@NEEDS_STACKING
def test_stacked_audit_on_a_dask_local_cluster_gives_identical_results(dask_backend):
    options = _STACKED_AUDIT
    expected = DPSGDAuditor(n_jobs=1, **options).auditor().collect()
    with dask_backend():
        got = DPSGDAuditor(n_jobs=2, **options).auditor().collect()
    np.testing.assert_array_equal(expected[0], got[0])
    np.testing.assert_array_equal(expected[1], got[1])


def test_impossible_stack_runs_fails_before_pretraining(monkeypatch):
    def no_training(*args, **kw):
        raise AssertionError("training started before validation finished")

    monkeypatch.setattr(dpsgd_module, "pretrain", no_training)
    with pytest.raises(ValueError, match="stack_runs=8 is not possible"):
        DPSGDAuditor(noise_multiplier=1.0, model="cnn", stack_runs=8, n_runs=20).build()
    with pytest.raises(ValueError, match="stack_runs"):
        DPSGDAuditor(noise_multiplier=1.0, stack_runs="many", n_runs=20).build()


@NEEDS_STACKING
@CUDA
def test_cuda_stacked_runs_equal_single_runs(data):
    X, y = data
    model = _model("mlp")
    kwargs = {"noise_multiplier": 1.0, "max_grad_norm": 0.05, "steps": 10, "device": "cuda"}
    many = train_dp_sgd_many(model, X, y, seeds=[1, 2, 3], **kwargs)
    assert next(many[0].parameters()).device.type == "cuda"
    for seed, stacked in zip([1, 2, 3], many, strict=True):
        single = train_dp_sgd(model, X, y, seed=seed, **kwargs)
        assert torch.allclose(flat_parameters(stacked), flat_parameters(single), atol=1e-4, rtol=0)
