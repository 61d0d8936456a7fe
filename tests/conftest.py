"""Fixtures shared by the test suite; plain helper functions live in :mod:`tests.helpers`.

The test tree mirrors the package: ``tests/stats``, ``tests/estimators``, ``tests/auditing`` and
``tests/auditing/dpsgd`` test the modules of the same name; the README, CLI, docs and examples
are tested at the top. Slow statistical suites carry the ``slow`` marker: the default run
leaves them out and ``.ci/run`` runs them afterwards with ``pytest -m slow -n 2 --dist worksteal``.
"""

from __future__ import annotations

from contextlib import contextmanager

import pytest


@pytest.fixture(scope="session")
def digits():
    """scikit-learn's digits as the DP-SGD audits load them (float32 features, int64 labels)."""
    from rdpest.auditing.dpsgd.data import load_digits_data

    return load_digits_data()


@pytest.fixture(scope="session")
def digits_slice(digits):
    """A 200-row stratified slice of the digits' audited half (seeded, the same every time)."""
    from rdpest.auditing.dpsgd.data import split_pretrain

    X, y = digits
    _, _, X_audit, y_audit = split_pretrain(X, y, seed=0)
    _, _, X_small, y_small = split_pretrain(X_audit, y_audit, pretrain_fraction=0.75, seed=1)
    return X_small, y_small


@pytest.fixture
def dask_backend():
    """A context manager that runs joblib on a real two-worker Dask ``LocalCluster``.

    The dev extra installs Dask: a missing install fails the test rather than skipping it.
    """
    import distributed
    from joblib import parallel_config

    @contextmanager
    def backend():
        with (
            distributed.LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            distributed.Client(cluster),
            parallel_config(backend="dask"),
        ):
            yield

    return backend


def pytest_terminal_summary(terminalreporter):
    """Report the session's statistical assertions against the suite's error budget."""
    from tests.helpers import COVERAGE_PVALUE, MAX_STATISTICAL_ASSERTIONS, STATISTICAL_ASSERTIONS

    count = STATISTICAL_ASSERTIONS["count"]
    if count:
        terminalreporter.write_line(
            f"statistical assertions: {count} at level {COVERAGE_PVALUE:g} each (at most "
            f"{MAX_STATISTICAL_ASSERTIONS}): chance of a spurious failure <= "
            f"{count * COVERAGE_PVALUE:.2%}"
        )


def pytest_sessionfinish(session):
    """Fail a session whose statistical assertions exceed the error budget's family size.

    Under pytest-xdist (``pytest -n 2``, as CI runs the suites) each worker hands its count to
    the controller, which adds them up in ``pytest_testnodedown`` and checks the total here.
    """
    from tests.helpers import MAX_STATISTICAL_ASSERTIONS, STATISTICAL_ASSERTIONS

    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller checks the session's total
        workeroutput["statistical_assertions"] = STATISTICAL_ASSERTIONS["count"]
        return
    if STATISTICAL_ASSERTIONS["count"] > MAX_STATISTICAL_ASSERTIONS:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print(
            f"\nthe session made {STATISTICAL_ASSERTIONS['count']} statistical assertions, more "
            f"than the {MAX_STATISTICAL_ASSERTIONS} the error budget in tests/helpers.py allows: "
            "raise the family size and lower COVERAGE_PVALUE with it"
        )


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """Add an xdist worker's statistical assertions to the controller's count."""
    from tests.helpers import STATISTICAL_ASSERTIONS

    output = getattr(node, "workeroutput", None) or {}
    STATISTICAL_ASSERTIONS["count"] += output.get("statistical_assertions", 0)
