"""scikit-learn's common estimator checks, run on every estimator of rdpest.estimators.

The checks assume ``fit(X, y)`` with y a target vector of one value per row. rdpest's estimators
take a second SAMPLE instead: ``fit(X, Y)``, X ~ P and Y ~ Q, each of shape (n,) or (n, d) with
the same d. A check that passes a 2-D X with d >= 2 features and a 1-D y therefore hits the
estimators' "X and Y must have the same number of features" refusal by design (the 1-D y is a
sample of d = 1). Those checks are expected to fail, each for the reason in EXPECTED_FAILURES.

Expected failures are strict and specific (:func:`test_sklearn_common_check`): the check must
raise the exception and message its entry names, or the test fails. This is stricter than
``parametrize_with_checks(..., xfail_strict=True)``, whose xfail marks also count a failure of
any other kind as expected; the checks are generated with ``estimator_checks_generator``, the
generator ``parametrize_with_checks`` is built on. (It is also cheaper: pytest formats the long
traceback of every xfailed check, about 0.2 s each, which the verified failures skip.)

Checks that do apply (cloning, ``get_params``/``set_params``, parameter validation, no
attributes set in ``__init__``, fitting a 1-feature X with a 1-D sample, ...) must pass.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest
from sklearn.utils.estimator_checks import estimator_checks_generator

from rdpest.estimators import (
    BernoulliTPRFPRBaseline,
    DVRenyiEstimator,
    HoeffdingRenyiBound,
    MarkovRenyiBound,
)


class _SumOfFeatures:
    """A fixed score function for the threshold baseline: the sum of each row's features.

    A class with a stable ``repr`` (not a function, whose repr holds its address) so that the
    test ids stay the same from run to run; defined at module level so that it pickles.
    """

    def __call__(self, A):
        return A.sum(axis=1)

    def __repr__(self) -> str:
        return "sum_of_features"


# One instance per estimator. DV trains a tiny critic for 3 epochs: the checks test the
# scikit-learn contract, not accuracy, and the only DV check that trains (check_fit2d_1feature)
# stays under 2 s on one core.
ESTIMATORS = [
    DVRenyiEstimator(max_epochs=3, hidden_layer_sizes=(8,), random_state=0),
    MarkovRenyiBound(random_state=0),
    HoeffdingRenyiBound(privacy_loss_bound=5.0, random_state=0),
    BernoulliTPRFPRBaseline(score_function=_SumOfFeatures(), random_state=0),
]


class Expected(NamedTuple):
    """An expected failure: the exception the check raises, a regex of its message, and why."""

    exception: type[BaseException]
    match: str
    reason: str


def _features(d: int) -> str:
    # The estimators' refusal of a 1-D y next to a d-feature X (rdpest.estimators.base).
    return rf"X and Y must have the same number of features, got {d} and 1"


# Why each check does not apply to a two-sample divergence estimator. The same for all four
# estimators: they share fit's validation (RenyiEstimatorBase._validate_samples), which refuses
# before any estimator-specific code runs.
EXPECTED_FAILURES: dict[str, Expected] = {
    "check_fit_score_takes_y": Expected(
        ValueError,
        _features(3),
        "passes a 3-feature X with y = arange(n) % 3 to inspect fit's and score's signatures; "
        "here y is the sample from Q and needs X's 3 features (fit and score do take it)",
    ),
    "check_estimators_overwrite_params": Expected(
        ValueError,
        _features(2),
        "fits make_blobs' 2-feature X with its 1-D cluster labels as y; a 1-D second sample "
        "has 1 feature, so fit refuses before parameters could be overwritten",
    ),
    "check_dont_overwrite_parameters": Expected(
        ValueError,
        _features(3),
        "fits a 3-feature X with y = int(X[:, 0]), a label vector; as a second sample it has "
        "1 feature against X's 3, a mismatch fit must refuse",
    ),
    "check_estimators_fit_returns_self": Expected(
        ValueError,
        _features(2),
        "fits make_blobs' 2-feature X with its cluster labels; fit returns self (see "
        "test_dv.py) but here refuses a 1-feature second sample next to a 2-feature first one",
    ),
    "check_readonly_memmap_input": Expected(
        ValueError,
        _features(2),
        "memmaps make_blobs' 2-feature X and 1-D labels; the labels as a second sample have 1 "
        "feature against X's 2, refused before the memmap matters",
    ),
    "check_n_features_in_after_fitting": Expected(
        ValueError,
        _features(4),
        "fits a 4-feature X with a 1-D target; the second sample must have X's 4 features, so "
        "n_features_in_ cannot be checked this way",
    ),
    "check_positive_only_tag_during_fit": Expected(
        AssertionError,
        r"raised ValueError unexpectedly",
        "reads any ValueError on iris as a refusal of negative values; the ValueError is the "
        "mismatch of iris's 4 features with the 1-D species labels as second sample (negative "
        "values are accepted)",
    ),
    "check_estimators_dtypes": Expected(
        ValueError,
        _features(5),
        "fits 5-feature X of several dtypes with y = [1, 2] * 10; as a second sample y has 1 "
        "feature, refused before dtypes are looked at",
    ),
    "check_dtype_object": Expected(
        ValueError,
        _features(10),
        "fits a 10-feature object-dtype X with 1-D class labels; the labels are a 1-feature "
        "second sample against X's 10",
    ),
    "check_pipeline_consistency": Expected(
        ValueError,
        _features(3),
        "fits the estimator and a Pipeline of it on make_blobs' 3-feature X with its labels as "
        "y; both refuse the 1-feature second sample",
    ),
    "check_estimators_nan_inf": Expected(
        ValueError,
        _features(3),
        "first fits a finite 3-feature X with y = ones(10) (a 1-feature second sample, "
        "refused); NaN and inf are refused separately (test_dv.py's BAD_DATA)",
    ),
    "check_estimators_pickle": Expected(
        ValueError,
        _features(3),
        "fits make_blobs' 3-feature X with its labels before pickling; refused as a 1-feature "
        "second sample (pickling is tested with real samples in test_dv.py)",
    ),
    "check_f_contiguous_array_estimator": Expected(
        ValueError,
        _features(3),
        "fits a Fortran-ordered 3-feature X with y = int(X[:, 0]); the 1-D y is a 1-feature "
        "second sample, refused before memory order matters",
    ),
    "check_methods_sample_order_invariance": Expected(
        ValueError,
        _features(3),
        "needs a fitted estimator from a 3-feature X and a 1-D label y (refused: 1 feature "
        "against 3); the estimators have no predict-like methods whose order could matter",
    ),
    "check_methods_subset_invariance": Expected(
        ValueError,
        _features(3),
        "needs a fitted estimator from a 3-feature X and a 1-D label y (refused: 1 feature "
        "against 3); score is one number for two whole samples, not per-row outputs",
    ),
    "check_fit2d_1sample": Expected(
        AssertionError,
        r"Got " + _features(10),
        "expects a one-sample error for a 1 x 10 X; the first refusal is the 1-D y's 1 feature "
        "against X's 10 (too few rows is refused as 'needs at least', see test_dv.py)",
    ),
    "check_dict_unchanged": Expected(
        ValueError,
        _features(3),
        "fits a 3-feature X with a 1-D label y (a 1-feature second sample, refused) before "
        "calling predict-like methods, which the estimators do not have",
    ),
    "check_fit_idempotent": Expected(
        ValueError,
        _features(2),
        "fits a 2-feature X with a 1-D target twice; the target as second sample has 1 "
        "feature (refitting with the same random_state is tested in test_dv.py)",
    ),
    "check_fit_check_is_fitted": Expected(
        ValueError,
        _features(2),
        "fits a 2-feature X with a 1-D target to see check_is_fitted flip; the 1-feature "
        "second sample is refused",
    ),
    "check_n_features_in": Expected(
        ValueError,
        _features(2),
        "fits a 2-feature X with a 1-D target; refused as a 1-feature second sample, so "
        "n_features_in_ is never set this way",
    ),
    "check_fit1d": Expected(
        AssertionError,
        r"Did not raise",
        "expects 1-D X to be refused; a 1-D array is accepted on purpose as a sample of scalar "
        "scores (canary losses, mechanism outputs)",
    ),
    "check_fit2d_predict1d": Expected(
        ValueError,
        _features(3),
        "fits a 3-feature X with a 1-D label y (a 1-feature second sample, refused) before "
        "calling predict-like methods on 1-D input",
    ),
}


def _check_name(check) -> str:
    return getattr(check, "func", check).__name__


def _case_id(estimator, check) -> str:
    # A check that runs in several variants (check_estimators_pickle on plain and on read-only
    # memmapped data) is told apart by its keyword arguments.
    keywords = getattr(check, "keywords", {})
    variant = "".join(f"-{key}={value}" for key, value in sorted(keywords.items()))
    return f"{type(estimator).__name__}-{_check_name(check)}{variant}"


def _cases():
    # estimator_checks_generator is what parametrize_with_checks builds on; it is used directly
    # so that an expected failure is checked in the test body (see below) rather than by an
    # xfail mark, which would count ANY exception, of any kind, as the expected failure.
    for estimator in ESTIMATORS:
        for est, check in estimator_checks_generator(estimator, legacy=True, mark=None):
            yield pytest.param(est, check, id=_case_id(est, check))


@pytest.mark.parametrize("estimator, check", list(_cases()))
def test_sklearn_common_check(estimator, check):
    """Every scikit-learn check passes, or fails exactly as its entry in EXPECTED_FAILURES says.

    An expected failure is strict and specific: a check that starts passing fails here with
    "DID NOT RAISE" (the entry is stale: the estimator now meets the check, remove the entry),
    and one that fails with another exception or message fails here with that exception (a new
    failure, e.g. an AttributeError from a broken fit, that a plain xfail would have hidden).
    After that verification the case is reported as xfailed with its reason (``pytest -rx``).
    """
    expected = EXPECTED_FAILURES.get(_check_name(check))
    if expected is None:
        check(estimator)
        return
    with pytest.raises(expected.exception, match=expected.match):
        check(estimator)
    pytest.xfail(expected.reason)


def test_every_expected_failure_is_a_check_that_runs():
    """Catches a stale entry: a check name that scikit-learn renamed or no longer runs would
    sit in the table, excusing nothing and hiding that the list needs review."""
    for estimator in ESTIMATORS:
        names = {_check_name(check) for _, check in estimator_checks_generator(estimator)}
        assert set(EXPECTED_FAILURES) <= names, set(EXPECTED_FAILURES) - names
