"""Tests of the DP-SGD audit's building blocks: data, models, canaries and training runs."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from rdpest.auditing import DPSGDAuditor
from rdpest.auditing.dpsgd.canaries import canary_loss, make_canary
from rdpest.auditing.dpsgd.config import DPSGDConfig
from rdpest.auditing.dpsgd.data import check_class_count, load_arrays, load_npz, split_pretrain
from rdpest.auditing.dpsgd.models import make_model
from rdpest.auditing.dpsgd.run import DPSGDRun
from rdpest.auditing.dpsgd.training import pretrain, train_dp_sgd
from tests.helpers import flat_parameters

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")


@pytest.fixture(scope="module")
def small_audit(digits):
    """A 200-row stratified slice of the digits audit half, and θ₀ of an LR model."""
    X, y = digits
    X_pre, y_pre, X_audit, y_audit = split_pretrain(X, y, seed=0)
    _, _, X_small, y_small = split_pretrain(X_audit, y_audit, pretrain_fraction=0.75, seed=1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = make_model("lr", 64, 10)
    theta0 = pretrain(model, X_pre, y_pre, epochs=10, seed=0)
    model.load_state_dict(theta0)
    return X_small, y_small, model, theta0


def _toy(n=30, d=4, seed=0):
    X = np.random.default_rng(seed).random((n, d), dtype=np.float32)
    y = (X[:, 0] > 0.5).astype(np.int64)
    return X, y


# ------------------------------------------------------------------------------------------------
# data
# ------------------------------------------------------------------------------------------------
def test_digits_shapes_and_scaling(digits):
    X, y = digits
    assert X.shape == (1797, 64) and X.dtype == np.float32
    assert y.shape == (1797,) and y.dtype == np.int64
    assert X.min() == 0.0 and X.max() == 1.0
    assert set(y.tolist()) == set(range(10))


def test_split_is_disjoint_stratified_and_reproducible(digits):
    X, y = digits
    X_pre, y_pre, X_audit, y_audit = split_pretrain(X, y, pretrain_fraction=0.5, seed=3)
    assert len(X_pre) + len(X_audit) == len(X)
    assert np.all(np.abs(np.bincount(y_pre) - np.bincount(y_audit)) <= 1)
    again = split_pretrain(X, y, pretrain_fraction=0.5, seed=3)
    assert np.array_equal(again[0], X_pre) and np.array_equal(again[3], y_audit)


def test_split_partitions_indices(digits):
    _, y = digits
    ids = np.arange(len(y), dtype=np.float32)[:, None]
    pre, _, audit, _ = split_pretrain(ids, y, seed=0)
    assert sorted(np.concatenate([pre[:, 0], audit[:, 0]]).tolist()) == ids[:, 0].tolist()


def test_load_arrays_accepts_images_and_integral_float_labels():
    X, y = load_arrays(np.zeros((4, 3, 5, 5)), np.array([0.0, 1.0, 2.0, 1.0]))
    assert X.shape == (4, 3, 5, 5) and X.dtype == np.float32 and y.dtype == np.int64


@pytest.mark.parametrize(
    ("X", "y", "match"),
    [
        (np.zeros(4), [0, 1, 0, 1], "at least 2 dimensions"),
        (np.zeros((4, 2)), [0, 1, 0], "same length"),
        (np.full((2, 2), np.nan), [0, 1], "finite"),
        (np.zeros((2, 2)), [0, 0], "at least 2 classes"),
        (np.zeros((2, 2)), [0.5, 1.0], "integer"),
        (np.zeros((2, 2)), [[0], [1]], "1-dimensional"),
        (np.zeros((2, 2)), [-1, 1], ">= 0"),
        (np.array([["a", "b"], ["c", "d"]]), [0, 1], "numeric"),
    ],
)
def test_load_arrays_rejects_bad_input(X, y, match):
    with pytest.raises(ValueError, match=match):
        load_arrays(X, y)


def test_labels_far_beyond_the_class_count_are_refused_where_a_model_is_built_for_them():
    """Reviewer's finding: a label of 100000 among four classes built a classifier with 100001
    outputs (1e9: a 32 GB layer), and float labels of 1e20 were "minimum -9223372036854775808".
    Diff reviewer's: refusing sparse labels in load_arrays also refused two CIFAR-100 classes
    (3 and 42) for a model that has its 100 outputs; only models built from the labels are
    checked now, and sparse labels there give a warning."""
    X = np.zeros((4, 2))
    with pytest.raises(ValueError, match="y must hold class numbers, got a label of 1e\\+20"):
        load_arrays(X, [0.0, 1.0, 2.0, 1e20])
    with pytest.raises(ValueError, match="got a label of 9223372036854775808"):
        load_arrays(X, np.array([0, 1, 2, 2**63], dtype=np.uint64))
    assert load_arrays(X, [3, 42, 3, 42])[1].tolist() == [3, 42, 3, 42]
    with pytest.raises(ValueError, match=r"labels go up to 100000: .* 100001 outputs .*0\.\.3"):
        check_class_count(np.array([0, 1, 2, 100000]))
    with pytest.warns(UserWarning, match="labels go up to 42 but only 2 distinct labels occur"):
        assert check_class_count(np.array([3, 42])) == 43
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_class_count(np.array([3, 8])) == 9  # a subset of the digits
        assert check_class_count(np.arange(40) % 20 * 2) == 39  # 20 classes, even numbers
    y = np.arange(40) % 4
    y[y == 3] = 100000
    data = (np.random.default_rng(0).random((40, 8), dtype=np.float32), y)
    with pytest.raises(ValueError, match="labels go up to 100000"):
        DPSGDAuditor(claimed_epsilon=1.0, steps=2, n_runs=8, data=data, progress=False).build()


def test_raw_uint8_pixels_give_a_warning_and_are_used_as_given():
    with pytest.warns(UserWarning, match="uint8 with values up to 255.*divide by 255"):
        X, _ = load_arrays(np.full((2, 2, 2), 255, dtype=np.uint8), [0, 1])
    assert X.max() == 255.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_arrays(np.full((2, 2), 255.0), [0, 1])  # floats are features, not pixels
        load_arrays(np.ones((2, 2), dtype=np.uint8), [0, 1])  # binary images


def test_values_beyond_float32_are_refused_without_numpy_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "overflow encountered in cast" came first
        with pytest.raises(ValueError, match="must be finite"):
            load_arrays(np.full((2, 2), 1e300), [0, 1])


def test_a_user_canary_image_without_its_channel_axis_is_accepted():
    """Reviewer's finding: a (28, 28) canary was refused on (n, 1, 28, 28) images while the flat
    784 values were accepted."""
    X, y = np.zeros((4, 1, 3, 3)), np.array([0, 1, 0, 1])
    image = np.arange(9.0).reshape(3, 3)
    x, label = make_canary((image, 1), X, y)
    assert x.shape == (1, 3, 3) and np.array_equal(x[0], image) and label == 1
    with pytest.raises(ValueError, match=r"has shape \(9, 1\), but one row of X has shape"):
        make_canary((image.reshape(9, 1), 1), X, y)  # another layout is still refused


def test_load_npz(tmp_path):
    path = tmp_path / "data.npz"
    np.savez(path, X=np.ones((6, 2)), y=np.array([0, 1, 2, 0, 1, 2]))
    X, y = load_npz(path)
    assert X.shape == (6, 2) and y.tolist() == [0, 1, 2, 0, 1, 2]
    bad = tmp_path / "bad.npz"
    np.savez(bad, features=np.ones((2, 2)))
    with pytest.raises(ValueError, match="x_train"):
        load_npz(bad)
    with pytest.raises(ValueError, match="does not exist"):
        load_npz(tmp_path / "missing.npz")
    (tmp_path / "text.npz").write_text("features,label\n1,0\n")
    with pytest.raises(ValueError, match=r"neither an \.npz archive nor an \.npy array") as info:
        load_npz(tmp_path / "text.npz")
    assert "allow_pickle" not in str(info.value)  # numpy's advice to unpickle is not passed on


def test_load_npz_expands_the_home_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    np.savez(tmp_path / "data.npz", X=np.ones((4, 2)), y=np.array([0, 1, 0, 1]))
    assert load_npz("~/data.npz")[0].shape == (4, 2)


def test_damaged_npz_files_are_named_value_errors(tmp_path):
    """Catches the bug where a truncated or foreign .npz raised zipfile.BadZipFile and an empty
    one EOFError (the CLI printed "error: BadZipFile: File is not a zip file")."""
    good = tmp_path / "good.npz"
    np.savez(good, X=np.ones((6, 2)), y=np.array([0, 1, 2, 0, 1, 2]))
    data = good.read_bytes()
    files = {
        "truncated.npz": data[: len(data) // 2],
        "garbage.npz": b"not a zip archive at all" * 10,
        "empty.npz": b"",
    }
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ValueError, match=rf"{name}.*\.npz archive"):
            load_npz(tmp_path / name)
    # A member damaged inside an intact archive: its compressed bytes flipped.
    compressed = tmp_path / "member.npz"
    np.savez_compressed(compressed, X=np.arange(4000.0).reshape(2000, 2), y=np.zeros(2000))
    raw = bytearray(compressed.read_bytes())
    start = raw.index(b"X.npy") + 200
    raw[start : start + 200] = bytes(200)
    compressed.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"member\.npz"):
        load_npz(compressed)


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.5, "half", True])
def test_split_rejects_bad_fraction(digits, fraction):
    with pytest.raises(ValueError, match="pretrain_fraction"):
        split_pretrain(*digits, pretrain_fraction=fraction)


# ------------------------------------------------------------------------------------------------
# models
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["lr", "cnn"])
def test_model_output_shapes(name):
    model = make_model(name, 64, 10)
    assert model(torch.zeros(7, 64)).shape == (7, 10)
    assert model(torch.zeros(2, 1, 8, 8)).shape == (2, 10)


def test_cnn_other_image_shapes_and_factory():
    assert make_model("cnn", 3 * 7 * 7, 4, input_shape=(3, 7, 7))(torch.zeros(2, 147)).shape == (
        2,
        4,
    )

    def factory(n_features, n_classes):
        return nn.Linear(n_features, n_classes)

    assert isinstance(make_model(factory, 5, 3), nn.Linear)


def test_models_are_opacus_compatible():
    from opacus.validators import ModuleValidator

    for name in ("lr", "mlp", "cnn"):
        assert ModuleValidator.is_valid(make_model(name, 64, 10))


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("rnn", 64, 10), "unknown model.*'mlp'"),
        (("lr", 0, 10), "n_features"),
        (("lr", 64, 1), "n_classes"),
        (("cnn", 60, 10), "60 features per row are not a square image; pass X of shape"),
        ((lambda d, k: "not a module", 64, 10), "nn.Module"),
    ],
)
def test_make_model_rejects_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        make_model(*args)


def test_cnn_rejects_mismatched_shape():
    with pytest.raises(ValueError, match="input_shape"):
        make_model("cnn", 64, 10, input_shape=(1, 7, 7))


# ------------------------------------------------------------------------------------------------
# canaries
# ------------------------------------------------------------------------------------------------
def test_blank_canary(digits):
    X, y = digits
    x, label = make_canary("blank", X, y)
    assert x.shape == (64,) and x.dtype == np.float32 and not x.any() and label == 0
    assert make_canary("blank", X, y, label=7)[1] == 7
    x_img, _ = make_canary("blank", X.reshape(-1, 1, 8, 8), y)
    assert x_img.shape == (1, 8, 8)


def test_blank_canary_label_is_the_least_likely_class_of_the_model(digits):
    X, y = digits
    model = nn.Linear(64, 10)
    with torch.no_grad():
        model.bias.copy_(torch.tensor([0.0, 1.0, -5.0, 2.0, 0.5, 0.1, 0.2, 0.3, 0.4, 0.6]))
    # A blank input sees only the bias: class 2 is the least likely, so its gradient is largest.
    assert make_canary("blank", X, y, model=model)[1] == 2
    assert make_canary("blank", X, y, model=model, label=5)[1] == 5


@pytest.mark.parametrize("n", [500, 3])  # more rows than features, and fewer
def test_clipbkd_is_the_smallest_variance_direction(n):
    rng = np.random.default_rng(0)
    scales = np.array([5.0, 3.0, 2.0, 1.0, 0.1])
    X = (rng.normal(size=(n, 5)) * scales + 1.0).astype(np.float32)
    y = np.arange(n) % 2
    x, label = make_canary("clipbkd", X, y, label=1)
    assert label == 1
    norm = np.linalg.norm(x)
    assert norm == pytest.approx(np.median(np.linalg.norm(X, axis=1)), rel=1e-5)
    unit = x.astype(np.float64) / norm
    centred = X - X.mean(axis=0)
    eigvals, eigvecs = np.linalg.eigh(centred.T @ centred / n)
    assert abs(unit @ eigvecs[:, -1]) < 1e-4  # orthogonal to the top principal direction
    assert np.var(centred @ unit) == pytest.approx(max(eigvals[0], 0.0), abs=1e-4)


def test_clipbkd_least_likely_label_from_model():
    X, y = _toy(n=40, d=4)
    y = np.arange(40) % 4
    model = nn.Linear(4, 4)
    nn.init.zeros_(model.weight)
    with torch.no_grad():
        model.bias.copy_(torch.tensor([0.0, 1.0, -5.0, 2.0]))
    _, label = make_canary("clipbkd", X, y, model=model)
    assert label == 2
    assert make_canary("clipbkd", X, y, model=model, label=3)[1] == 3


def test_user_canary_and_errors(digits):
    X, y = digits
    x, label = make_canary((np.ones(64), 4), X, y)
    assert x.shape == (64,) and label == 4
    with pytest.raises(ValueError, match="shape"):
        make_canary((np.ones(63), 4), X, y)
    with pytest.raises(ValueError, match="needs model"):
        make_canary("clipbkd", X, y)
    with pytest.raises(ValueError, match="unknown canary"):
        make_canary("golden", X, y)
    with pytest.raises(ValueError, match="label"):
        make_canary("blank", X, y, label=10)
    with pytest.raises(ValueError, match="label"):
        make_canary((np.ones(64), 1.5), X, y)
    # DP-SGD reviewer's finding: a 0-d integer tensor, as a torch dataset yields labels, was
    # refused as "label must be an integer class, got tensor(1)"; OpacusTraining took it
    for scalar in (torch.tensor(4), np.array(4), np.int64(4), torch.tensor([4])):
        assert make_canary((np.ones(64), scalar), X, y)[1] == 4
    for bad in (torch.tensor(1.5), torch.tensor(True), np.array(1.0), torch.tensor([1, 2])):
        with pytest.raises(ValueError, match="label"):
            make_canary((np.ones(64), bad), X, y)


# ------------------------------------------------------------------------------------------------
# training
# ------------------------------------------------------------------------------------------------
def test_pretrain_reduces_loss_and_leaves_model_alone(digits):
    X, y = digits
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = make_model("lr", 64, 10)
    before = flat_parameters(model)
    criterion = nn.CrossEntropyLoss()
    with torch.no_grad():
        loss0 = float(criterion(model(torch.from_numpy(X)), torch.from_numpy(y)))
    state = pretrain(model, X, y, epochs=3, seed=0)
    assert torch.equal(flat_parameters(model), before)
    model.load_state_dict(state)
    with torch.no_grad():
        loss1 = float(criterion(model(torch.from_numpy(X)), torch.from_numpy(y)))
    assert loss1 < 0.5 * loss0
    assert all(v.device.type == "cpu" for v in state.values())


def test_train_dp_sgd_reproducible_and_leaves_rng_and_model_alone(small_audit):
    X, y, model, _ = small_audit
    before = flat_parameters(model)
    torch_state = torch.get_rng_state()
    np_state = np.random.get_state()[1].copy()  # noqa: NPY002 (global state untouched?)
    kwargs = {"noise_multiplier": 1.0, "steps": 5}
    a = train_dp_sgd(model, X, y, seed=11, **kwargs)
    b = train_dp_sgd(model, X, y, seed=11, **kwargs)
    c = train_dp_sgd(model, X, y, seed=12, **kwargs)
    assert torch.equal(flat_parameters(a), flat_parameters(b))
    assert not torch.equal(flat_parameters(a), flat_parameters(c))
    assert torch.equal(flat_parameters(model), before) and a is not model
    assert torch.equal(torch.get_rng_state(), torch_state)
    assert np.array_equal(np.random.get_state()[1], np_state)  # noqa: NPY002
    assert not any(hasattr(p, "grad_sample") for p in a.parameters())


@pytest.mark.parametrize("name", ["lr", "mlp"])
def test_expanded_weights_ghost_clipping_and_hooks_agree(small_audit, name):
    X, y, _, _ = small_audit
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = make_model(name, X.shape[1], int(y.max()) + 1)
    # Clipping must bind for the check to mean anything: C = 0.05 is below most gradient norms.
    kwargs = {"noise_multiplier": 1.0, "steps": 3, "seed": 5, "max_grad_norm": 0.05}
    hooks = train_dp_sgd(model, X, y, grad_sample_mode="hooks", **kwargs)
    for mode in ("ew", "ghost", "auto"):
        other = train_dp_sgd(model, X, y, grad_sample_mode=mode, **kwargs)
        assert torch.allclose(flat_parameters(hooks), flat_parameters(other), atol=1e-6), mode


def test_auto_mode_picks_ghost_for_linear_models_and_ew_for_convolutions():
    from rdpest.auditing.dpsgd.engine import choose_grad_sample_mode as _choose_grad_sample_mode

    assert _choose_grad_sample_mode("auto", make_model("lr", 64, 10), True) == "ghost"
    assert _choose_grad_sample_mode("auto", make_model("mlp", 64, 10), True) == "ghost"
    assert _choose_grad_sample_mode("auto", make_model("cnn", 64, 10), True) == "ew"
    assert _choose_grad_sample_mode("auto", make_model("lr", 64, 10), False) == "hooks"
    assert _choose_grad_sample_mode("auto", nn.Sequential(nn.BatchNorm1d(4)), True) == "hooks"
    assert _choose_grad_sample_mode("ew", make_model("lr", 64, 10), True) == "ew"
    # A layer used twice, shared weights, or a user-written forward: Opacus's general hooks.
    layer = nn.Linear(10, 10)
    assert _choose_grad_sample_mode("auto", nn.Sequential(layer, nn.Tanh(), layer), True) == "hooks"
    tied = nn.Sequential(nn.Linear(10, 10), nn.Linear(10, 10))
    tied[1].weight = tied[0].weight
    assert _choose_grad_sample_mode("auto", tied, True) == "hooks"

    class Custom(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 2)

        def forward(self, x):
            return self.a(x) + self.a(x)

    assert _choose_grad_sample_mode("auto", Custom(), True) == "hooks"


def test_poisson_sampling_reproducible_with_empty_batches():
    X, y = _toy()
    model = make_model("lr", 4, 2)
    a = train_dp_sgd(model, X, y, noise_multiplier=1.0, steps=10, sample_rate=0.02, seed=1)
    b = train_dp_sgd(model, X, y, noise_multiplier=1.0, steps=10, sample_rate=0.02, seed=1)
    c = train_dp_sgd(model, X, y, noise_multiplier=1.0, steps=10, sample_rate=0.3, seed=1)
    assert torch.equal(flat_parameters(a), flat_parameters(b)) and not torch.equal(
        flat_parameters(a), flat_parameters(c)
    )


def test_noise_is_sigma_c_on_the_summed_gradient():
    # Clipping norm C = 1e-6 makes the summed clipped gradient negligible (<= n·C); with the step
    # learning_rate / expected_batch_size = 1, one step moves each parameter by -N(0, (σC)²).
    X, y = _toy(n=50, d=30)
    model = make_model("lr", 30, 2)
    for bug, expected in [(1.0, 1.0), (0.5, 0.5)]:
        out = train_dp_sgd(
            model,
            X,
            y,
            noise_multiplier=1e6,
            max_grad_norm=1e-6,
            steps=1,
            learning_rate=50.0,
            seed=0,
            noise_scale_bug=bug,
        )
        delta = (flat_parameters(out) - flat_parameters(model)).numpy()
        assert np.std(delta) == pytest.approx(expected, rel=0.15)


def test_noise_scale_bug_equals_smaller_noise(small_audit):
    X, y, model, _ = small_audit
    buggy = train_dp_sgd(model, X, y, noise_multiplier=2.0, noise_scale_bug=0.25, steps=3, seed=4)
    honest = train_dp_sgd(model, X, y, noise_multiplier=0.5, steps=3, seed=4)
    claimed = train_dp_sgd(model, X, y, noise_multiplier=2.0, steps=3, seed=4)
    assert torch.equal(flat_parameters(buggy), flat_parameters(honest))
    assert not torch.equal(flat_parameters(buggy), flat_parameters(claimed))


def test_canary_signal_vanishes_with_huge_noise_and_is_clear_with_tiny_noise(small_audit):
    X, y, _, theta0 = small_audit
    canary = make_canary("blank", X, y)
    runs = {
        sigma: DPSGDRun(
            "lr", X, y, canary, theta0, config=DPSGDConfig(noise_multiplier=sigma, steps=5)
        )
        for sigma in (1e4, 1e-3)
    }
    seeds = range(10)
    for sigma, run in runs.items():
        with_c = np.array([run(True, s) for s in seeds])
        without = np.array([run(False, 100 + s) for s in seeds])
        if sigma > 1:
            pooled = np.sqrt((with_c.var() + without.var()) / 2)
            assert abs(with_c.mean() - without.mean()) < pooled  # effect size << 1 (μ ≈ 2e-4)
        else:
            assert with_c.max() < without.min()  # including the canary lowers its loss


def test_dpsgd_run_pickles_and_reproduces(small_audit):
    X, y, _, theta0 = small_audit
    canary = make_canary("blank", X, y)
    run = DPSGDRun("lr", X, y, canary, theta0, config=DPSGDConfig(noise_multiplier=1.0, steps=3))
    clone = pickle.loads(pickle.dumps(run))
    first = run(True, seed=3)
    assert isinstance(first, float)
    assert clone(True, seed=3) == first == run(True, seed=3)
    assert run(True, seed=4) != first
    assert run._cache is not None and pickle.loads(pickle.dumps(run))._cache is None
    threads = torch.get_num_threads()
    run(False, seed=0)
    assert torch.get_num_threads() == threads


def test_dpsgd_run_cnn_and_default_initialisation(digits):
    """Catches a DPSGDRun that composes its run differently from the documented pipeline: the
    model's default initialisation under seed 0 (the same for every run), the canary appended to
    the data only with include_canary, DP-SGD's step normalised by the size WITHOUT the canary
    in both arms, and the canary's cross-entropy after training. Each score is rebuilt here from
    the public building blocks and must match exactly."""
    X, y = digits
    X, y = X[:60], y[:60]
    config = DPSGDConfig(noise_multiplier=1.0, steps=2)
    canary = make_canary("blank", X, y)
    run = DPSGDRun("cnn", X, y, canary, None, config=config)
    value = run(True, seed=0)
    assert value == pickle.loads(pickle.dumps(run))(True, seed=0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = make_model("cnn", 64, run.n_classes)
    x_c, y_c = canary
    data = {False: (X, y), True: (np.concatenate([X, x_c[None]]), np.r_[y, y_c])}
    for include, seed in ((True, 0), (False, 0), (True, 3)):
        X_run, y_run = data[include]
        trained = train_dp_sgd(
            model, X_run, y_run, noise_multiplier=1.0, steps=2, seed=seed, expected_batch_size=60
        )
        assert run(include, seed) == canary_loss(trained, x_c, y_c), (include, seed)


def test_canary_loss_matches_cross_entropy_and_unwraps_opacus():
    from opacus import GradSampleModule

    net = nn.Linear(3, 4)
    x = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    with torch.no_grad():
        expected = float(
            nn.functional.cross_entropy(net(torch.from_numpy(x)[None]), torch.tensor([1]))
        )
    assert canary_loss(net, x, 1) == pytest.approx(expected)
    wrapped = GradSampleModule(nn.Linear(3, 4))
    wrapped._module.load_state_dict(net.state_dict())
    assert canary_loss(wrapped, x, 1) == pytest.approx(expected)
    net.train()
    canary_loss(net, x, 1)
    assert net.training
    with pytest.raises(ValueError, match="class"):
        canary_loss(net, x, 4)
    assert canary_loss(net, x, torch.tensor(1)) == pytest.approx(expected)
    with pytest.raises(ValueError, match="integer class"):  # was taken as class 1
        canary_loss(net, x, torch.tensor(1.5))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"noise_multiplier": -1.0}, "noise_multiplier"),
        ({"max_grad_norm": 0.0}, "max_grad_norm"),
        ({"steps": 0}, "steps"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"sample_rate": 0.0}, "sample_rate"),
        ({"sample_rate": 1.5}, "sample_rate"),
        ({"seed": -1}, "seed"),
        ({"seed": 1.5}, "seed"),
        ({"device": "tpu"}, "device"),
        ({"grad_sample_mode": "vmap"}, "grad_sample_mode"),
        ({"noise_scale_bug": -0.5}, "noise_scale_bug"),
    ],
)
def test_train_dp_sgd_rejects_bad_settings(kwargs, match):
    X, y = _toy()
    settings = {"noise_multiplier": 1.0, "steps": 1, "seed": 0, **kwargs}
    with pytest.raises(ValueError, match=match):
        train_dp_sgd(make_model("lr", 4, 2), X, y, **settings)


def test_training_rejects_bad_model_and_data():
    X, y = _toy()
    with pytest.raises(ValueError, match=r"nn\.Module"):
        train_dp_sgd("lr", X, y, noise_multiplier=1.0, seed=0)
    with pytest.raises(ValueError, match="same length"):
        train_dp_sgd(make_model("lr", 4, 2), X, y[:-1], noise_multiplier=1.0, seed=0)
    with pytest.raises(ValueError, match="epochs"):
        pretrain(make_model("lr", 4, 2), X, y, epochs=0)


def test_dpsgd_run_rejects_bad_input():
    X, y = _toy()
    canary = (np.zeros(4, np.float32), 0)
    config = DPSGDConfig(noise_multiplier=1.0, steps=1)
    with pytest.raises(ValueError, match="canary"):
        DPSGDRun("lr", X, y, (np.zeros(5), 0), config=config)
    with pytest.raises(ValueError, match="canary"):
        DPSGDRun("lr", X, y, np.zeros(4), config=config)
    with pytest.raises(ValueError, match="initial_state"):
        DPSGDRun("lr", X, y, canary, {"weight": np.zeros(3)}, config=config)
    with pytest.raises(ValueError, match="unknown model"):
        DPSGDRun("svm", X, y, canary, config=config)
    with pytest.raises(ValueError, match="DPSGDConfig"):
        DPSGDRun("lr", X, y, canary, config={"noise_multiplier": 1.0})
    run = DPSGDRun("lr", X, y, canary, config=config)
    with pytest.raises(ValueError, match="include_canary"):
        run(1, 0)
    with pytest.raises(ValueError, match="seed"):
        run(True, -3)


@CUDA
def test_cuda_training_is_reproducible(small_audit):
    X, y, model, theta0 = small_audit
    a = train_dp_sgd(model, X, y, noise_multiplier=1.0, steps=3, seed=2, device="cuda")
    b = train_dp_sgd(model, X, y, noise_multiplier=1.0, steps=3, seed=2, device="cuda")
    assert next(a.parameters()).device.type == "cuda"
    assert torch.equal(flat_parameters(a), flat_parameters(b))
    assert canary_loss(a, np.zeros(64, np.float32), 0) > 0
    config = DPSGDConfig(noise_multiplier=1.0, steps=3)
    run = DPSGDRun("lr", X, y, make_canary("blank", X, y), theta0, config=config, device="cuda")
    assert run(True, 1) == pickle.loads(pickle.dumps(run))(True, 1)
    poisson = train_dp_sgd(
        model, X, y, noise_multiplier=1.0, steps=3, seed=2, device="cuda", sample_rate=0.1
    )
    assert torch.isfinite(flat_parameters(poisson)).all()


def test_cuda_unavailable_is_a_value_error():
    if torch.cuda.is_available():
        pytest.skip("CUDA is available")
    X, y = _toy()
    with pytest.raises(ValueError, match="CUDA"):
        train_dp_sgd(make_model("lr", 4, 2), X, y, noise_multiplier=1.0, seed=0, device="cuda")


def test_out_of_memory_says_which_setting_to_change(small_audit, monkeypatch):
    """torch's message names the allocation, not the stack size, the workers or the batch; a GPU
    raises torch.OutOfMemoryError, the CPU allocator a RuntimeError."""
    from rdpest.auditing.dpsgd import run as run_module

    raised = {}

    def out_of_memory(*args, **kwargs):
        raise raised["error"]

    X, y, _, theta0 = small_audit
    canary = make_canary("blank", X, y)
    config = DPSGDConfig(noise_multiplier=1.0, steps=2)
    monkeypatch.setattr(run_module, "_train_stacked_module", out_of_memory)
    monkeypatch.setattr(run_module, "_train_dp_sgd_tensors", out_of_memory)
    stacked = DPSGDRun("lr", X, y, canary, theta0, config=config, stack_runs=4)
    single = DPSGDRun("lr", X, y, canary, theta0, config=config)
    gpu = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 9.00 GiB\nmore")
    cpu = RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 9 GB")
    for error, kind in ((gpu, torch.OutOfMemoryError), (cpu, RuntimeError)):
        raised["error"] = error
        with pytest.raises(kind, match=r"out of memory training 4 run\(s\) .*stack_runs=.*\(") as e:
            stacked.score_many(True, [1, 2, 3, 4])
        assert str(error).splitlines()[0] in str(e.value)
        with pytest.raises(kind, match=r"1 run\(s\) at once on cpu, \d+ rows each: pass n_jobs"):
            single(False, 0)
    raised["error"] = RuntimeError("another failure")  # not a memory error: as it was
    with pytest.raises(RuntimeError, match=r"^another failure$"):
        single(False, 0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_workers_sharing_one_gpu_are_warned():
    auditor = DPSGDAuditor(
        model="lr", n_runs=8, steps=2, device="cuda", n_jobs=2, pretrain_epochs=1, progress=False
    )
    with pytest.warns(UserWarning, match=r"n_jobs=2 on a GPU: every worker trains stacks"):
        auditor.build()


def test_clipbkd_with_fewer_rows_than_features_needs_no_d_by_d_matrix():
    """Reviewer's finding: with fewer audited rows than values per example, the full SVD's d × d
    V was computed (20 images of 3×64×64: 8.7 s and 2.7 GB; 224×224 RGB: a 169 GiB allocation
    error). The canary is now built from the rows' span alone: its variance over the data is
    zero (the least possible), it is orthogonal to every centred row, and it is fixed by X."""
    import tracemalloc

    rng = np.random.default_rng(1)
    n, d = 8, 3000
    X = rng.random((n, d)).astype(np.float32)
    y = np.arange(n) % 2
    tracemalloc.start()
    try:
        x, _ = make_canary("clipbkd", X, y, label=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * n * d * 8  # the d × d matrix alone is 375 times n·d float64s
    unit = x.astype(np.float64) / np.linalg.norm(x)
    centred = X.astype(np.float64) - X.mean(axis=0, dtype=np.float64)
    assert np.abs(centred @ unit).max() < 1e-4 * np.linalg.norm(centred, axis=1).max()
    np.testing.assert_array_equal(make_canary("clipbkd", X, y, label=1)[0], x)
