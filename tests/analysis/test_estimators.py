"""analysis.estimators against values computed by hand from the published formulas."""

from __future__ import annotations

import math

import pytest

from analysis.estimators import (MIN_DISCORDANT, Z95, bootstrap_mean, bootstrap_ratio, mcnemar_exact, pass_at_k,
                                 pass_curves, pass_hat_k, quantile, resample_indices, wilson)


def _wilson_center_form(x: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    # The Wilson bounds as center -+ half width (Wilson 1927).
    p = x / n
    center = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return center - half, center + half


def test_wilson_7_of_10():
    low, high = wilson(7, 10)
    assert (round(low, 4), round(high, 4)) == (0.3968, 0.8922)  # the textbook values for 7/10
    assert (low, high) == pytest.approx(_wilson_center_form(7, 10), abs=1e-12)


def test_wilson_edges():
    assert wilson(2, 4) == pytest.approx((0.1500, 0.8500), abs=5e-5)
    low, high = wilson(0, 10)
    assert low == 0.0 and high == pytest.approx(Z95**2 / (10 + Z95**2))  # 0.2775
    assert wilson(10, 10) == pytest.approx((1 - high, 1.0))
    assert wilson(0, 0) is None
    with pytest.raises(ValueError, match="outside 0..3"):
        wilson(4, 3)


def test_pass_at_k_and_pass_hat_k():
    # n=5 trials, c=2 successes: pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10; pass^2 = C(2,2)/C(5,2) = 1/10
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_hat_k(5, 2, 2) == pytest.approx(0.1)
    assert pass_at_k(5, 2, 1) == pass_hat_k(5, 2, 1) == pytest.approx(0.4)  # k = 1: c/n for both
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - 21 / 252)  # C(7,5) = 21, C(10,5) = 252
    assert pass_hat_k(10, 3, 5) == 0.0  # 3 successes cannot fill 5 draws
    assert pass_at_k(5, 0, 3) == 0.0 and pass_at_k(5, 5, 3) == 1.0 and pass_at_k(4, 2, 3) == 1.0
    with pytest.raises(ValueError, match="k <= n"):
        pass_at_k(2, 1, 3)


def test_pass_curves_match_the_binomial_forms():
    at, hat = pass_curves(5, 2, 5)
    assert at == pytest.approx([0.4, 0.7, 0.9, 1.0, 1.0]) and hat == pytest.approx([0.4, 0.1, 0.0, 0.0, 0.0])
    for n, c in ((379, 0), (379, 17), (379, 200), (379, 379), (12, 5)):
        at, hat = pass_curves(n, c, n)
        for k in (1, 2, 7, n // 2, n):
            assert at[k - 1] == pytest.approx(pass_at_k(n, c, k), abs=1e-12)
            assert hat[k - 1] == pytest.approx(pass_hat_k(n, c, k), abs=1e-12)


def test_mcnemar_exact_from_the_binomial():
    # b=1, c=6: 2 * (C(7,0) + C(7,1)) / 2^7 = 16/128
    assert mcnemar_exact(1, 6) == pytest.approx(0.125)
    assert mcnemar_exact(6, 1) == pytest.approx(0.125)
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)
    assert mcnemar_exact(0, 5) == pytest.approx(2 / 32)  # 0.0625: five discordant tasks cannot reach 0.05
    assert mcnemar_exact(3, 3) == 1.0 and mcnemar_exact(0, 0) == 1.0
    # b=2, c=10: 2 * (1 + 12 + 66) / 4096
    assert mcnemar_exact(2, 10) == pytest.approx(158 / 4096)
    assert MIN_DISCORDANT == 6
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def test_quantile_interpolates_like_numpy():
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert quantile([0.0, 10.0], 0.25) == 2.5
    assert quantile([5.0], 0.975) == 5.0


def test_bootstrap_is_deterministic_and_clustered():
    # 10 tasks x 5 trials, perfectly correlated within a task: 5 tasks always succeed, 5 never.
    successes, trials = [5] * 5 + [0] * 5, [5] * 10
    first = bootstrap_ratio(successes, trials, seed=0)
    assert first == bootstrap_ratio(successes, trials, seed=0)
    assert resample_indices(10, 2000, 0) != resample_indices(10, 2000, 1)  # the seed matters
    low, high = first
    # The task is the unit: about 0.5 +- 1.96 sqrt(0.25 / 10) = [0.19, 0.81], far wider than
    # the Wilson interval that treats the 50 trials as independent.
    assert 0.15 <= low <= 0.3 and 0.7 <= high <= 0.85
    w_low, w_high = wilson(25, 50)
    assert high - low > 1.5 * (w_high - w_low)
    assert bootstrap_ratio([], []) is None and bootstrap_ratio([0], [0]) is None
    assert bootstrap_ratio([3], [5]) == (0.6, 0.6)  # one task: every resample is that task


def test_bootstrap_mean_of_paired_differences():
    assert bootstrap_mean([0.25] * 8) == (0.25, 0.25)
    low, high = bootstrap_mean([1.0] * 6 + [0.0] * 2)
    assert 0.375 <= low < 0.75 < high <= 1.0
    assert bootstrap_mean([]) is None


@pytest.mark.parametrize("successes", [
    [0, 1, 2, 2, 0, 1, 2, 0, 0, 2, 1, 2, 0, 0, 2, 1, 2, 0, 1, 2],  # three distinct values: counted by bisection
    list(range(20)),  # all distinct: summed draw by draw
])
def test_bootstrap_equals_the_plain_resampling(successes):
    """The fast paths compute what resampling the tasks literally gives: the sorted tasks,
    picked by each resample's draws, summed, ratio, percentiles."""
    trials = [2 + (s % 3) for s in successes]
    pairs = sorted(zip(successes, trials))
    stats = sorted(sum(pairs[d][0] for d in draws) / sum(pairs[d][1] for d in draws)
                   for draws in resample_indices(len(pairs), 500, 3))
    assert bootstrap_ratio(successes, trials, resamples=500, seed=3) == pytest.approx(
        (quantile(stats, 0.025), quantile(stats, 0.975)), abs=1e-12)


@pytest.mark.parametrize("n, resamples, seed", [(1, 5, 0), (2, 50, 1), (10, 2000, 0), (37, 300, 7), (4000, 3, 2)])
def test_numpys_draws_are_pythons_draws(n, resamples, seed):
    """The vectorised resamples are the very indices Python's seeded `choices` gives, so every
    interval keeps its digits."""
    from analysis.estimators import resample_array

    assert resample_array(n, resamples, seed).tolist() == [list(r) for r in resample_indices(n, resamples, seed)]
