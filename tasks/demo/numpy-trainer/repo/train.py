"""Train a linear regression model on synthetic data."""

import argparse
import json
from pathlib import Path

from linreg import LinearModel, make_regression


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", default=str(Path(__file__).parent / "configs" / "default.json"))
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()

    cfg = json.loads(Path(args.config).read_text())
    X, y, _ = make_regression(cfg["n_samples"], cfg["n_features"], cfg["noise"], cfg["seed"])
    model = LinearModel(cfg["n_features"])
    for step in range(1, args.steps + 1):
        loss = model.step(X, y, cfg["lr"])
        print(f"step {step} loss {loss:.4f}")
    print(f"final loss {model.loss(X, y):.4f}")


if __name__ == "__main__":
    main()
