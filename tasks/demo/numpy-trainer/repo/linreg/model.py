"""A linear model with mean-squared-error loss."""

import numpy as np


class LinearModel:
    def __init__(self, n_features: int):
        self.w = np.zeros(n_features)
        self.b = 0.0

    def predict(self, X):
        return X @ self.w + self.b

    def loss(self, X, y) -> float:
        return float(np.mean((self.predict(X) - y) ** 2))

    def step(self, X, y, lr: float) -> float:
        """One gradient-descent step; returns the loss before the update."""
        err = self.predict(X) - y
        loss = float(np.mean(err**2))
        self.w -= lr * 2.0 * X.T @ err / len(y)
        self.b -= lr * 2.0 * float(err.mean())
        return loss
