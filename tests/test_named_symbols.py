"""Every `reb_ray.<module>[.<name>]` that the code's docstrings and comments name still exists.

The code names the modules and symbols it refers to instead of file paths, so a move that
leaves a stale name behind is caught here: each dotted name is resolved against the source
tree (the longest prefix that is a module or package, then a top-level name of that module,
then, for a class, a name its body defines), without importing anything.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [p for d in ("reb_ray", "analysis", "probes") for p in sorted((ROOT / d).rglob("*.py"))]
DOTTED = re.compile(r"(?<![\w.])reb_ray(?:\.[A-Za-z_]\w*)+")


def _module_file(parts: list[str]) -> Path | None:
    base = ROOT.joinpath(*parts)
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


@lru_cache(maxsize=None)
def _names(path: Path) -> dict[str, ast.AST | None]:
    """Top-level names of a module: definitions, assignments and imports (value: the class node)."""
    tree = ast.parse(path.read_text())
    out: dict[str, ast.AST | None] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            out[node.name] = node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = None
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        out[name.id] = None
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                out[(alias.asname or alias.name).split(".")[0]] = None
        elif isinstance(node, (ast.If, ast.Try)):  # names defined under a guard count as well
            for sub in ast.walk(node):
                if isinstance(sub, (ast.FunctionDef, ast.ClassDef)):
                    out[sub.name] = sub if isinstance(sub, ast.ClassDef) else None
                elif isinstance(sub, (ast.Import, ast.ImportFrom)):
                    for alias in sub.names:
                        out[(alias.asname or alias.name).split(".")[0]] = None
    return out


def _class_names(node: ast.ClassDef) -> set[str]:
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(sub.name)
        elif isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name):
            names.add(sub.target.id)
        elif isinstance(sub, ast.Assign):
            names.update(t.id for t in sub.targets if isinstance(t, ast.Name))
        elif isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id in ("self", "cls"):
            names.add(sub.attr)
    return names


def resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        path = _module_file(parts[:cut])
        if path is None:
            continue
        rest = parts[cut:]
        if not rest:
            return True
        names = _names(path)
        if rest[0] not in names:
            return False
        node = names[rest[0]]
        return len(rest) == 1 or not isinstance(node, ast.ClassDef) or rest[1] in _class_names(node)
    return False


def is_key(dotted: str) -> bool:
    """`reb_ray.word` naming no module: a metadata or JSON key of ours (`reb_ray.dataset`,
    `reb_ray.dropped`), or a dunder, not a reference to code."""
    parts = dotted.split(".")
    return parts[-1].startswith("__") or (len(parts) == 2 and _module_file(parts) is None)


def test_every_named_module_and_symbol_exists():
    missing = []
    for path in SOURCES:
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            for match in DOTTED.finditer(line):
                if not is_key(match.group(0)) and not resolves(match.group(0)):
                    missing.append(f"{path.relative_to(ROOT)}:{lineno}: {match.group(0)}")
    assert missing == [], "names that no longer exist:\n" + "\n".join(missing)


def test_the_resolver_tells_a_stale_name():
    """The resolver is strict enough to fail: a moved module, a renamed symbol, a missing method."""
    assert resolves("reb_ray.sandbox.docker.docker_sandbox.DockerSandbox.exec")
    assert resolves("reb_ray.results.read.latest_attempts") and resolves("reb_ray.trial")
    assert not resolves("reb_ray.sandbox.docker_sandbox")  # before the docker subpackage
    assert not resolves("reb_ray.results.read.no_such_reader")
    assert not resolves("reb_ray.sandbox.docker.docker_sandbox.DockerSandbox.no_such_method")
    assert is_key("reb_ray.dataset") and not is_key("reb_ray.sandbox") and not is_key("reb_ray.probes.c0")
