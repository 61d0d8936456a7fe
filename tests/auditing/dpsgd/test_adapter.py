"""Auditing your own Opacus training: the adapter, the canary view, the claim, the guide."""

from __future__ import annotations

import math
import pickle
import re
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from opacus import PrivacyEngine
from opacus.accountants import GaussianAccountant, PRVAccountant, RDPAccountant
from opacus.accountants.analysis.rdp import compute_rdp
from torch.utils.data import DataLoader, TensorDataset

from rdpest.auditing import Auditor
from rdpest.auditing.dpsgd import OpacusTraining, epsilon_alpha_from_opacus, with_canary
from rdpest.auditing.identity import score_fn_identity
from rdpest.stats.conversions import dpsgd_epsilon_alpha

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "guide" / "own_opacus.rst"

_ROWS = torch.randn(32, 3, generator=torch.Generator().manual_seed(1))
DATA = TensorDataset(_ROWS, (_ROWS[:, 0] > 0).long())
CANARY = (torch.full((3,), 2.0), 1)


def _quiet():
    warnings.filterwarnings("ignore", message="Secure RNG turned off")
    warnings.filterwarnings("ignore", message="Full backward hook is firing")


def _full_batch_dp_sgd(model, dataset, seed, steps):
    """``steps`` full-batch DP-SGD steps of ``model``; the seed picks the noise generator."""
    _quiet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    loader = DataLoader(dataset, batch_size=len(dataset))
    engine = PrivacyEngine(accountant="rdp")
    model, optimizer, loader = engine.make_private(
        module=model,
        optimizer=optimizer,
        data_loader=loader,
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        poisson_sampling=False,
        noise_generator=torch.Generator().manual_seed(seed),
    )
    for _ in range(steps):
        for xb, yb in loader:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
    return model, engine


def train_full_batch(dataset, seed):
    """Full-batch DP-SGD, 3 steps; the seed picks the noise generator."""
    _quiet()
    return _full_batch_dp_sgd(torch.nn.Linear(3, 2), dataset, seed, steps=3)


def train_ignoring_seed(dataset, seed):
    """A training that draws from torch's global generator only (initialisation, noise)."""
    _quiet()
    model = torch.nn.Linear(3, 2)
    with torch.no_grad():
        model.weight.add_(torch.randn_like(model.weight))
    return model


def train_default_poisson(dataset, seed):
    """Opacus's default Poisson sampling at 1 / len(data_loader): the sample-rate trap."""
    _quiet()
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(dataset, batch_size=8)
    engine = PrivacyEngine(accountant="rdp")
    model, optimizer, loader = engine.make_private(
        module=model,
        optimizer=optimizer,
        data_loader=loader,
        noise_multiplier=1.0,
        max_grad_norm=1.0,
    )
    for xb, yb in loader:
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        optimizer.step()
    return model, engine


def zero_one_loss(model, x, y):
    return float(model(x[None]).argmax(1).item() != int(y))


# ------------------------------------------------------------------------------ with_canary


def test_with_canary_appends_one_example_of_the_data_sets_types():
    full = with_canary(DATA, np.array([1.0, 2.0, 3.0]), 1)
    assert len(full) == len(DATA) + 1
    x, y = full[len(DATA)]
    assert x.dtype == torch.float32 and x.tolist() == [1.0, 2.0, 3.0]
    assert y.dtype == torch.int64 and int(y) == 1
    assert torch.equal(full[0][0], DATA[0][0])
    assert torch.equal(full[-1][0], x)
    batches = list(DataLoader(full, batch_size=len(full)))
    assert batches[0][0].shape == (len(DATA) + 1, 3)
    clone = pickle.loads(pickle.dumps(full))
    assert torch.equal(clone[len(DATA)][0], x)


def test_with_canary_refuses_what_it_cannot_extend():
    with pytest.raises(ValueError, match="shape"):
        with_canary(DATA, np.zeros(4), 1)
    with pytest.raises(ValueError, match="empty"):
        with_canary(TensorDataset(torch.zeros(0, 3), torch.zeros(0)), np.zeros(3), 1)
    with pytest.raises(ValueError, match="pairs"):
        with_canary(TensorDataset(torch.zeros(2, 3)), np.zeros(3), 1)
    with pytest.raises(ValueError, match="map-style"):
        with_canary(object(), np.zeros(3), 1)


