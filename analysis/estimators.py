"""The estimators behind `analysis.statistics`, pure and dependency-free (the standard library
only, so the analysis runs wherever reb-ray does).

- `wilson`: the Wilson score interval for a binomial proportion (Wilson 1927; the interval
  Brown, Cai and DasGupta 2001 recommend for small n), for one trial per task.
- `bootstrap_ratio` / `bootstrap_mean`: percentile intervals from a bootstrap that resamples
  whole tasks (a cluster bootstrap: the trials of one repository are correlated, so resampling
  trials would understate the uncertainty). Deterministic: the resamples come from
  `random.Random` seeded with a string (its seed is a SHA-512 of the string, stable across
  processes and Python versions), and depend only on the seed and the number of tasks.
- `pass_at_k`: the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models
  Trained on Code", eq. 1): 1 - C(n-c, k) / C(n, k) per task.
- `pass_hat_k`: pass^k, the chance that k trials drawn without replacement all succeed,
  C(c, k) / C(n, k) per task (the unbiased estimator tau-bench, Yao et al. 2024, uses).
- `pass_curves`: both for every k at once, in O(k) per task.
- `mcnemar_exact`: McNemar's exact test, the two-sided binomial test of the discordant pairs
  against p = 1/2 (McNemar 1947; exact form as in Fagerland et al. 2013).
"""

from __future__ import annotations

import math
import random
from bisect import bisect_left
from functools import lru_cache
from operator import itemgetter
from statistics import NormalDist

