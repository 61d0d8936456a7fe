"""User model factories in DPSGDAuditor: checked before training, and identified in a store.

Bugs these tests catch (each found by a review): a store told factories apart by their qualified
name only, so an edited factory, two partials of one function or two lambdas resumed one
another's runs and mixed two models in one audit; a factory with an in-place activation, the
wrong number or shape of logits, float64 layers or layers Opacus refuses failed deep inside
torch or Opacus (after pretraining, or at the first run) instead of with a ValueError; and
channels-last images were read by the built-in CNN as H channels of W×1 pixels.
"""

import functools
import types

import numpy as np
import pytest
import torch
from torch import nn

from rdpest import DVRenyiEstimator
from rdpest.auditing import DPSGDAuditor
from rdpest.auditing.dpsgd import auditor as dpsgd_module
from rdpest.auditing.dpsgd.models import check_model, factory_identity, make_model

FAST = {
    "alpha": 2.0,
    "noise_multiplier": 1.0,
    "steps": 2,
    "n_runs": 10,
    "pretrain": False,
    "canary_label": 0,
    "stack_runs": 1,
    "progress": False,
    "device": "cpu",
}


def small_net(n_features, n_classes):
    return nn.Sequential(nn.Linear(n_features, 16), nn.Tanh(), nn.Linear(16, n_classes))


def wide_net(n_features, n_classes):
    return nn.Sequential(nn.Linear(n_features, 64), nn.Tanh(), nn.Linear(64, n_classes))


def mlp(n_features, n_classes, hidden=16):
    return nn.Sequential(nn.Linear(n_features, hidden), nn.Tanh(), nn.Linear(hidden, n_classes))


def _edited(fn, like):
    """``like`` with ``fn``'s body: what ``like`` becomes when its body is edited in its file."""
    edited = types.FunctionType(fn.__code__, like.__globals__, like.__name__, fn.__defaults__)
    edited.__qualname__, edited.__module__ = like.__qualname__, like.__module__
    return edited


def _estimators():
    return {"dv": DVRenyiEstimator(alpha=2.0, random_state=0, max_epochs=5)}


def test_an_edited_factory_is_refused_by_its_store_not_mixed(tmp_path):
    edited = _edited(wide_net, like=small_net)
    assert edited.__qualname__ == small_net.__qualname__  # the old fingerprint saw no change
    options = {**FAST, "store": tmp_path, "estimators": _estimators()}
    first = DPSGDAuditor(model=small_net, **options).run()
    again = DPSGDAuditor(model=small_net, **options).run()  # the same factory resumes
    np.testing.assert_array_equal(first.losses_with_canary, again.losses_with_canary)
    with pytest.raises(ValueError, match="different audit configuration"):
        DPSGDAuditor(model=edited, **{**options, "n_runs": 12}).run()


def test_factory_identity_covers_code_defaults_and_partial_arguments():
    assert factory_identity(small_net) == factory_identity(small_net)
    assert factory_identity(small_net) != factory_identity(_edited(wide_net, like=small_net))
    narrow, wide = functools.partial(mlp, hidden=4), functools.partial(mlp, hidden=64)
    assert factory_identity(narrow) != factory_identity(wide)
    assert factory_identity(narrow) == factory_identity(functools.partial(mlp, hidden=4))


class TanhNet(nn.Module):
    """A model class used as its own factory: ``model=TanhNet``."""

    hidden = 16

    def __init__(self, n_features, n_classes):
        super().__init__()
        self.hidden_layer = nn.Linear(n_features, self.hidden)
        self.out = nn.Linear(self.hidden, n_classes)

    def forward(self, x):
        return self.out(torch.tanh(self.hidden_layer(x)))


