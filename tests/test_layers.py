"""The import graph of reb_ray, read with `ast` from the source (nothing is imported).

Every import counts: at module level, inside a function (a lazy import is still a dependency)
and under `if TYPE_CHECKING:` (a type a module names is a concept it depends on). `from
package import submodule` is an arrow to the submodule, not to the package's `__init__`.

The rules:
- no import circle between reb_ray's modules;
- the layers below, top to bottom: a module imports only its own package and packages of lower
  layers, never one of its own layer or above;
- inside a package with an order of its own (INNER_LAYERS: reb_ray/sandbox/), a module imports
  only modules of its own row and of lower rows;
- Ray is imported only under reb_ray/orchestrators/ (exceptions listed in RAY_ELSEWHERE);
- `analysis` (the reports) is imported only by the command line, reb_ray/cli/, and the viewer,
  reb_ray/viewer/, which stand above both; `tests` never.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "reb_ray"

#: Top to bottom. A name is a subpackage of reb_ray or one of its top-level modules.
LAYERS: list[set[str]] = [
    {"testing"},                    # stand-ins for the tests and benchmarks; nothing imports them
    {"cli"},                        # the command line: one thin module per noun
    {"viewer"},                     # the local web viewer: reads the results store, shows the reports
    {"sweep"},                      # the job on the driver: expand, identity, run, regrade, W&B
    {"orchestrators"},              # Ray: slot workers, node checks, leases, the proxy actor
    {"harbor"},                     # Harbor tasks: reb-ray suites written as them; them run, placed like GPU trials
    {"scheduling"},                 # pure rules: dispatch order, slot plans, budget, durations
    {"trial"},                      # one attempt on one node: prepare, agent, between, probes, record
    {"environment"},                # what the agent built: capture, keep, export, the node's fingerprint
    {"agents", "llm", "suite"},     # agent kinds; LLM plumbing; the suite's tasks, repos, assets
    {"probing", "node"},            # the host side of the probes; a node's fitness
    {"grading"},                    # pure graders of probe records
    {"models"},                     # schemas: task, agent, sweep, report
    {"netpolicy", "results", "sandbox"},  # network policy; the results store; sandbox providers
    {"background", "jsonl", "paths", "redact", "sizes", "terminal"},  # small shared utilities
    {"errors"},
]

#: Packages with an order inside: rows top to bottom of module or subpackage names (relative to
#: reb_ray; the package's own name is its `__init__` only), the row holding "*" taking every
#: other module of the package.
INNER_LAYERS: dict[str, list[set[str]]] = {
    "sandbox": [
        # The registry (a provider by its name) and what opens sandboxes through it.
        {"sandbox", "sandbox.package_cache"},
        # The providers and helpers that speak the Docker Engine API (docker, podman).
        {"sandbox.docker"},
        # The interface (base), the host-process providers (local, sleep), views, output, limits.
        {"*"},
    ],
}

#: Modules outside reb_ray/orchestrators/ that import Ray, and why.
RAY_ELSEWHERE = {
    # `reb-ray doctor` reports whether Ray imports and which version: the check is the import.
    "reb_ray.node.doctor": "doctor's check that Ray is installed",
    # A cluster of several raylets on one machine, for the tests and benchmarks (Ray's own
    # cluster_utils): a stand-in for a real cluster, never used by a sweep.
    "reb_ray.testing.ray_cluster": "the tests' and benchmarks' simulated cluster",
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The reb_ray module a dotted name lives in (a module, or the package that defines it)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path) -> list[tuple[str, int]]:
    """(imported top-level or reb_ray module name, line) of every import in the file."""
    found = []
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = module.split(".") if is_package else module.split(".")[:-1]
                here = here[: len(here) - (node.level - 1)]
                base = ".".join(here + ([base] if base else []))
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
            found += [(sub, node.lineno) for sub in subs]
            if len(subs) < len(node.names):
                found.append((base, node.lineno))
    return found


def _graph() -> dict[str, dict[str, int]]:
    """{module: {imported reb_ray module or external top-level name: first line}}."""
    graph: dict[str, dict[str, int]] = {}
    for module, path in MODULES.items():
        edges: dict[str, int] = {}
        for name, line in _imports(module, path):
            target = _owner(name) if name.split(".")[0] == "reb_ray" else name.split(".")[0]
            if target and target != module:
                edges.setdefault(target, line)
        graph[module] = edges
    return graph


GRAPH = _graph()


def _unit(module: str) -> str:
    """The layer unit of a reb_ray module: its subpackage, or itself when top-level."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _layer_of(unit: str) -> int:
    for i, layer in enumerate(LAYERS):
        if unit in layer:
            return i
    raise AssertionError(f"reb_ray.{unit} is on no layer: add it to LAYERS in {Path(__file__).name}")