Z95 = NormalDist().inv_cdf(0.975)  # 1.959963984540054
#: Bootstrap resamples unless asked otherwise.
RESAMPLES = 2000
#: The fewest discordant tasks with which McNemar's exact test can reach p < 0.05
#: (2 * 0.5**n < 0.05 first holds at n = 6).
MIN_DISCORDANT = next(n for n in range(1, 64) if 2 * 0.5**n < 0.05)


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval (low, high) for `successes` of `n`; None when n is 0.

    Bounds (2x + z^2 -+ z sqrt(z^2 + 4x(1 - x/n))) / (2(n + z^2)) for x successes (Newcombe
    1998, method 3; the same as center (p + z^2/2n)/(1 + z^2/n) -+ z sqrt(p(1-p)/n +
    z^2/4n^2)/(1 + z^2/n), but exactly 0 and 1 at x = 0 and x = n).
    Raises ValueError when successes is outside 0..n.
    """
    if not 0 <= successes <= n:
        raise ValueError(f"wilson: successes {successes} outside 0..{n}")
    if n == 0:
        return None
    root = z * math.sqrt(z * z + 4 * successes * (1 - successes / n))
    low = (2 * successes + z * z - root) / (2 * (n + z * z))
    high = (2 * successes + z * z + root) / (2 * (n + z * z))
    return max(0.0, low), min(1.0, high)


def resample_indices(n: int, resamples: int, seed: int) -> tuple[tuple[int, ...], ...]:
    """`resamples` bootstrap resamples of range(n) (each n indices drawn with replacement),
    a function of (n, resamples, seed) alone."""
    rng = random.Random(f"reb-ray bootstrap {seed} {n}")
    population = range(n)
    return tuple(tuple(rng.choices(population, k=n)) for _ in range(resamples))


@lru_cache(maxsize=32)
def _sorted_resamples(n: int, resamples: int, seed: int) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(sorted(idx)) for idx in resample_indices(n, resamples, seed))


def quantile(sorted_values: list[float], q: float) -> float:
    """The q-quantile of sorted values, linearly interpolated between order statistics (the
    default of numpy.quantile and R's type 7). Raises IndexError on an empty list."""
    pos = q * (len(sorted_values) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (pos - low)


def _resampled_sums(numerators: list[float], denominators: list[float], resamples: int,
                    seed: int) -> list[tuple[float, float]]:
    """(sum of numerators, sum of denominators) of each resample of the tasks.

    Tasks are put in the order of their (numerator, denominator) pairs and resample position j
    picks the j-th; so a resample is fixed by how many of its draws fall in each run of equal
    pairs. With few distinct pairs (the usual case: successes of a few trials per task) those
    counts come from bisecting the resample's sorted draws, O(distinct x log tasks) per
    resample instead of O(tasks); otherwise the draws' values are summed in C (itemgetter)."""
    pairs = sorted(zip(numerators, denominators))
    n = len(pairs)
    starts = [j for j in range(n) if j == 0 or pairs[j] != pairs[j - 1]]
    draws_of = _sorted_resamples(n, resamples, seed)
    if n == 1:
        return [pairs[0]] * resamples
    if len(starts) * 8 > n:
        nums, dens = [p[0] for p in pairs], [p[1] for p in pairs]
        out = []
        for draws in draws_of:
            pick = itemgetter(*draws)
            out.append((sum(pick(nums)), sum(pick(dens))))
        return out
    groups = [(end, pairs[start]) for start, end in zip(starts, [*starts[1:], n])]
    out = []
    for draws in draws_of:
        before, num, den = 0, 0, 0
        for end, (v_num, v_den) in groups:
            upto = bisect_left(draws, end)
            num += (upto - before) * v_num
            den += (upto - before) * v_den
            before = upto
        out.append((num, den))
    return out


def _percentile(stats: list[float]) -> tuple[float, float]:
    stats.sort()
    return quantile(stats, 0.025), quantile(stats, 0.975)


def bootstrap_ratio(numerators: list[float], denominators: list[float], *, resamples: int = RESAMPLES,
                    seed: int = 0) -> tuple[float, float] | None:
    """95% percentile interval of sum(numerators) / sum(denominators) when the tasks (one
    numerator and denominator each, e.g. successes and trials) are resampled with replacement
    (`resample_indices`). None when there are no tasks or the denominators sum to 0. A resample
    whose denominators sum to 0 is left out."""
    if not numerators or not sum(denominators):
        return None
    return _percentile([num / den for num, den in _resampled_sums(numerators, denominators, resamples, seed) if den])


def bootstrap_mean(values: list[float], *, resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float] | None:
    """95% percentile interval of the mean of `values` (one per task) under task resampling
    (`resample_indices`); None for no values."""
    if not values:
        return None
    n = len(values)
    return _percentile([num / n for num, _ in _resampled_sums(values, [1] * n, resamples, seed)])


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chance that at least one of k trials succeeds, estimated from c successes in n trials
    of one task: 1 - C(n-c, k) / C(n, k). Raises ValueError unless 0 <= c <= n and 1 <= k <= n."""
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass_at_k: need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Chance that all of k trials succeed (pass^k), from c successes in n trials of one task:
    C(c, k) / C(n, k). Raises ValueError like pass_at_k."""
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass_hat_k: need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    return math.comb(c, k) / math.comb(n, k)


def pass_curves(n: int, c: int, kmax: int) -> tuple[list[float], list[float]]:
    """[pass_at_k(n, c, k) for k in 1..kmax] and [pass_hat_k(n, c, k) ...] in O(kmax), from the
    products C(n-c, k)/C(n, k) = prod_{i<k} (n-c-i)/(n-i) and C(c, k)/C(n, k) = prod_{i<k}
    (c-i)/(n-i) (each factor at most 1, so the float products stay accurate). Raises ValueError
    unless 0 <= c <= n and 0 <= kmax <= n."""
    if not (0 <= c <= n and 0 <= kmax <= n):
        raise ValueError(f"pass_curves: need 0 <= c <= n and kmax <= n, got n={n} c={c} kmax={kmax}")
    at, hat = [], []
    miss, hit = 1.0, 1.0
    for i in range(kmax):
        miss *= max(0, n - c - i) / (n - i)
        hit *= max(0, c - i) / (n - i)
        at.append(1.0 - miss)
        hat.append(hit)
    return at, hat


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for b tasks only the first agent solved and c only the
    second solved: min(1, 2 * P[X <= min(b, c)]) for X ~ Binomial(b + c, 1/2); 1.0 when b + c
    is 0. Raises ValueError for a negative count."""
    if b < 0 or c < 0:
        raise ValueError(f"mcnemar_exact: negative count b={b} c={c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2**n)
