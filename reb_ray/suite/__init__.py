"""A suite's tasks as the harness meets them before any trial: loading and selecting them,
placing each repository at its pinned commit (from a mirror, bundled source or a clone), the
assets the probes need, and the C0 baseline of the repository as pinned."""
