"""Train a tiny MLP on random regression data for a few steps."""

import argparse
import json
from pathlib import Path

import torch

from model import MLP


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", default=str(Path(__file__).parent / "config.json"))
    parser.add_argument("--steps", type=int, default=None, help="Override the config's steps.")
    args = parser.parse_args()
    cfg = json.loads(Path(args.config).read_text())
    steps = args.steps or cfg["steps"]

    torch.manual_seed(cfg["seed"])
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    x = torch.randn(cfg["batch_size"], cfg["in_features"], device=device)
    y = torch.randn(cfg["batch_size"], device=device)
    model = MLP(cfg["in_features"], cfg["hidden"]).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg["lr"])
    loss_fn = torch.nn.MSELoss()

    for step in range(1, steps + 1):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f} device {device}")
    with torch.no_grad():
        print(f"final loss {loss_fn(model(x), y).item():.4f}")


if __name__ == "__main__":
    main()
