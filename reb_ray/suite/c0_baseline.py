"""The C0 denominator: distinct third-party top-level modules a repository imports.

The paper scores C0 as the share of a repository's imports that resolve in the agent's
environment, over a fixed per-task total (`c0_baseline_total`, 2858 over the 44 tasks). This
module recomputes such a total from source, by the rule the task CSV describes:

- files: the repository's tracked Python files (`git ls-files '*.py'` in a git checkout; else
  every `*.py` under the directory, skipping `.git`, `__pycache__` and virtual environments);
- imports: absolute `import a.b` / `from a.b import c`, anywhere in a file (also inside
  functions and `try:`), counted by their top-level name `a`; relative imports are local;
- a file that does not parse (`ast`) is skipped and counted in `syntax_errors`;
- excluded: the standard library (`sys.stdlib_module_names` of the running Python), and the
  repository's own modules: top-level modules and packages at the root and under `src/`
  (a `name.py`, or a directory holding Python files), every package found anywhere in the tree
  by its `__init__.py`, and a module or package next to the importing file (what a script's
  own directory makes importable, as pyright resolves it).

`baseline_for_commit` checks a commit out of a (bare) git repository into a temporary
directory and scans it there; the repository itself is not modified.

The canonical totals of the paper (c0_baseline_totals.json) do NOT follow the exclusions: on
the repositories checked (VisionMamba 4, nano-vllm 22, MultiModalMamba 16, SenseVoice 33,
Kokoro-FastAPI 75, torchft 58, Auto1111SDK 213) they equal the distinct top-level names of
ALL absolute imports, standard library and the repository's own packages included, which is
what `include_stdlib=True, include_local=True` computes. The paper's C0 is the share of those
names that resolve, so stdlib and local names count as resolved. `baseline_for_commit` therefore
defaults to that rule (it reproduces the canonical totals); `scan_imports` gives the stricter
third-party-only set, which is what an agent actually has to install.
"""

from __future__ import annotations

import ast
import functools
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

STDLIB = frozenset(sys.stdlib_module_names)
_SKIP_DIRS = {".git", "__pycache__"}


@dataclass
class ImportScan:
    """What `scan` found: third-party top-level `modules`, the number of Python `files` read and
    of those skipped because they do not parse (`syntax_errors`), and `runtime_path`: imported
    names that exist only below the repository root (not at the root, in src/ or next to the
    importing file), which Python finds after a runtime sys.path edit and static analysis never
    does (e.g. `import dnnlib` with third_party/stylegan put on sys.path)."""

    modules: set[str] = field(default_factory=set)
    files: int = 0
    syntax_errors: int = 0
    runtime_path: set[str] = field(default_factory=set)


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_LFS_SKIP_SMUDGE": "1"}
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=600)


def _is_git_root(repo_dir: Path) -> bool:
    res = _git(["rev-parse", "--show-toplevel"], repo_dir)
    return res.returncode == 0 and Path(res.stdout.strip()).resolve() == repo_dir.resolve()


def python_files(repo_dir: Path) -> list[PurePosixPath]:
    """Relative paths of the repository's Python files (tracked ones in a git checkout)."""
    repo_dir = Path(repo_dir)
    if _is_git_root(repo_dir):
        res = _git(["ls-files", "-z", "--", "*.py"], repo_dir)
        if res.returncode != 0:
            raise RuntimeError(f"git ls-files failed in {repo_dir}: {res.stderr.strip()}")
        return sorted(PurePosixPath(p) for p in res.stdout.split("\0") if p)
    found = []
    for root, dirs, files in os.walk(repo_dir):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not (Path(root, d, "pyvenv.cfg").exists()))
        rel = Path(root).relative_to(repo_dir)
        found += [PurePosixPath(rel.as_posix(), f) for f in files if f.endswith(".py")]
    return sorted(PurePosixPath(str(p).removeprefix("./")) for p in found)


def local_names(files: list[PurePosixPath]) -> set[str]:
    """Top-level names that are the repository's own (root and src/ modules and packages, and
    every directory holding an `__init__.py`)."""
    names = set()
    for path in files:
        parts = path.parts
        for base in ((), ("src",)):
            if parts[: len(base)] == base and len(parts) > len(base):
                rest = parts[len(base):]
                names.add(rest[0].removesuffix(".py") if len(rest) == 1 else rest[0])
        if path.name == "__init__.py" and len(parts) > 1:
            names.add(parts[-2])
    return names


def _nested_names(files: list[PurePosixPath]) -> set[str]:
    """Module and package names defined below the root and src/ in a directory that is not itself
    a package: what a script puts on sys.path (a package's submodules are imported through it)."""
    packages = {path.parent for path in files if path.name == "__init__.py"}
    names = set()
    for path in files:
        parts = path.parts
        for depth in range(1, len(parts)):
            if parts[:depth] != ("src",) and PurePosixPath(*parts[:depth]) not in packages:
                names.add(parts[depth].removesuffix(".py") if depth == len(parts) - 1 else parts[depth])
    return names - {"__init__"}


