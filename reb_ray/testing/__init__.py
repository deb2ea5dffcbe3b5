"""Stand-ins the tests and the benchmarks share, shipped with the package so that neither
imports the other: a Ray cluster of several raylets on one machine, synthetic result rows,
and an agent's session against a scripted LLM endpoint in a real sandbox. Nothing else in
reb_ray imports this package."""
