"""The estimators behind `analysis.statistics`: the textbook ones from scipy.stats, the task
bootstrap vectorised with numpy.

- `wilson`: the Wilson score interval for a binomial proportion (Wilson 1927; the interval
  Brown, Cai and DasGupta 2001 recommend for small n), for one trial per task:
  `scipy.stats.binomtest(...).proportion_ci(method="wilson")`.
- `bootstrap_ratio` / `bootstrap_mean`: percentile intervals from a bootstrap that resamples
  whole tasks (a cluster bootstrap: the trials of one repository are correlated, so resampling
  trials would understate the uncertainty). Deterministic: the resamples come from
  `random.Random` seeded with a string (its seed is a SHA-512 of the string, stable across
  processes and Python versions), and depend only on the seed and the number of tasks; every
  resample's sums are computed at once (numpy), in the same order of additions as a loop over
  the draws, so the numbers are those of summing each resample one by one.
- `pass_at_k`: the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models
  Trained on Code", eq. 1): 1 - C(n-c, k) / C(n, k) per task.
- `pass_hat_k`: pass^k, the chance that k trials drawn without replacement all succeed,
  C(c, k) / C(n, k) per task (the unbiased estimator tau-bench, Yao et al. 2024, uses).
- `pass_curves`: both for every k at once (numpy cumulative products).
- `mcnemar_exact`: McNemar's exact test, the two-sided binomial test of the discordant pairs
  against p = 1/2 (McNemar 1947; exact form as in Fagerland et al. 2013):
  `scipy.stats.binomtest(min(b, c), b + c, 0.5)`.
"""

from __future__ import annotations

import math
import random
from functools import lru_cache
from statistics import NormalDist

import numpy as np

