"""The tests' shared helpers, in one package: the scripted agents (`tests.helpers.scripted_agents`,
named by their import path as an agent kind), the task suite writer (`suite`), a private Docker
daemon, an SSH node on this machine, a hub endpoint. Stand-ins the benchmarks share live in
the shipped package `reb_ray.testing` (the LLM session, the row factory, the simulated Ray
cluster), since `benchmarks/` never imports `tests`; the shared fixtures are in tests/conftest.py."""
