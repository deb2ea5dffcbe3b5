"""Environments as artifacts: what an agent built, captured, kept, exported and rebuilt.

One idea per module: `fingerprint` (the node's hardware and runtime, trials-row columns),
`capture` (the environment manifest of an attempt), `keep` (its container kept as an image),
`phase` (the two calls the trial flow makes), `export` (a directory that rebuilds the
environment), `verify` (rebuild an export and run the probe phase on it).
"""