class _IntegerPairs(torch.utils.data.Dataset):
    """Integer inputs and Python-int labels (a data set of counts)."""

    def __len__(self):
        return 3

    def __getitem__(self, index):
        return torch.zeros(2, dtype=torch.int64), 1


class _NumpyLabels(torch.utils.data.Dataset):
    """Float inputs and numpy-integer labels."""

    def __len__(self):
        return 2

    def __getitem__(self, index):
        return torch.zeros(3), np.int64(1)


_U8 = TensorDataset(torch.zeros(2, 3, dtype=torch.uint8), torch.tensor([0, 1]))


@pytest.mark.parametrize(
    "dataset, x, y, message",
    [
        (DATA, np.zeros(3), 2.7, "label must be whole numbers"),
        (DATA, np.zeros(3), True, "label must be numbers, as the data set's are, got dtype bool"),
        (DATA, np.zeros(3), "cat", "label must be numbers, got 'cat'"),
        (DATA, [np.nan, 0.0, 0.0], 1, "input holds 1 NaN or inf value(s) of 3"),
        (DATA, [np.inf, 0.0, 0.0], 1, "input holds 1 NaN or inf value(s) of 3"),
        (DATA, np.zeros((1, 3)), 1, "input has shape (1, 3)"),
        (TensorDataset(torch.zeros(2, 6), torch.zeros(2)), np.zeros((3, 2)), 0, "shape (3, 2)"),
        (_IntegerPairs(), [1.7, -2.9], 1, "input must be whole numbers"),
        (_IntegerPairs(), [1, 2], 1.9, "label must be whole numbers"),
        (_IntegerPairs(), [1, 2], [1, 2], "label must be one number"),
        # Values the data set's type cannot hold wrapped silently: 300 into uint8 as 44, -1 as
        # 255, 2**40 into an int32 label as class 0 (adapter reviewer's finding)
        (_U8, [300, 0, 0], 0, "input holds values from 0 to 300, outside"),
        (_U8, [-1, 0, 0], 0, "input holds values from -1 to 0, outside"),
        (
            TensorDataset(torch.zeros(2, 3), torch.zeros(2, dtype=torch.int32)),
            [0, 0, 0],
            2**40,
            "label holds values from 1099511627776",
        ),
        (DATA, [1e39, 0.0, 0.0], 1, "outside what the data set's type torch.float32 holds"),
        (DATA, [0.0, 0.0, 0.0], float(2**63), "label holds values from 9.223372036854776e+18"),
    ],
)
def test_with_canary_refuses_a_canary_that_conversion_would_change(dataset, x, y, message):
    """Bug: the canary was converted to the data set's types without a check: label 2.7 trained
    as class 2, inputs [1.7, -2.9] as [1, -2], True as 1, a (3, 2) input as a scrambled (2, 3)
    one, a NaN canary was accepted (and the audit later blamed a diverged training), and a text
    label raised a raw torch TypeError."""
    with pytest.raises(ValueError, match=re.escape(message)):
        with_canary(dataset, x, y)