def test_a_model_class_is_identified_by_its_code_and_constants():
    """A class factory was recorded by its name only: a forward pass edited from tanh to relu,
    or another hidden width, resumed the old class's runs."""
    base = factory_identity(TanhNet)
    assert base == factory_identity(TanhNet)
    relu = type(
        "TanhNet", (nn.Module,), {**vars(TanhNet), "forward": _edited(_relu, TanhNet.forward)}
    )
    relu.__qualname__, relu.__module__ = TanhNet.__qualname__, TanhNet.__module__
    assert factory_identity(relu) != base
    wider = type("TanhNet", (TanhNet,), {"hidden": 64})
    wider.__qualname__ = TanhNet.__qualname__
    assert factory_identity(wider) != base
    assert factory_identity(nn.Linear) == {"class": "torch.nn.modules.linear.Linear"}

    class Local(TanhNet):
        pass

    with pytest.raises(ValueError, match="class defined inside a function"):
        factory_identity(Local)


def _relu(self, x):
    return self.out(torch.relu(self.hidden_layer(x)))


def test_the_fingerprint_records_the_built_parameters(monkeypatch):
    monkeypatch.setattr(dpsgd_module, "pretrain", None)  # pretrain=False never calls it
    _, _, narrow = DPSGDAuditor(model=functools.partial(mlp, hidden=4), **FAST).build()
    _, _, wide = DPSGDAuditor(model=functools.partial(mlp, hidden=64), **FAST).build()
    assert narrow["model"] != wide["model"]
    assert ["0.weight", [4, 64]] in narrow["model"]["parameters"]
    _, _, builtin = DPSGDAuditor(model="lr", **FAST).build()
    assert builtin["model"] == "lr"  # built-in models keep their name: their stores resume


def test_a_lambda_factory_is_refused_with_a_store_and_runs_without(tmp_path, monkeypatch):
    factory = lambda n_features, n_classes: small_net(n_features, n_classes)  # noqa: E731

    def no_training(*args, **kwargs):
        raise AssertionError("pretraining started before the factory was identified")

    monkeypatch.setattr(dpsgd_module, "pretrain", no_training)
    with pytest.raises(ValueError, match=r"cannot identify the model factory.*lambda"):
        DPSGDAuditor(model=factory, store=tmp_path, **{**FAST, "pretrain": True}).build()
    _, _, fingerprint = DPSGDAuditor(model=factory, **FAST).build()
    assert "lambda" in fingerprint["model"]["factory"]


class _Unused(nn.Module):
    def __init__(self, n_features, n_classes):
        super().__init__()
        self.linear = nn.Linear(n_features, n_classes)
        self.unused = nn.Linear(n_features, n_classes)

    def forward(self, x):
        return self.linear(x)


class _NanLogits(nn.Module):
    def __init__(self, n_features, n_classes):
        super().__init__()
        self.linear = nn.Linear(n_features, n_classes)

    def forward(self, x):
        return self.linear(x) * float("nan")


class _Tuple(nn.Module):
    def __init__(self, n_features, n_classes):
        super().__init__()
        self.linear = nn.Linear(n_features, n_classes)

    def forward(self, x):
        return self.linear(x), x


@pytest.mark.parametrize(
    "factory, match",
    [
        (
            lambda f, c: nn.Sequential(nn.Linear(f, 8), nn.ReLU(inplace=True), nn.Linear(8, c)),
            r"layer '1' \(ReLU\) works in place",
        ),
        (lambda f, c: nn.Linear(f, c - 2), r"logits of shape \(2, 10\).*got \(2, 8\)"),
        (lambda f, c: nn.Linear(f, c + 3), r"logits of shape \(2, 10\).*got \(2, 13\)"),
        (
            lambda f, c: nn.Sequential(nn.Linear(f, c), nn.Unflatten(1, (c, 1))),
            "got \\(2, 10, 1\\)",
        ),
        (lambda f, c: nn.Linear(f, c).double(), "parameter 'weight' is torch.float64"),
        (_Tuple, "must return a tensor of logits, got tuple"),
        (
            lambda f, c: nn.Linear(f + 1, c),
            "fails on a batch of the audit's data .*shape \\(2, 64\\)",
        ),
        (
            lambda f, c: nn.Sequential(nn.Linear(f, 8), nn.BatchNorm1d(8), nn.Linear(8, c)),
            "Opacus cannot train this model with DP-SGD: .*BatchNorm",
        ),
        # Reviewer's findings: these failed only once training ran, in torch's or Opacus's words
        # (Opacus's "Per sample gradient is not initialized" named no parameter).
        (lambda f, c: nn.Linear(f, c).requires_grad_(False), "no trainable parameters"),
        (lambda f, c: nn.Flatten(), "no trainable parameters"),
        (_Unused, r"parameter\(s\) 'unused.weight', 'unused.bias' get no gradient"),
        # DP-SGD reviewer's finding: NaN logits pretrained on a NaN loss unsaid, and the first
        # run failed as "score_fn returned nan ... a training run diverged?"
        (_NanLogits, "logits .* are not all finite .* before any training"),
    ],
)
def test_a_factory_that_cannot_be_trained_is_refused_before_any_training(
    factory, match, monkeypatch
):
    def no_training(*args, **kwargs):
        raise AssertionError("training started before the model was checked")

    monkeypatch.setattr(dpsgd_module, "pretrain", no_training)
    with pytest.raises(ValueError, match=match):
        DPSGDAuditor(model=factory, **{**FAST, "pretrain": True}).build()