Z95 = NormalDist().inv_cdf(0.975)  # 1.959963984540054
#: Bootstrap resamples unless asked otherwise.
RESAMPLES = 2000
#: The fewest discordant tasks with which McNemar's exact test can reach p < 0.05
#: (2 * 0.5**n < 0.05 first holds at n = 6).
MIN_DISCORDANT = next(n for n in range(1, 64) if 2 * 0.5**n < 0.05)


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval (low, high) for `successes` of `n` at 95% (scipy.stats;
    `z` other than Z95 is not supported); None when n is 0.
    Raises ValueError when successes is outside 0..n."""
    if not 0 <= successes <= n:
        raise ValueError(f"wilson: successes {successes} outside 0..{n}")
    if z != Z95:
        raise ValueError("wilson: only the 95% interval (z = Z95)")
    if n == 0:
        return None
    from scipy.stats import binomtest  # here: importing scipy.stats takes about a second, often not needed

    ci = binomtest(int(successes), int(n)).proportion_ci(confidence_level=0.95, method="wilson")
    return max(0.0, float(ci.low)), min(1.0, float(ci.high))


def resample_indices(n: int, resamples: int, seed: int) -> tuple[tuple[int, ...], ...]:
    """`resamples` bootstrap resamples of range(n) (each n indices drawn with replacement),
    a function of (n, resamples, seed) alone: Python's `random.Random` seeded with a string,
    each resample `rng.choices(range(n), k=n)`. `resample_array` draws the same indices."""
    rng = random.Random(f"reb-ray bootstrap {seed} {n}")
    population = range(n)
    return tuple(tuple(rng.choices(population, k=n)) for _ in range(resamples))


def _generator(n: int, seed: int) -> np.random.RandomState:
    """numpy's Mersenne Twister in the state Python's `random.Random` has after its string seeding
    for (n, seed)."""
    version, internal, _gauss = random.Random(f"reb-ray bootstrap {seed} {n}").getstate()
    state = np.random.RandomState()
    state.set_state(("MT19937", np.array(internal[:-1], dtype=np.uint32), internal[-1]))
    return state


def _draw_rows(state: np.random.RandomState, n: int, rows: int) -> np.ndarray:
    """The next `rows` resamples of `state` as a (rows, n) int64 array: each index floor(u * n)
    as `choices` computes it (u * n >= 0, so truncation is that floor)."""
    return (state.random_sample(rows * n) * n).astype(np.int64).reshape(rows, n)


def resample_array(n: int, resamples: int, seed: int) -> np.ndarray:
    """`resample_indices` as a (resamples, n) int64 array, drawn by numpy: the same Mersenne
    Twister state (Python's, after its string seeding) and the same 53-bit doubles
    (`random()` and numpy's `random_sample` both take two 32-bit words), each index
    floor(u * n) as `choices` computes it. At 4,000 tasks and 2,000 resamples this is about
    0.1 s where Python's per-draw loop took about 2 s."""
    return _draw_rows(_generator(n, seed), n, resamples)


@lru_cache(maxsize=4)
def _sorted_draws(n: int, resamples: int, seed: int) -> np.ndarray:
    """The resamples as a (resamples, n) array, each row's draws sorted (the float sums that are
    added draw by draw need them in that order)."""
    draws = resample_array(n, resamples, seed)
    draws.sort(axis=1)
    draws.flags.writeable = False
    return draws


#: Draws turned into counts at a time (about 8 MB of indices): the same stream as one call.
CHUNK_DRAWS = 1 << 20


@lru_cache(maxsize=4)
def _draw_counts(n: int, resamples: int, seed: int) -> np.ndarray:
    """counts[r, j]: how many of resample r's draws picked position j (int64, resamples x n),
    the draws taken from the generator a chunk of resamples at a time (a stream read in
    consecutive pieces is the same stream). With them a resample's integer sums are one matrix
    product instead of a gather of n values per resample."""
    state = _generator(n, seed)
    rows = max(1, CHUNK_DRAWS // n)
    offsets = (np.arange(rows, dtype=np.int64) * n)[:, None]
    counts = np.empty((resamples, n), np.int64)
    for first in range(0, resamples, rows):
        k = min(rows, resamples - first)
        draws = _draw_rows(state, n, k)
        draws += offsets[:k]
        counts[first:first + k] = np.bincount(draws.ravel(), minlength=k * n).reshape(k, n)
    counts.flags.writeable = False
    return counts


@lru_cache(maxsize=4)
def _draws_below(n: int, resamples: int, seed: int) -> np.ndarray:
    """below[r, j]: how many of resample r's draws picked a position <= j (int32)."""
    below = _draw_counts(n, resamples, seed).cumsum(axis=1, dtype=np.int32)
    below.flags.writeable = False
    return below


def quantile(sorted_values, q: float) -> float:
    """The q-quantile of sorted values, linearly interpolated between order statistics (the
    default of numpy.quantile and R's type 7). Raises IndexError on an empty list."""
    pos = q * (len(sorted_values) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(sorted_values) - 1)
    lo, hi = float(sorted_values[low]), float(sorted_values[high])
    return lo + (hi - lo) * (pos - low)


def _integers(values) -> bool:
    """True when every value is an integer (Python's, numpy's or a bool), which numpy adds exactly."""
    array = np.asarray(values)
    if array.dtype != object:
        return array.dtype.kind in "biu"
    return all(isinstance(v, (int, np.integer)) for v in values)


def _resampled_sums(numerators, denominators, resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(sums of numerators, sums of denominators) of each resample of the tasks, as arrays.

    Tasks are put in the order of their (numerator, denominator) pairs and resample position j
    picks the j-th. With few distinct pairs (the usual case: successes of a few trials per
    task) a resample is fixed by how many of its draws fall in each run of equal pairs, so the
    sums are count x value added run by run; otherwise the picked values are added draw by
    draw. Either way the additions happen in the order a loop over the sorted draws makes them,
    one column of all resamples at a time (integers, which add exactly in any order, are summed
    row by row at once)."""
    pairs = sorted(zip(numerators, denominators))
    n = len(pairs)
    if n == 1:
        return np.full(resamples, pairs[0][0], dtype=object), np.full(resamples, pairs[0][1], dtype=object)
    starts = [j for j in range(n) if j == 0 or pairs[j] != pairs[j - 1]]
    exact = _integers(numerators) and _integers(denominators)
    kind = np.int64 if exact else np.float64
    nums = np.array([p[0] for p in pairs], kind)
    dens = np.array([p[1] for p in pairs], kind)
    num, den = np.zeros(resamples, kind), np.zeros(resamples, kind)
    if exact and len(starts) * 8 > n:
        # integers add exactly in any order: every resample's sum as count x value at once
        counts = _draw_counts(n, resamples, seed)
        return counts @ nums, counts @ dens
    if len(starts) * 8 > n:
        draws = _sorted_draws(n, resamples, seed)
        for j in range(n):
            num += nums[draws[:, j]]
            den += dens[draws[:, j]]
        return num, den
    below = _draws_below(n, resamples, seed)
    before = np.zeros(resamples, np.int64)
    for start, end in zip(starts, [*starts[1:], n]):
        upto = below[:, end - 1].astype(np.int64)  # draws below `end`
        count = upto - before
        num += count * nums[start]
        den += count * dens[start]
        before = upto
    return num, den


def _percentile(stats: np.ndarray) -> tuple[float, float]:
    stats = np.sort(stats)
    return quantile(stats, 0.025), quantile(stats, 0.975)


def bootstrap_ratio(numerators: list[float], denominators: list[float], *, resamples: int = RESAMPLES,
                    seed: int = 0) -> tuple[float, float] | None:
    """95% percentile interval of sum(numerators) / sum(denominators) when the tasks (one
    numerator and denominator each, e.g. successes and trials) are resampled with replacement
    (`resample_indices`). None when there are no tasks or the denominators sum to 0. A resample
    whose denominators sum to 0 is left out."""
    if not len(numerators) or not sum(denominators):
        return None
    num, den = _resampled_sums(numerators, denominators, resamples, seed)
    keep = den != 0
    if num.dtype == object:
        return _percentile(np.array([a / b for a, b in zip(num[keep], den[keep])], np.float64))
    return _percentile(num[keep].astype(np.float64) / den[keep].astype(np.float64))


def bootstrap_mean(values: list[float], *, resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float] | None:
    """95% percentile interval of the mean of `values` (one per task) under task resampling
    (`resample_indices`); None for no values."""
    if not len(values):
        return None
    n = len(values)
    num, _ = _resampled_sums(values, [1] * n, resamples, seed)
    if num.dtype == object:
        return _percentile(np.array([a / n for a in num], np.float64))
    return _percentile(num / n)


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


@lru_cache(maxsize=4096)
def _curves(n: int, c: int, kmax: int) -> tuple[np.ndarray, np.ndarray]:
    i = np.arange(kmax, dtype=np.float64)
    miss = np.cumprod(np.maximum(0, n - c - i) / (n - i))
    hit = np.cumprod(np.maximum(0, c - i) / (n - i))
    at, hat = 1.0 - miss, hit
    at.flags.writeable = hat.flags.writeable = False
    return at, hat


def pass_curves(n: int, c: int, kmax: int) -> tuple[list[float], list[float]]:
    """[pass_at_k(n, c, k) for k in 1..kmax] and [pass_hat_k(n, c, k) ...], from the products
    C(n-c, k)/C(n, k) = prod_{i<k} (n-c-i)/(n-i) and C(c, k)/C(n, k) = prod_{i<k} (c-i)/(n-i)
    (each factor at most 1, so the float products stay accurate). Raises ValueError unless
    0 <= c <= n and 0 <= kmax <= n."""
    at, hat = pass_arrays(n, c, kmax)
    return at.tolist(), hat.tolist()


def pass_arrays(n: int, c: int, kmax: int) -> tuple[np.ndarray, np.ndarray]:
    """`pass_curves` as read-only numpy arrays (cached per (n, c, kmax))."""
    if not (0 <= c <= n and 0 <= kmax <= n):
        raise ValueError(f"pass_curves: need 0 <= c <= n and kmax <= n, got n={n} c={c} kmax={kmax}")
    return _curves(int(n), int(c), int(kmax))


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for b tasks only the first agent solved and c only the
    second solved: min(1, 2 * P[X <= min(b, c)]) for X ~ Binomial(b + c, 1/2) (scipy.stats'
    two-sided binomial test, which for p = 1/2 is that); 1.0 when b + c is 0. Raises
    ValueError for a negative count."""
    if b < 0 or c < 0:
        raise ValueError(f"mcnemar_exact: negative count b={b} c={c}")
    if b + c == 0:
        return 1.0
    from scipy.stats import binomtest

    return min(1.0, float(binomtest(int(min(b, c)), int(b + c), 0.5).pvalue))
