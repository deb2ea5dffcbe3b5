"""Train logistic regression with settings from a YAML config."""

import argparse

import numpy as np
import yaml

from data import two_blobs


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", default="configs/tiny.yaml")
    args = parser.parse_args()

    with open(args.config) as fh:
        cfg = yaml.safe_load(fh)
    X, y = two_blobs(**cfg["data"])
    w = np.zeros(X.shape[1])
    for step in range(1, cfg["optim"]["steps"] + 1):
        p = sigmoid(X @ w)
        loss = float(-np.mean(y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12)))
        w -= cfg["optim"]["lr"] * X.T @ (p - y) / len(y)
        print(f"step {step} loss {loss:.4f}")
    p = sigmoid(X @ w)
    final = float(-np.mean(y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12)))
    print(f"final loss {final:.4f}")


if __name__ == "__main__":
    main()
