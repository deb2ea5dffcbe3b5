"""One machine's fitness to run trials: `reb-ray doctor`'s checks, and the health a node
reports before the sweep gives it work."""