@functools.lru_cache(maxsize=1)
def _probe_rules():
    """probes/c0_probe.py (a standalone stdlib script run inside sandboxes) owns the rule for
    runtime sys.path edits; load it from the file so the baseline and the probe never disagree."""
    import importlib.util

    from reb_ray.paths import bundled_dir

    spec = importlib.util.spec_from_file_location("reb_ray_c0_probe_rules", bundled_dir("probes") / "c0_probe.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def edits_sys_path(tree: ast.AST) -> bool:
    """True when the module edits the import path at run time: sys.path.insert/append/extend,
    `sys.path += / =`, site.addsitedir (the C0 probe's own `sys_path_edit_lines`, so the host and
    the sandbox apply one rule)."""
    return bool(_probe_rules().sys_path_edit_lines(tree))


def _root_names(files: list[PurePosixPath]) -> set[str]:
    """Module and package names at the root and in src/: what the execution root resolves."""
    return {rest[0].removesuffix(".py") if len(rest) == 1 else rest[0]
            for path in files for base in ((), ("src",))
            if path.parts[: len(base)] == base and len((rest := path.parts[len(base):])) > 0}


def _imports(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _sibling_names(files: list[PurePosixPath]) -> dict[PurePosixPath, set[str]]:
    """Per directory: the module and package names importable from a file in it."""
    siblings: dict[PurePosixPath, set[str]] = {}
    for path in files:
        siblings.setdefault(path.parent, set()).add(path.stem)
        for parent in list(path.parents)[:-1]:
            siblings.setdefault(parent.parent, set()).add(parent.name)
    return siblings


def scan(repo_dir: Path, *, include_stdlib: bool = False, include_local: bool = False) -> ImportScan:
    """Scan `repo_dir` by the rules in the module docstring; `include_stdlib` / `include_local`
    keep standard-library / the repository's own names (both: the paper's canonical totals)."""
    repo_dir = Path(repo_dir)
    files = python_files(repo_dir)
    local, siblings = local_names(files), _sibling_names(files)
    nested = _nested_names(files) - _root_names(files)
    result = ImportScan(files=len(files))
    runtime_candidates, path_edited = set(), False
    for path in files:
        try:
            tree = ast.parse((repo_dir / path).read_bytes(), filename=str(path))
        except (SyntaxError, ValueError):  # ValueError: null bytes in the source
            result.syntax_errors += 1
            continue
        except OSError:  # a tracked file missing from the checkout (e.g. a broken symlink)
            continue
        near = siblings.get(path.parent, set())
        imported = _imports(tree)
        result.modules |= {m for m in imported
                           if (include_stdlib or m not in STDLIB) and (include_local or (m not in local and m not in near))}
        runtime_candidates |= {m for m in imported if m in nested and m not in near and m not in STDLIB}
        path_edited = path_edited or edits_sys_path(tree)
    if path_edited:  # without any sys.path edit, a nested folder named like a package is just a folder
        result.runtime_path = runtime_candidates
    return result


def scan_imports(repo_dir: Path) -> set[str]:
    """Distinct third-party top-level modules imported by the repository's Python files."""
    return scan(repo_dir).modules


def baseline_for_commit(git_dir: Path, commit: str, *, include_stdlib: bool = True,
                        include_local: bool = True) -> dict:
    """Check `commit` of the repository at `git_dir` (bare or not) out into a temporary directory
    (a shared clone: `git_dir` is only read) and scan it (flags as in `scan`).

    Returns {"total": n, "modules": sorted names, "syntax_errors": k, "runtime_path": sorted
    names only a runtime sys.path edit resolves (counted in the total, as in the paper)}. Raises RuntimeError
    when git cannot clone or check the commit out, or a tracked Python file is missing from the
    checkout (e.g. an object absent from a partial mirror).
    """
    with tempfile.TemporaryDirectory(prefix="reb-ray-c0-") as tmp:
        work = Path(tmp) / "repo"
        for args, cwd in (
            (["clone", "--quiet", "--shared", "--no-checkout", str(Path(git_dir).resolve()), str(work)], Path(tmp)),
            (["-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", commit], work),
        ):
            res = _git(args, cwd)
            if res.returncode != 0:
                raise RuntimeError(f"git {args[0] if args[0] != '-c' else 'checkout'} failed: "
                                   f"{(res.stderr or res.stdout).strip()[:300]}")
        missing = [str(p) for p in python_files(work) if not (work / p).is_file() and not (work / p).is_symlink()]
        if missing:
            raise RuntimeError(f"{len(missing)} tracked Python file(s) missing from the checkout, e.g. {missing[0]}")
        found = scan(work, include_stdlib=include_stdlib, include_local=include_local)
    return {"total": len(found.modules), "modules": sorted(found.modules), "syntax_errors": found.syntax_errors,
            "runtime_path": sorted(found.runtime_path)}