def test_with_canary_keeps_what_converts_exactly():
    # A float16 canary into an integer type: its range check once cast the type's bounds to
    # float16 (an overflow warning, an error under this suite's settings)
    counts = TensorDataset(torch.zeros(2, 1, dtype=torch.int64), torch.tensor([0, 1]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x, _ = with_canary(counts, np.array([65504], dtype=np.float16), 1)[2]
    assert x.dtype == torch.int64 and x.tolist() == [65504]
    flat = TensorDataset(torch.zeros(2, 1, 2, 3), torch.tensor([0, 1]))
    x, y = with_canary(flat, np.arange(6.0), np.int64(1))[2]  # a flat input in the image shape
    assert x.shape == (1, 2, 3) and x.flatten().tolist() == list(range(6)) and int(y) == 1
    x, y = with_canary(_IntegerPairs(), [1.0, 2.0], 0.0)[3]  # whole floats into integers
    assert x.dtype == torch.int64 and x.tolist() == [1, 2] and y == 0 and type(y) is int
    numpy_labels = _NumpyLabels()  # a numpy integer label: the canary's becomes an int
    assert type(with_canary(numpy_labels, np.zeros(3), 2.0)[2][1]) is int


# ------------------------------------------------------------------------------ the claim


def _accountant(cls, entries):
    accountant = cls()
    for sigma, rate, steps in entries:
        for _ in range(steps):
            accountant.step(noise_multiplier=sigma, sample_rate=rate)
    return accountant


@pytest.mark.parametrize("alpha", [2.0, 3.5])
def test_full_batch_claim_is_alpha_t_over_two_sigma_squared(alpha):
    accountant = _accountant(RDPAccountant, [(2.0, 1.0, 8)])
    claim = epsilon_alpha_from_opacus(accountant, alpha)
    assert claim == pytest.approx(dpsgd_epsilon_alpha(2.0, 1.0, 8, alpha), rel=1e-12)
    assert claim == pytest.approx(alpha * 8 / (2 * 2.0**2), rel=1e-12)


def test_poisson_claim_composes_opacus_rdp_over_the_history():
    entries = [(1.1, 0.05, 20), (0.8, 0.1, 5)]
    expected = sum(
        float(compute_rdp(q=q, noise_multiplier=s, steps=t, orders=[3.0])[0]) for s, q, t in entries
    )
    accountant = _accountant(RDPAccountant, entries)
    assert epsilon_alpha_from_opacus(accountant, 3.0) == pytest.approx(expected, rel=1e-12)
    assert epsilon_alpha_from_opacus(list(accountant.history), 3.0) == pytest.approx(
        expected, rel=1e-12
    )
    with warnings.catch_warnings():
        _quiet()
        engine = PrivacyEngine(accountant="rdp")
    engine.accountant = accountant
    assert epsilon_alpha_from_opacus(engine, 3.0) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("cls", [PRVAccountant, GaussianAccountant])
def test_other_accountants_are_refused_but_their_history_converts(cls):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="GDP accounting is experimental")
        accountant = _accountant(cls, [(1.0, 0.1, 10)])
    with pytest.raises(ValueError, match="not the RDP epsilon_alpha"):
        epsilon_alpha_from_opacus(accountant, 2.0)
    assert epsilon_alpha_from_opacus(accountant.history, 2.0) == pytest.approx(
        dpsgd_epsilon_alpha(1.0, 0.1, 10, 2.0), rel=1e-12
    )


def test_claim_errors_are_clear():
    with pytest.raises(ValueError, match="no steps"):
        epsilon_alpha_from_opacus(RDPAccountant(), 2.0)
    with pytest.raises(ValueError, match="history entry 0"):
        epsilon_alpha_from_opacus([(0.0, 1.0, 3)], 2.0)
    with pytest.raises(ValueError, match="PrivacyEngine"):
        epsilon_alpha_from_opacus("rdp", 2.0)
    with pytest.raises(ValueError):
        epsilon_alpha_from_opacus([(1.0, 1.0, 3)], 1.0)
    # Bug: one entry not wrapped in a list raised "TypeError: 'float' object is not iterable".
    with pytest.raises(ValueError, match="wrap it in a list"):
        epsilon_alpha_from_opacus((1.0, 0.25, 8), 2.0)


# ------------------------------------------------------------------------------ the adapter


def test_scores_are_the_canarys_loss_reproducible_and_picklable():
    score_fn = OpacusTraining(train_full_batch, DATA, CANARY)
    first = score_fn(True, 5)
    assert isinstance(first, float) and math.isfinite(first)
    assert score_fn(True, 5) == first
    assert score_fn(True, 6) != first
    clone = pickle.loads(pickle.dumps(score_fn))
    assert clone(True, 5) == first
    custom = OpacusTraining(train_full_batch, DATA, CANARY, loss_fn=zero_one_loss)
    assert custom(False, 5) in (0.0, 1.0)


def train_float64(dataset, seed):
    """A float64 model on float64 data (full batch, 2 steps)."""
    _quiet()
    return _full_batch_dp_sgd(torch.nn.Linear(3, 2).double(), dataset, seed, steps=2)


def test_a_float64_model_is_scored_in_float64():
    """Adapter reviewer's finding: the canary was always scored as float32, so a float64 model
    trained to the end and then failed in torch ("mat1 and mat2 must have the same dtype")."""
    data = TensorDataset(_ROWS.double(), DATA.tensors[1])
    score_fn = OpacusTraining(train_float64, data, (torch.full((3,), 2.0, dtype=torch.float64), 1))
    score = score_fn(True, 3)
    assert math.isfinite(score) and score == score_fn(True, 3)


def test_the_global_rng_is_seeded_and_the_callers_left_alone():
    score_fn = OpacusTraining(train_ignoring_seed, DATA, CANARY)
    state = torch.get_rng_state()
    a, b = score_fn(False, 1), score_fn(False, 1)
    assert a == b != score_fn(False, 2)
    assert torch.equal(torch.get_rng_state(), state)


def test_canary_arm_trains_on_the_data_with_the_canary():
    seen = []

    class Recording:
        def __call__(self, dataset, seed):
            seen.append(len(dataset))
            return torch.nn.Linear(3, 2)

    score_fn = OpacusTraining(Recording(), DATA, CANARY)
    score_fn(False, 0)
    score_fn(True, 0)
    assert seen == [len(DATA), len(DATA) + 1]


def test_describe_names_the_training_the_data_and_the_canary():
    described = OpacusTraining(train_full_batch, DATA, CANARY).describe()
    assert described["train_fn"]["function"].endswith("test_adapter.train_full_batch")
    assert described["data"] == OpacusTraining(train_full_batch, DATA, CANARY).describe()["data"]
    other = OpacusTraining(train_full_batch, DATA, (torch.zeros(3), 1)).describe()
    assert other["canary_sha256"] != described["canary_sha256"]
    assert score_fn_identity(OpacusTraining(train_full_batch, DATA, CANARY)) == described
    subset = torch.utils.data.Subset(DATA, range(10))
    with pytest.raises(ValueError, match="data_id"):
        OpacusTraining(train_full_batch, subset, CANARY).describe()
    named = OpacusTraining(train_full_batch, subset, CANARY, data_id="first ten").describe()
    assert named["data"] == "first ten"
    with pytest.raises(ValueError, match="train_fn"):
        OpacusTraining(lambda d, s: torch.nn.Linear(3, 2), DATA, CANARY).describe()


def test_adapter_errors_are_clear():
    with pytest.raises(ValueError, match="train_fn must be callable"):
        OpacusTraining(None, DATA, CANARY)
    with pytest.raises(ValueError, match="canary must be a tuple"):
        OpacusTraining(train_full_batch, DATA, torch.zeros(3))
    with pytest.raises(ValueError, match="shape"):
        OpacusTraining(train_full_batch, DATA, (torch.zeros(5), 1))
    with pytest.raises(ValueError, match="must return the trained"):
        OpacusTraining(returns_a_number, DATA, CANARY)(True, 0)
    with pytest.raises(ValueError, match="include_canary"):
        OpacusTraining(train_full_batch, DATA, CANARY)(1, 0)
    with pytest.raises(ValueError, match="check_accounting needs"):
        OpacusTraining(train_ignoring_seed, DATA, CANARY).check_accounting()


def returns_a_number(dataset, seed):
    return 1.0


_SHARED_ENGINE = {}


def train_with_one_engine_for_all_runs(dataset, seed):
    """The full-batch training, but with one PrivacyEngine made once and kept across calls."""
    _quiet()
    engine = _SHARED_ENGINE.setdefault("engine", PrivacyEngine(accountant="rdp"))
    model = torch.nn.Linear(3, 2)
    loader = DataLoader(dataset, batch_size=len(dataset))
    model, optimizer, loader = engine.make_private(
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.5),
        data_loader=loader,
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        poisson_sampling=False,
    )
    for xb, yb in loader:
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        optimizer.step()
    return model, engine


