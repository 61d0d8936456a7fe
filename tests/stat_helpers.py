"""Shared statistical assertions of the test suite."""

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