def test_the_graph_is_read():
    """The reader finds the arrows it must (a reader that sees none would pass every rule)."""
    assert len(MODULES) > 150
    assert "reb_ray.trial.record" in GRAPH["reb_ray.trial.run"]
    assert "ray" in GRAPH["reb_ray.orchestrators.ray_orchestrator"]
    assert "reb_ray.trial.run" in GRAPH["reb_ray.trial"]  # a lazy import inside a function counts


def test_every_package_has_a_layer():
    placed = {unit for layer in LAYERS for unit in layer}
    unplaced = sorted({_unit(m) for m in MODULES if m != "reb_ray"} - placed)
    assert unplaced == [], f"on no layer: {unplaced}: add them to LAYERS in {Path(__file__).name}"


def test_no_import_circle():
    """Tarjan's strongly connected components over every import between reb_ray's modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in GRAPH:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in GRAPH:
        if module not in index:
            visit(module)
    assert circles == []


def test_no_arrow_runs_up_or_across_a_layer():
    wrong = []
    for module, edges in GRAPH.items():
        if module == "reb_ray":
            continue
        here = _unit(module)
        for target, line in edges.items():
            if not target.startswith("reb_ray.") or _unit(target) == here:
                continue
            if _layer_of(_unit(target)) <= _layer_of(here):
                wrong.append(f"{MODULES[module].relative_to(ROOT)}:{line} imports {target}")
    assert wrong == []


def _inner_row(package: str, module: str) -> int:
    """The row of INNER_LAYERS[package] that holds reb_ray module `module`."""
    rel = module.removeprefix("reb_ray.")
    rows = INNER_LAYERS[package]
    for i, row in enumerate(rows):
        if rel in row or any(name != package and rel.startswith(f"{name}.") for name in row):
            return i
    return next(i for i, row in enumerate(rows) if "*" in row)


def test_the_inner_order_is_read():
    """The registry reaches the Docker-API providers (the rule below would pass on no arrows)."""
    assert "reb_ray.sandbox.docker.docker_sandbox" in GRAPH["reb_ray.sandbox"]
    assert _inner_row("sandbox", "reb_ray.sandbox") == 0
    assert _inner_row("sandbox", "reb_ray.sandbox.docker.image") == 1
    assert _inner_row("sandbox", "reb_ray.sandbox.base") == 2


def test_no_arrow_runs_up_inside_an_ordered_package():
    """Inside reb_ray/sandbox/, the provider-neutral modules (the interface, local, sleep) never
    import the Docker-API subpackage, and that subpackage never imports the registry: the rest of
    reb_ray reaches a Docker-API provider by its name, through the registry only."""
    wrong = []
    for module, edges in GRAPH.items():
        package = _unit(module)
        if package not in INNER_LAYERS:
            continue
        for target, line in edges.items():
            if target.startswith("reb_ray.") and _unit(target) == package \
                    and _inner_row(package, target) < _inner_row(package, module):
                wrong.append(f"{MODULES[module].relative_to(ROOT)}:{line} imports {target}")
    assert wrong == []


def test_ray_only_in_the_orchestrators():
    found = {module for module, edges in GRAPH.items() if "ray" in edges}
    outside = {m for m in found if _unit(m) != "orchestrators"}
    assert outside == set(RAY_ELSEWHERE)


@pytest.mark.parametrize("package", ["analysis", "tests"])
def test_reb_ray_never_imports_the_reports_or_the_tests(package):
    allowed = {"cli", "viewer"} if package == "analysis" else set()
    wrong = [f"{MODULES[m].relative_to(ROOT)}:{edges[package]}" for m, edges in GRAPH.items()
             if package in edges and _unit(m) not in allowed]
    assert wrong == []