def test_an_engine_kept_across_runs_is_refused():
    # Its history adds every run's steps: the second arm's claim would be twice the first's,
    # and the warning blamed the sample rates, which were equal.
    warnings.filterwarnings("ignore", message="PrivacyEngine detected new dataset object")
    _SHARED_ENGINE.clear()
    with pytest.raises(ValueError, match="same Opacus accountant as the run before"):
        OpacusTraining(train_with_one_engine_for_all_runs, DATA, CANARY).check_accounting()
    _SHARED_ENGINE.clear()
    score_fn = OpacusTraining(train_with_one_engine_for_all_runs, DATA, CANARY)
    score_fn(False, 0)
    with pytest.raises(ValueError, match="a new one in every call"):
        score_fn(False, 1)


def test_differing_steps_at_equal_rates_are_named_as_such():
    from rdpest.auditing.dpsgd.adapter import _warn_if_different

    with pytest.warns(UserWarning, match="sample rates agree, so the noise or the number of steps"):
        _warn_if_different([(1.0, 0.25, 8)], [(1.0, 0.25, 16)])


def test_a_canary_label_outside_the_classes():
    # A label the data's classes never take warns (with the canary, torch's IndexError came from
    # inside the user's loop; without it, the failure came after a full training run).
    for label in (-1, 5, torch.tensor(-100)):
        with pytest.warns(UserWarning, match="lies outside the data set's labels"):
            with_canary(DATA, torch.zeros(3), label)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        with_canary(DATA, torch.zeros(3), 1)  # a label the data has
        # Labels of other kinds are not class indices to check: ±1 for a loss of your own, and
        # one-hot rows (the first version called .item() on them and crashed).
        signed = TensorDataset(_ROWS, torch.where(_ROWS[:, 0] > 0, 1, -1))
        with_canary(signed, torch.zeros(3), -1)
        one_hot = TensorDataset(_ROWS, torch.nn.functional.one_hot(DATA.tensors[1]).float())
        with_canary(one_hot, torch.zeros(3), torch.tensor([0.0, 1.0]))


