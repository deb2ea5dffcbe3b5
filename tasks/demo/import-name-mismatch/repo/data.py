"""Two Gaussian blobs, labels 0/1."""

import numpy as np


def two_blobs(n_samples: int, n_features: int, seed: int):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=n_samples)
    X = rng.standard_normal((n_samples, n_features)) + (2.0 * y - 1.0)[:, None]
    return X, y.astype(np.float64)
