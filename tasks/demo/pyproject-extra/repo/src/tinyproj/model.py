"""Ridge regression with an L2 penalty, trained by gradient descent."""

import numpy as np


class Ridge:
    def __init__(self, n_features: int, alpha: float):
        self.w = np.zeros(n_features)
        self.alpha = alpha

    def loss(self, X, y) -> float:
        err = X @ self.w - y
        return float(np.mean(err**2) + self.alpha * np.sum(self.w**2))

    def step(self, X, y, lr: float) -> float:
        err = X @ self.w - y
        grad = 2.0 * X.T @ err / len(y) + 2.0 * self.alpha * self.w
        loss = self.loss(X, y)
        self.w -= lr * grad
        return loss


def synthetic(n_samples: int, n_features: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_samples, n_features))
    y = X @ rng.standard_normal(n_features) + 0.05 * rng.standard_normal(n_samples)
    return X, y