def test_the_sample_rate_trap_warns_with_both_rates():
    score_fn = OpacusTraining(train_default_poisson, DATA, CANARY)
    with pytest.warns(UserWarning, match=r"\[0\.25\].*\[0\.2\]"):
        without, with_ = score_fn.check_accounting()
    assert without[0][1] == 0.25 and with_[0][1] == 0.2
    score_fn(False, 0)
    with pytest.warns(UserWarning, match="accounting differs"):
        score_fn(True, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        _quiet()
        OpacusTraining(train_full_batch, DATA, CANARY).check_accounting()


def train_numpy_global(dataset, seed):
    """The full-batch training, from weights drawn from numpy's global generator (not seeded
    from the seed)."""
    _quiet()
    model = torch.nn.Linear(3, 2)
    with torch.no_grad():
        model.weight.copy_(torch.as_tensor(np.random.normal(size=(2, 3))))  # noqa: NPY002
    return _full_batch_dp_sgd(model, dataset, seed, steps=1)


class _Pairs(torch.utils.data.Dataset):
    """DATA's examples through a plain Dataset (with_canary checks only TensorDatasets' labels)."""

    def __len__(self):
        return len(DATA)

    def __getitem__(self, index):
        return DATA[index]


def test_check_accounting_names_an_unrepeatable_training_and_a_label_outside_the_model():
    """Adapter reviewer's findings: a train_fn drawing from numpy's global generator gave two
    scores for one seed (0.4355, 0.4929) and audited, and resumed stores, without a word; and a
    canary label outside the model's classes failed inside torch ("Target 5 is out of bounds")
    in the with-canary training. check_accounting trains the arm without the canary twice and
    scores it first."""
    with pytest.warns(UserWarning, match="train_fn gave two different scores for seed 0"):
        OpacusTraining(train_numpy_global, DATA, CANARY).check_accounting()
    trained = []

    def recording(dataset, seed):
        trained.append(len(dataset))
        return train_full_batch(dataset, seed)

    score_fn = OpacusTraining(recording, _Pairs(), (torch.full((3,), 2.0), 5))
    with pytest.raises(ValueError, match=r"y=5 must be a class in \[0, n_classes\)"):
        score_fn.check_accounting()
    assert trained == [len(DATA)]  # before any training with the canary


def test_audit_with_two_workers_matches_one():
    score_fn = OpacusTraining(train_full_batch, DATA, CANARY)
    one = Auditor(score_fn, 1.0, n_runs=4, progress=False, estimators=_bernoulli())
    two = Auditor(score_fn, 1.0, n_runs=4, progress=False, estimators=_bernoulli(), n_jobs=2)
    assert np.array_equal(one.collect()[1], two.collect()[1])


def _bernoulli():
    from rdpest import BernoulliTPRFPRBaseline

    return {"bernoulli": BernoulliTPRFPRBaseline(alpha=2.0, random_state=0)}


# ------------------------------------------------------------------------------ the guide page


def _guide_blocks() -> list[str]:
    text = GUIDE.read_text(encoding="utf-8")
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", text)
    return [textwrap.dedent(block) for block in blocks]


def test_the_guide_example_runs(capsys):
    """The page's complete example, exactly as printed, audits its training end to end."""
    blocks = _guide_blocks()
    assert len(blocks) == 2
    namespace = {"__name__": "own_opacus_guide"}
    with warnings.catch_warnings():
        _quiet()
        exec(compile(blocks[0], str(GUIDE), "exec"), namespace)
    claim, verdict = capsys.readouterr().out.split()
    assert float(claim) == pytest.approx(dpsgd_epsilon_alpha(1.0, 0.25, 8, 2.0), abs=1e-4)
    assert verdict in ("underpowered", "not_refuted")
    assert namespace["without"] == namespace["with_"] == [(1.0, 0.25, 8)]


def test_the_guides_own_data_example_builds_its_auditor():
    namespace = {"__name__": "own_opacus_guide_data"}
    exec(compile(_guide_blocks()[1], str(GUIDE), "exec"), namespace)
    assert namespace["auditor"].model is namespace["two_layer"]


def test_a_run_store_resumes_an_adapted_training(tmp_path, monkeypatch):
    """describe() is the store's identity: a second audit reads the runs instead of training."""
    score_fn = OpacusTraining(train_full_batch, DATA, CANARY)

    def audit(fn):
        return Auditor(fn, 1.0, n_runs=2, store=tmp_path, progress=False, estimators=_bernoulli())

    without, with_ = audit(score_fn).collect()
    with pytest.raises(ValueError, match="different audit configuration"):  # another train_fn
        audit(OpacusTraining(returns_a_number, DATA, CANARY)).collect()

    def no_training(self, include_canary, seed):
        raise AssertionError("a stored run was trained again")

    monkeypatch.setattr(OpacusTraining, "__call__", no_training)
    again, again_with = audit(OpacusTraining(train_full_batch, DATA, CANARY)).collect()
    assert np.array_equal(again, without) and np.array_equal(again_with, with_)


def test_the_cuda_stream_is_seeded_by_default_where_cuda_exists(monkeypatch):
    """With the old default device="cpu", a train_fn drawing its noise from the global CUDA
    generator was unseeded: its runs depended on what the process ran before (so on n_jobs and
    on the order of a resume)."""
    import contextlib

    from rdpest.auditing.dpsgd import adapter

    seen = []

    @contextlib.contextmanager
    def recording(seed, device):
        seen.append((seed, device.type))
        yield

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(adapter, "forked_rng", recording)
    OpacusTraining(train_ignoring_seed, DATA, CANARY)(False, 4)
    assert seen == [(4, "cuda")]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_training_on_the_global_cuda_stream_is_reproducible():
    score_fn = OpacusTraining(train_on_the_global_cuda_stream, DATA, CANARY)
    torch.cuda.manual_seed(1)
    first = score_fn(False, 3)
    torch.cuda.manual_seed(2)  # whatever ran before
    assert score_fn(False, 3) == first


def train_on_the_global_cuda_stream(dataset, seed):
    model = torch.nn.Linear(3, 2)
    with torch.no_grad():
        model.weight.add_(torch.randn(2, 3, device="cuda").cpu())
    return model
