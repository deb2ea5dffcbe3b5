"""setuptools' editable-install finder as a start-up hook: accepted only when it is setuptools' own.

`pip install -e` of a project whose layout is not a plain `src/` or flat one (setuptools'
"lenient" editable mode) writes two files into site-packages: `__editable__.<name>-<version>.pth`,
whose one line `import M; M.install()` runs at every interpreter start, and the module `M.py`
(`__editable___<name>_<version>_finder`), setuptools' `_FINDER_TEMPLATE` formatted with the name,
MAPPING {top-level package: its directory} and NAMESPACES. The installed-code check treats
start-up code as verified only when a verified (published) distribution installed it; an
editable install is a local build and cannot be, so an honest agent's editable install would
fail every command stage as `startup_hook`. The hook is verified here instead, from what the
harness can check itself, when all of these hold (`judge_finder`; otherwise it stays unverified
and `why` names the first that failed):

(a) the `.pth` file's text is exactly setuptools' line, `import M; M.install()` (no newline, no
    second statement), with M setuptools' identifier for `__editable__.<name>-<version>.finder`,
    `<name>-<version>` the `.pth` file's own and naming the distribution below;
(b) `M.py` lies in the same site directory, nothing else there that Python could import as `M`
    first (a package `M/`, an `M.*.so`), and both files are listed in the RECORD of one
    editable distribution there (PEP 610 `direct_url.json`: `dir_info.editable` true) whose URL
    is the repository under test;
(c) `M.py`'s text is the `_FINDER_TEMPLATE` of the setuptools version that built the editable
    wheel (its WHEEL file's `Generator: setuptools (X.Y.Z)`), formatted with the name, MAPPING
    and NAMESPACES read from `M.py` itself (`ast.literal_eval`, never executed); the template is
    read by the harness from that setuptools version's published wheel (`templates`, see
    reb_ray.probing.installed), never from the sandbox;
(d) every MAPPING and NAMESPACES path is an absolute path inside the repository directory
    (whose tracked files are compared with the pinned commit elsewhere).

A setuptools wheel that cannot be read (no local copy and no index) leaves the hook unverified,
saying so: shown, never silently accepted, as for any other hook whose origin is unknown.
"""

from __future__ import annotations

import ast
import posixpath
import re
from typing import Any

#: setuptools' module holding the finder's template, inside its wheel.
TEMPLATE_MEMBER = "setuptools/command/editable_wheel.py"
_GENERATOR = re.compile(r"^setuptools \(([0-9A-Za-z.+!_-]+)\)$")


def canonical(name: str) -> str:
    """PEP 503's normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def safe_identifier(name: str) -> str:
    """setuptools' module name for `name` (`_normalization.safe_identifier`, 66's `_make_identifier`)."""
    return re.sub(r"\W|^(?=\d)", "_", name)


def setuptools_version(generator: str | None) -> str | None:
    """X.Y.Z of a WHEEL `Generator: setuptools (X.Y.Z)` value; None for any other generator."""
    found = _GENERATOR.match((generator or "").strip())
    return found.group(1) if found else None


def template_of(source: str) -> str | None:
    """The string `_FINDER_TEMPLATE` is assigned at module level in setuptools' editable_wheel.py
    `source` (read with `ast`, never executed); None when there is none."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "_FINDER_TEMPLATE" for t in targets) and node.value is not None:
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return None
            return value if isinstance(value, str) else None
    return None


