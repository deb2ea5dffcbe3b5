"""Command-line trainer: `python -m tinyproj.main --steps N` (needs the `cli` extra)."""

import click

from tinyproj.model import Ridge, synthetic

DEFAULTS = {"lr": 0.05, "alpha": 0.01, "n_samples": 200, "n_features": 6, "seed": 3}


@click.command()
@click.option("--steps", default=50, show_default=True, help="Gradient-descent steps.")
@click.option("--lr", default=DEFAULTS["lr"], show_default=True, help="Learning rate.")
@click.option("--alpha", default=DEFAULTS["alpha"], show_default=True, help="L2 penalty.")
def main(steps: int, lr: float, alpha: float) -> None:
    """Train ridge regression on synthetic data and print the loss."""
    X, y = synthetic(DEFAULTS["n_samples"], DEFAULTS["n_features"], DEFAULTS["seed"])
    model = Ridge(X.shape[1], alpha)
    for step in range(1, steps + 1):
        click.echo(f"step {step} loss {model.step(X, y, lr):.4f}")
    click.echo(f"final loss {model.loss(X, y):.4f}")


if __name__ == "__main__":
    main()
