"""Helper functions shared by the tests: statistical assertions and tensor utilities."""

from scipy import stats

# Coverage tolerance: a bound with miscoverage exactly beta misses the truth k ~ Binomial(R, beta)
# times in R repetitions. A test fails only when the one-sided binomial test rejects
# "miscoverage <= beta" at level 1e-3, so a valid bound fails spuriously in < 0.1% of seeds.
COVERAGE_PVALUE = 1e-3


def assert_coverage(failures: int, repetitions: int, beta: float) -> None:
    """Fail when ``failures`` misses in ``repetitions`` are too many for miscoverage <= beta."""
    pvalue = stats.binomtest(int(failures), repetitions, beta, alternative="greater").pvalue
    assert pvalue > COVERAGE_PVALUE, (
        f"{failures}/{repetitions} bounds missed the truth (beta={beta}, p-value {pvalue:.2g})"
    )


def flat_parameters(module):
    """Every parameter of a torch module, detached, on the CPU, in one flat tensor."""
    import torch

    return torch.cat([p.detach().cpu().flatten() for p in module.parameters()])


def assert_clone_and_pickle_round_trip(est, score_rel: float = 0.0) -> None:
    """get_params survives clone; a fitted copy survives pickling with its bound and score.

    ``score_rel``: the relative tolerance of the restored score (0: bit for bit).
    """
    import pickle

    import pytest
    from sklearn.base import clone

    from rdpest.datasets import make_renyi_pair

    params = est.get_params()
    assert clone(est).get_params() == params
    X, Y, _ = make_renyi_pair("gaussian_shift", 2.0, 0.5, 300, random_state=0)
    fitted = clone(est).fit(X, Y)
    restored = pickle.loads(pickle.dumps(fitted))
    assert restored.lower_bound_ == fitted.lower_bound_
    assert restored.score(X, Y) == pytest.approx(fitted.score(X, Y), rel=score_rel, abs=0.0)
    assert clone(est).set_params(beta=0.2).beta == 0.2