def finder_values(text: str) -> tuple[str, dict, dict] | str:
    """(name, MAPPING, NAMESPACES) assigned at module level in a finder module's `text`, read
    with `ast.literal_eval` (`PATH_PLACEHOLDER = <name> + ".__path_hook__"` gives the name), or
    the reason they cannot be read."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as exc:
        return f"the finder is not valid Python ({type(exc).__name__})"
    found: dict[str, Any] = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        for target in targets:
            if isinstance(target, ast.Name) and target.id in ("MAPPING", "NAMESPACES", "PATH_PLACEHOLDER") \
                    and target.id not in found and node.value is not None:
                found[target.id] = node.value
    if set(found) != {"MAPPING", "NAMESPACES", "PATH_PLACEHOLDER"}:
        return "the finder does not assign MAPPING, NAMESPACES and PATH_PLACEHOLDER"
    holder = found["PATH_PLACEHOLDER"]
    if not (isinstance(holder, ast.BinOp) and isinstance(holder.op, ast.Add) and isinstance(holder.left, ast.Constant)
            and isinstance(holder.left.value, str)):
        return "the finder's PATH_PLACEHOLDER is not setuptools' form"
    try:
        mapping, namespaces = ast.literal_eval(found["MAPPING"]), ast.literal_eval(found["NAMESPACES"])
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return "the finder's MAPPING or NAMESPACES is not a literal"
    if not (isinstance(mapping, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in mapping.items())):
        return "the finder's MAPPING is not {package: path}"
    if not (isinstance(namespaces, dict) and all(isinstance(k, str) and isinstance(v, list)
                                                 and all(isinstance(p, str) for p in v) for k, v in namespaces.items())):
        return "the finder's NAMESPACES is not {package: [paths]}"
    return holder.left.value, mapping, namespaces


def _loose(version: object) -> str:
    """A version as setuptools writes it into file names (`1.0+local` as `1.0_local`)."""
    return re.sub(r"[-_+!]+", "_", str(version or "")).lower()


def _inside(path: str, repo: str) -> bool:
    return posixpath.isabs(path) and (posixpath.normpath(path) + "/").startswith(repo + "/")


def _file_url(url: str) -> str | None:
    return posixpath.normpath(url[len("file://"):]) if url.startswith("file:///") else None


def judge_finder(pth: dict, dists: list[dict], templates: dict[str, dict] | None,
                 repo_dir: str | None, loose: list[dict] | None = None) -> tuple[str, str | None, str] | None:
    """("verified" | "unverified", owner "name version", why) for the `.pth` entry `pth` of the
    installed-files probe (with its `text` and `finder`), the probe's distributions `dists` of
    the same site directory, the harness's `templates` ({setuptools version: {"template": text
    or None, "source", "why"}}) and the repository under test `repo_dir` (module docstring);
    None when no editable distribution's RECORD lists the `.pth` file (not an editable install's
    hook: judged as any other)."""
    rel = str(pth.get("name") or "")
    owner = next((d for d in dists if isinstance(d, dict) and rel in (d.get("record") or [])
                  and (d.get("direct_url") or {}).get("editable")), None)
    if owner is None or not rel.startswith("__editable__.") or not rel.endswith(".pth"):
        return None
    named = f"{owner.get('name')} {owner.get('version')}"

    def no(why: str) -> tuple[str, str, str]:
        return "unverified", named, f"editable install of {named}: {why}"

    # (a) setuptools' one line, importing the finder named after the distribution
    stem = rel[len("__editable__."):-len(".pth")]
    dist_name, _, version = stem.rpartition("-")
    if canonical(dist_name) != canonical(str(owner.get("name") or "")) or _loose(version) != _loose(owner.get("version")):
        return no(f"{rel} does not name the distribution")
    module = safe_identifier(f"__editable__.{stem}.finder")
    if pth.get("text") != f"import {module}; {module}.install()":
        return no(f"{rel} is not setuptools' single line `import {module}; {module}.install()`")
    # (b) the finder beside it, both listed by the editable distribution of the repository
    finder = pth.get("finder") if isinstance(pth.get("finder"), dict) else {}
    if finder.get("file") != f"{module}.py" or not isinstance(finder.get("text"), str):
        return no(f"{module}.py is not a file in {pth.get('dir')}")
    if f"{module}.py" not in (owner.get("record") or []):
        return no(f"{module}.py is not listed in {owner.get('info')}/RECORD")
    shadow = [e.get("entry") for e in loose or [] if isinstance(e, dict) and e.get("name") == module]
    if shadow:
        return no(f"{pth.get('dir')} also holds {', '.join(map(str, shadow[:2]))}, which Python may import instead")
    if finder.get("truncated"):
        return no(f"{module}.py is larger than setuptools' finder")
    repo = posixpath.normpath(repo_dir) if repo_dir else None
    url = str((owner.get("direct_url") or {}).get("url") or "")
    if repo is None or _file_url(url) != repo:
        return no(f"direct_url.json names {url or 'no URL'}, not the repository under test ({repo_dir})")
    # (c) setuptools' published template of the version that built the wheel, with the finder's values
    generator = owner.get("generator")
    setuptools = setuptools_version(generator)
    if setuptools is None:
        return no(f"its WHEEL names no setuptools version (Generator: {generator})")
    got = (templates or {}).get(setuptools) or {}
    if not isinstance(got.get("template"), str):
        return no(f"setuptools {setuptools}'s published template could not be read ({got.get('why') or 'not looked up'})")
    values = finder_values(finder["text"])
    if isinstance(values, str):
        return no(values)
    name, mapping, namespaces = values
    if name != f"__editable__.{stem}.finder":
        return no(f"the finder's name {name!r} is not __editable__.{stem}.finder")
    try:
        expected = got["template"].format(name=name, mapping=mapping, namespaces=namespaces)
    except (KeyError, IndexError, ValueError):
        return no(f"setuptools {setuptools}'s template does not format")
    if finder["text"] != expected:
        return no(f"{module}.py differs from setuptools {setuptools}'s template ({got.get('source')})")
    # (d) every path inside the repository
    outside = [p for p in list(mapping.values()) + [p for v in namespaces.values() for p in v] if not _inside(p, repo)]
    if outside:
        return no(f"its finder maps outside the repository {repo}: {', '.join(sorted(outside)[:3])}")
    return "verified", named, f"setuptools {setuptools}'s editable finder as published, its paths inside the repository"


def templates_wanted(listing: dict | None) -> list[str]:
    """The setuptools versions whose template the editable finders of `listing` (the probe's
    record) need: the `Generator` of every editable distribution that lists a finder `.pth`."""
    out = set()
    for pth in (listing or {}).get("pth") or []:
        if not isinstance(pth, dict) or not isinstance(pth.get("finder"), dict):
            continue
        for dist in (listing or {}).get("dists") or []:
            if isinstance(dist, dict) and dist.get("dir") == pth.get("dir") and pth.get("name") in (dist.get("record") or []):
                version = setuptools_version(dist.get("generator"))
                if version:
                    out.add(version)
    return sorted(out)


__all__ = ["TEMPLATE_MEMBER", "finder_values", "judge_finder", "safe_identifier", "setuptools_version", "template_of",
           "templates_wanted"]