def test_check_model_accepts_every_built_in_model():
    for name, shape in [("lr", (64,)), ("mlp", (64,)), ("cnn", (1, 8, 8))]:
        check_model(
            make_model(name, 64, 10, shape if len(shape) == 3 else None), torch.zeros(2, *shape), 10
        )
    check_model(make_model("mnist_cnn", 784, 10), torch.zeros(2, 1, 28, 28), 10)


def test_channels_last_images_are_refused_by_the_built_in_cnn(monkeypatch):
    with pytest.raises(
        ValueError, match=r"looks like channels-last images.*transpose\(0, 3, 1, 2\)"
    ):
        make_model("cnn", 64, 10, input_shape=(8, 8, 1))
    # Reviewer's finding: small RGB and any RGBA channels-last images trained as "8 channels of
    # 8×3 pixels" without a word.
    for shape in [(8, 8, 3), (16, 16, 4), (32, 32, 3), (4, 4, 1), (6, 4, 1)]:
        with pytest.raises(ValueError, match="looks like channels-last"):
            make_model("cnn", int(np.prod(shape)), 10, input_shape=shape)
    assert make_model("cnn", 64, 10, input_shape=(1, 8, 8)) is not None
    assert make_model("cnn", 256, 10, input_shape=(4, 8, 8)) is not None
    assert make_model("cnn", 192, 10, input_shape=(3, 8, 8)) is not None
    rng = np.random.default_rng(0)
    X, y = rng.random((200, 8, 8, 1), dtype=np.float32), rng.integers(0, 10, 200)
    monkeypatch.setattr(dpsgd_module, "pretrain", None)
    with pytest.raises(ValueError, match="channels-last"):
        DPSGDAuditor(model="cnn", data=(X, y), **FAST).build()


@pytest.mark.parametrize("label", [10, -1])
def test_a_canary_label_outside_the_classes_is_refused_before_pretraining(label, monkeypatch):
    """Reviewer's finding: canary_label=10 on the digits first widened the model to 11 classes,
    pretrained it, and was refused only then, as "label must be a class in [0, 10)"."""

    def no_training(*args, **kwargs):
        raise AssertionError("training started before canary_label was checked")

    monkeypatch.setattr(dpsgd_module, "pretrain", no_training)
    options = {**FAST, "pretrain": True, "canary_label": label}
    with pytest.raises(ValueError, match=r"canary_label: label must be a class in \[0, 10\)"):
        DPSGDAuditor(**options).build()


def test_the_gradient_check_leaves_the_model_and_the_random_streams_as_they_were():
    """Diff reviewer's finding: the check ran the model itself in training mode, so dropout drew
    from the caller's random stream and spectral norm's power-iteration buffers changed (and, in
    DPSGDRun, became the runs' initial state)."""
    model = nn.Sequential(
        nn.utils.parametrizations.spectral_norm(nn.Linear(4, 8)), nn.Dropout(0.5), nn.Linear(8, 3)
    )
    before = {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    check_model(model, torch.ones(2, 4), 3)
    assert torch.equal(torch.rand(3), expected)  # the stream continues where it was
    assert model.training and all(p.grad is None for p in model.parameters())
    assert before.keys() == model.state_dict().keys()
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
