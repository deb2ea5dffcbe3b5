"""Synthetic regression data."""

import numpy as np


def make_regression(n_samples: int, n_features: int, noise: float, seed: int):
    """Return (X, y, true_weights) with y = X @ w + b + noise."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_samples, n_features))
    w = rng.standard_normal(n_features)
    y = X @ w + 0.5 + noise * rng.standard_normal(n_samples)
    return X, y, w
