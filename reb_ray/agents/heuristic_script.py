"""The `heuristic` agent's in-sandbox program: an offline, deterministic, rule-based baseline.

Copied into the sandbox with its sibling heuristic_imports.py (the import scan) and run with
the image's own python3 (3.8+, stdlib only):

    python3 heuristic_script.py --repo /work/repo --report /opt/scimlopsbench/report.json \
        --venv /opt/envs/heuristic

Steps: create a venv; collect requirements (requirements files, environment.yml pip entries,
the project itself editable with all extras); install them (all at once, else line by line);
install distributions for imports that still do not resolve; write an honest report.json
whose facts were all measured. pip configuration (find-links, cache, cert) comes from the
environment (PIP_FIND_LINKS, PIP_CACHE_DIR, PIP_CERT, ...); no index URL is ever passed.
"""

from __future__ import annotations

import argparse
import configparser
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

from heuristic_imports import MODULE_TO_DIST, scan_imports  # its sibling file, on sys.path[0]

try:
    import tomllib  # Python 3.11+
except ImportError:  # pragma: no cover - exercised by monkeypatching in tests
    tomllib = None

#: Every install is `--no-compile`: pip's byte-compiling of what it installed is most of the
#: install's CPU (torch with sympy: 45 s compiled, 13 s not, on one core), and Python writes the
#: bytecode of what a run imports on first import anyway. The venv is then about 130 MB smaller.
PIP = ["-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--no-compile"]
PIP_TIMEOUT_S = 1800
#: Where the trial mounts the node's read-only package cache (reb_ray.sandbox.package_cache.CACHE_MOUNT;
#: a test keeps the two equal).
PACKAGE_CACHE = "/opt/reb-ray/pip-cache"
_REQ = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*\(?([^;()]*)\)?\s*(;.*)?$")
_STR = re.compile(r'"((?:[^"\\]|\\.)*)"|\'([^\']*)\'')


def log(msg: str) -> None:
    """Print one progress line with the agent's prefix."""
    print("[heuristic] " + msg, flush=True)


def run(argv: list, timeout: float = PIP_TIMEOUT_S, cwd: str | None = None, capture: bool = False):
    """Run `argv`; return (exit code, stdout text). Never raises; 127/124 on spawn error/timeout."""
    shown = ["<code>" if i == 2 and argv[1] == "-c" else str(a) for i, a in enumerate(argv)]
    log("$ " + " ".join(shown))
    try:
        proc = subprocess.run([str(a) for a in argv], cwd=cwd, timeout=timeout, universal_newlines=True,
                              stdout=subprocess.PIPE if capture else None, stdin=subprocess.DEVNULL)
        code, out = proc.returncode, proc.stdout or ""
    except subprocess.TimeoutExpired:
        code, out = 124, ""
    except OSError as exc:
        log("cannot run: %s" % exc)
        code, out = 127, ""
    log("exit %d" % code)  # the pair "$ ..." / "exit N" is the agent's command list (reb_ray.environment.capture)
    return code, out


# ---------------------------------------------------------------- the venv

#: The distribution's copies of the wheels `ensurepip` would install (Debian: python3-pip-whl).
SYSTEM_WHEELS = Path("/usr/share/python-wheels")


def create_venv(venv: Path, python: str, wheels: Path = SYSTEM_WHEELS) -> bool:
    """Create the venv with pip and setuptools in it; True when its interpreter exists.

    `python3 -m venv` runs ensurepip, which installs pip and setuptools and byte-compiles them:
    about 5 s of CPU in the sandbox image, over half of a small trial's agent phase. The same two
    wheels installed by the image's own pip without compiling (`--no-compile`, bytecode is
    written on first import instead) take about 2 s and give the same pip in the venv. That
    path needs the image's pip (22.3+, for `--python`) and the wheels ensurepip would use; where
    either is missing, or it fails, the venv is made again the plain way.
    """
    have = [p.name for p in wheels.glob("*.whl")] if wheels.is_dir() else []
    if any(n.startswith("pip-") for n in have) and pip_can_target_python():
        wanted = ["pip"] + (["setuptools"] if any(n.startswith("setuptools-") for n in have) else [])
        if (run([sys.executable, "-m", "venv", "--without-pip", str(venv)])[0] == 0
                and run([sys.executable, "-m", "pip", "--python", python, *PIP[2:], "--no-index", "--find-links",
                         str(wheels)] + wanted)[0] == 0):
            return True
        log("venv without ensurepip failed; making it with ensurepip")
    return run([sys.executable, "-m", "venv", "--clear", str(venv)])[0] == 0 and Path(python).exists()


def pip_can_target_python() -> bool:
    """Whether this interpreter's pip exists and has `--python` (pip 22.3 or later). Read from
    its installed metadata, not by running it: a command run here would be listed among the
    agent's commands."""
    try:
        from importlib.metadata import PackageNotFoundError, version
        parts = re.findall(r"\d+", version("pip"))[:2]
    except (ImportError, PackageNotFoundError):
        return False
    return len(parts) == 2 and (int(parts[0]), int(parts[1])) >= (22, 3)


# ---------------------------------------------------------------- requirement collection

def parse_requirements(path: Path, seen: set | None = None) -> list:
    """Requirement lines of `path`, following `-r` includes; drops options, URLs and VCS lines.

    Local paths (`-e ./pkg`, `./pkg`, `lib/x.whl`) are kept, made absolute.
    """
    seen = set() if seen is None else seen
    path = path.resolve()
    if path in seen or not path.is_file():
        return []
    seen.add(path)
    text = path.read_text(encoding="utf-8", errors="replace").replace("\\\n", " ")
    out = []
    for raw in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        line = re.sub(r"\s--hash[=\s]\S+", "", line).strip()
        if not line:
            continue
        inc = re.match(r"^(-r|--requirement)[=\s]*(\S+)$", line)
        if inc:
            out += parse_requirements(path.parent / inc.group(2), seen)
            continue
        editable = re.match(r"^(-e|--editable)[=\s]*(\S+)$", line)
        target = editable.group(2) if editable else line
        if "://" in target or target.startswith("git+"):
            log("skip URL/VCS requirement: %s" % line)
            continue
        if target.startswith("-"):
            continue  # -c, -i, -f, --pre, ...: options pip config or the harness owns
        if target.startswith((".", "/")) or "/" in target or target.endswith((".whl", ".tar.gz", ".zip")):
            target = str((path.parent / target.split("[")[0]).resolve()) + (
                "[" + target.split("[", 1)[1] if "[" in target else "")
        out.append(("-e " + target) if editable else target)
    return out


def parse_environment_yml(path: Path) -> list:
    """The `- pip:` entries of a conda environment file (parsed by hand, no yaml library)."""
    lines, out, pip_indent = path.read_text(encoding="utf-8", errors="replace").splitlines(), [], None
    for raw in lines:
        if not raw.strip() or raw.strip().startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip())
        item = raw.strip()
        if pip_indent is None:
            if re.match(r"^-\s*pip\s*:\s*$", item):
                pip_indent = indent
            continue
        if indent <= pip_indent:
            pip_indent = None if not re.match(r"^-\s*pip\s*:\s*$", item) else indent
            continue
        if item.startswith("-"):
            entry = re.sub(r"\s+#.*$", "", item[1:].strip()).strip().strip("'\"")
            inc = re.match(r"^(-r|--requirement)[=\s]*(\S+)$", entry)
            if inc:
                out += parse_requirements(path.parent / inc.group(2))
            elif entry and "://" not in entry and not entry.startswith("-"):
                out.append(entry)
    return out


def _toml_strings(text: str) -> list:
    """All string literals in a TOML array text."""
    return [a if a or not b else b for a, b in _STR.findall(text)]


def _strip_comment(line: str) -> str:
    """`line` without its TOML comment (a `#` outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote and (quote == "'" or line[i - 1] != "\\"):
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            return line[:i]
    return line


def parse_pyproject_fallback(text: str) -> dict:
    """Tiny TOML subset for Pythons without tomllib: table names, and string arrays per table
    (enough for `[project] dependencies` and `[project.optional-dependencies]`)."""
    data, table, key, buf = {}, None, None, ""
    for raw in text.splitlines():
        line = _strip_comment(raw).strip()
        if key is None:
            header = re.match(r"^\[([^\[\]]+)\]$", line)
            if header or line.startswith("[["):
                table = re.sub(r"[\"'\s]", "", header.group(1)) if header else None
                data.setdefault(table, {})
                continue
            assign = re.match(r"^([A-Za-z0-9_.\"'-]+)\s*=\s*(\[.*)$", line)
            if not assign or table is None:
                continue
            key, buf, line = assign.group(1).strip("\"'"), "", assign.group(2)
        buf += " " + line
        bare = _STR.sub("", buf)
        if bare.count("[") <= bare.count("]"):
            data[table][key] = _toml_strings(buf)
            key = None
    data.pop(None, None)
    extras = data.pop("project.optional-dependencies", None)
    if extras is not None:
        data.setdefault("project", {})["optional-dependencies"] = extras
    return data


def read_pyproject(path: Path) -> dict:
    """pyproject.toml as a dict: tomllib when available, else the fallback subset parser."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if tomllib is not None:
        try:
            return tomllib.loads(text)
        except Exception as exc:  # malformed TOML: fall back to the subset parser
            log("tomllib failed on %s: %s" % (path, exc))
    return parse_pyproject_fallback(text)


def project_target(repo: Path) -> tuple:
    """(`-e` line or None, declared dependency lines) for installing the repo itself."""
    pyproject, setup_cfg = repo / "pyproject.toml", repo / "setup.cfg"
    installable, extras, deps = (repo / "setup.py").is_file() or setup_cfg.is_file(), [], []
    if pyproject.is_file():
        data = read_pyproject(pyproject)
        installable = installable or "build-system" in data or "project" in data
        project = data.get("project", {})
        deps += list(project.get("dependencies", []))
        for name, reqs in sorted(project.get("optional-dependencies", {}).items()):
            extras.append(name)
            deps += list(reqs)
    if setup_cfg.is_file():
        cfg = configparser.ConfigParser()
        try:
            cfg.read(str(setup_cfg), encoding="utf-8")
        except configparser.Error as exc:
            log("cannot parse setup.cfg: %s" % exc)
        if cfg.has_section("options.extras_require"):
            for name, value in sorted(cfg.items("options.extras_require")):
                extras.append(name)
                deps += [v.strip() for v in value.splitlines() if v.strip()]
        if cfg.has_option("options", "install_requires"):
            deps += [v.strip() for v in cfg.get("options", "install_requires").splitlines() if v.strip()]
    if not installable:
        return None, []
    extras = sorted(set(extras))
    return "-e " + str(repo.resolve()) + ("[" + ",".join(extras) + "]" if extras else ""), deps


def collect_requirements(repo: Path) -> tuple:
    """(requirement lines from requirements files and environment.yml, then the project itself;
    the project's declared dependency lines, for pinning constraints)."""
    files = sorted(repo.glob("requirements*.txt")) + sorted((repo / "requirements").glob("*.txt"))
    lines, seen = [], set()
    for path in files:
        lines += parse_requirements(path, seen)
    for name in ("environment.yml", "environment.yaml"):
        if (repo / name).is_file():
            lines += parse_environment_yml(repo / name)
    editable, deps = project_target(repo)
    if editable:
        lines.append(editable)
    return list(dict.fromkeys(lines)), deps


# ---------------------------------------------------------------- find-links wheel pinning

def canonical(name: str) -> str:
    """PEP 503 normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def release(version: str) -> list:
    """The release numbers of `version` as written ("2.10.0+cpu" -> [2, 10, 0])."""
    m = re.match(r"^v?(\d+(?:\.\d+)*)", version.lower())
    return [int(n) for n in m.group(1).split(".")] if m else [0]


def version_key(version: str) -> tuple:
    """Comparable key: release numbers without trailing zeros, then 0 for pre-releases, 1 for finals."""
    nums, public = release(version), version.split("+")[0].lower()
    while len(nums) > 1 and nums[-1] == 0:
        nums.pop()
    pre = re.search(r"(a|b|c|rc|alpha|beta|pre|preview|dev)\.?\d*$", public.split(".post")[0])
    return tuple(nums), 0 if pre else 1


def starts_with(version: str, prefix: list) -> bool:
    """Whether `version`'s release, zero-padded, begins with `prefix`."""
    return (release(version) + [0] * len(prefix))[:len(prefix)] == prefix


def satisfies(version: str, spec: str) -> bool:
    """Whether `version` meets a comma-separated specifier (==, !=, >=, <=, <, >, ~=, ===, X.*)."""
    for clause in [c.strip() for c in spec.split(",") if c.strip()]:
        m = re.match(r"^(===|==|!=|~=|>=|<=|<|>)\s*(\S+)$", clause)
        if not m:
            return False
        op, want = m.groups()
        have, goal = version_key(version), version_key(want.rstrip(".*"))
        if want.endswith(".*"):
            ok = starts_with(version, release(want[:-2])) == (op == "==")
        elif op == "===" or (op == "==" and "+" in want):
            ok = version == want
        else:
            ok = {"==": have == goal, "!=": have != goal, ">=": have >= goal, "<=": have <= goal,
                  "<": have < goal, ">": have > goal,
                  "~=": have >= goal and starts_with(version, release(want)[:-1])}[op]
        if not ok:
            return False
    return True


def wheel_compatible(filename: str, py: tuple, machine: str) -> bool:
    """Whether a wheel's python/abi/platform tags fit CPython `py` (major, minor) on `machine`."""
    parts = filename[:-4].split("-")
    if len(parts) < 5:
        return False
    pytags, abi, plats = parts[-3].split("."), parts[-2], parts[-1].split(".")
    mine = {"cp%d%d" % py, "py%d" % py[0], "py%d%d" % py}
    abi3 = abi == "abi3" and any(re.match(r"^cp3(\d+)$", t) and int(t[3:]) <= py[1] for t in pytags)
    py_ok = bool(mine & set(pytags)) or abi3
    plat_ok = any(p == "any" or (p.startswith(("manylinux", "linux")) and p.endswith(machine)) for p in plats)
    return py_ok and plat_ok


def find_links_wheels(py: tuple, machine: str = "") -> dict:
    """canonical name -> [(version, filename)] of compatible wheels in PIP_FIND_LINKS dirs.

    The node's package cache (PACKAGE_CACHE) is left out: it holds whatever earlier trials
    installed (Debian's setuptools of a noop trial, say), a cache and not a choice of versions;
    pinning to it broke torch's `setuptools>=77`. Only the wheelhouses choose versions."""
    machine, found = machine or platform.machine(), {}
    for entry in os.environ.get("PIP_FIND_LINKS", "").split():
        folder = Path(entry[len("file://"):] if entry.startswith("file://") else entry)
        if "://" in entry and not entry.startswith("file://") or not folder.is_dir() or str(folder) == PACKAGE_CACHE:
            continue
        for wheel in sorted(folder.glob("*.whl")):
            parts = wheel.name.split("-")
            if len(parts) >= 5 and wheel_compatible(wheel.name, py, machine):
                found.setdefault(canonical(parts[0]), []).append((parts[1], wheel.name))
    return found


def pin_to_wheel(line: str, wheels: dict) -> str | None:
    """`line` pinned to the newest find-links wheel version its specifier accepts, else None."""
    m = _REQ.match(line.strip())
    if not m or line.startswith("-"):
        return None
    name, extras, spec, marker = m.group(1), m.group(2) or "", m.group(3).strip(), m.group(4) or ""
    fits = [(version_key(v), v) for v, _ in wheels.get(canonical(name), []) if satisfies(v, spec)]
    if not fits:
        return None
    return "%s%s==%s%s" % (name, extras, max(fits)[1], (" " + marker) if marker else "")


def pin_lines(lines: list, wheels: dict) -> list:
    """`lines` with each requirement a find-links wheel satisfies pinned to that wheel."""
    out = []
    for line in lines:
        pin = pin_to_wheel(line, wheels)
        if pin:
            log("pin %s -> %s (find-links wheel)" % (line, pin))
        out.append(pin or line)
    return list(dict.fromkeys(out))


def wheel_constraints(wheels: dict, requested: list) -> list:
    """`name==version` constraints, one per find-links project: the newest compatible wheel that
    every requested spec of that project accepts. They keep transitive requirements (a project's
    `torch>=2`, timm's torch) on the local wheel instead of a multi-GB download from the index."""
    specs = {}
    for line in requested:
        m = _REQ.match(line.strip())
        if m and not line.startswith("-"):
            specs.setdefault(canonical(m.group(1)), []).append(m.group(3).strip())
    out = []
    for name in sorted(wheels):
        fits = [(version_key(v), v) for v, _ in wheels[name] if all(satisfies(v, s) for s in specs.get(name, []))]
        if fits:
            out.append("%s==%s" % (name, max(fits)[1]))
    return out


def write_constraints(venv: Path, constraints: list) -> str | None:
    """Write pip constraints beside the venv (never in it: a file in the environment's prefix
    that no package owns is one an export cannot rebuild); returns the path, or None when there
    are none."""
    if not constraints:
        return None
    path = venv.parent / (venv.name + ".heuristic-constraints.txt")
    path.write_text("\n".join(constraints) + "\n", encoding="utf-8")
    log("constraints (find-links wheels): %s" % ", ".join(constraints))
    return str(path)


# ---------------------------------------------------------------- unresolved imports (scan: heuristic_imports.py)

def missing_modules(python: str, names: list) -> list:
    """The subset of `names` the interpreter cannot find (one subprocess, importlib find_spec)."""
    if not names:
        return []
    code = ("import importlib.util,json,sys\nmiss=[]\nfor n in json.loads(sys.argv[1]):\n"
            " try:\n  ok=importlib.util.find_spec(n) is not None\n except Exception:\n  ok=False\n"
            " ok or miss.append(n)\nprint(json.dumps(miss))")
    rc, out = run([python, "-c", code, json.dumps(names)], timeout=300, cwd="/", capture=True)
    try:
        return json.loads(out.strip().splitlines()[-1]) if rc == 0 else list(names)
    except (ValueError, IndexError):
        return list(names)


# ---------------------------------------------------------------- install and report

def pip_install(python: str, lines: list, constraints: str | None = None) -> bool:
    """One `pip install` of `lines` (each line one requirement, `-e X` split in two)."""
    args = ["-c", constraints] if constraints else []
    for line in lines:
        args += ["-e", line[3:]] if line.startswith("-e ") else [line]
    return run([python] + PIP + args)[0] == 0


def install_all(python: str, lines: list, constraints: str | None = None) -> tuple:
    """Install together; on failure retry line by line. Returns (installed, failed) lines."""
    if not lines or pip_install(python, lines, constraints):
        return list(lines), []
    log("joint install failed; retrying %d lines one by one" % len(lines))
    ok, bad = [], []
    for line in lines:
        (ok if pip_install(python, [line], constraints) else bad).append(line)
    return ok, bad


def measure(python: str) -> dict:
    """Facts measured by running `python`: its version, then torch's version, CUDA and GPU count.

    The child prints its findings after each step, so a crash inside `import torch` still
    leaves the python version measured; anything not reached stays null.
    """
    code = ("import json,platform\nr={'python_version':platform.python_version()}\nprint(json.dumps(r),flush=True)\n"
            "try:\n import torch\nexcept ImportError:\n raise SystemExit(0)\n"
            "r['torch_version']=str(torch.__version__)\nprint(json.dumps(r),flush=True)\n"
            "r['cuda_available']=bool(torch.cuda.is_available())\nr['gpu_count']=int(torch.cuda.device_count())\n"
            "print(json.dumps(r),flush=True)")
    facts = {"python_version": None, "torch_version": None, "cuda_available": None, "gpu_count": None}
    for line in run([python, "-c", code], timeout=600, cwd="/", capture=True)[1].splitlines():
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict) and "python_version" in found:
            facts.update(found)
    if facts["torch_version"] is not None and facts["gpu_count"] is None:
        log("torch imported but its CUDA queries failed; reporting them as null")
    return facts


def write_report(path: Path, python: str, env_tool: str, env_name, notes: str) -> bool:
    """Write report.json (parents created) from measured facts; True when written."""
    report: dict = {"python_path": python}
    report.update(measure(python))
    report.update({"ddp_expected_ok": None, "env_tool": env_tool, "env_name": env_name, "notes": notes})
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        log("cannot write report %s: %s" % (path, exc))
        return False
    log("report written to %s: %s" % (path, json.dumps(report)))
    return True


def short(items: list, limit: int = 12) -> str:
    """A bounded, comma-separated rendering of `items`."""
    return ", ".join(items[:limit]) + (" (+%d more)" % (len(items) - limit) if len(items) > limit else "") or "none"


def resolve_imports(python: str, repo: Path, venv: Path, wheels: dict, constraints: str | None) -> dict:
    """Step 4: install a distribution for each import the venv cannot find; returns outcomes."""
    imports = scan_imports(repo, skip={str(venv)})
    missing = missing_modules(python, imports)
    log("imports: %s; missing: %s" % (short(imports, 40), short(missing, 40)))
    dists, done = [], {"installed": [], "failed": [], "skipped": []}
    for mod in missing:
        dist = MODULE_TO_DIST.get(mod, mod)
        if dist is None:
            done["skipped"].append(mod)
        elif dist not in dists:
            dists.append(dist)
    for dist in dists:
        line = pin_to_wheel(dist, wheels) or dist
        done["installed" if pip_install(python, [line], constraints) else "failed"].append(line)
    done["unresolved"] = missing_modules(python, missing) if missing else []
    return done


def main(argv: list | None = None) -> int:
    """Run the five steps; exit 0 when a report was written."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--repo", default="/work/repo")
    ap.add_argument("--report", default="/opt/scimlopsbench/report.json")
    ap.add_argument("--venv", default="/opt/envs/heuristic")
    args = ap.parse_args(argv)
    repo, report, venv = Path(args.repo).resolve(), Path(args.report), Path(args.venv).absolute()
    python = str(venv / "bin" / "python")

    log("step 1: create venv %s" % venv)
    if not create_venv(venv, python):
        log("venv creation failed; reporting the base interpreter")
        note = "venv creation at %s failed; nothing installed; python_path is the image's python." % venv
        return 0 if write_report(report, sys.executable, "none", None, note) else 1
    write_report(report, python, "venv", str(venv), "provisional: the heuristic agent did not finish.")

    log("step 2: collect requirements in %s" % repo)
    version = measure(python)["python_version"] or "%d.%d" % sys.version_info[:2]
    wheels = find_links_wheels(tuple(int(x) for x in version.split(".")[:2]))
    lines, project_deps = collect_requirements(repo)
    pins = wheel_constraints(wheels, lines + project_deps)
    constraints = write_constraints(venv, pins)
    lines = pin_lines(lines, wheels)
    log("requirements (%d): %s" % (len(lines), "; ".join(lines) or "none"))

    log("step 3: install requirements")
    installed, failed = install_all(python, lines, constraints)

    log("step 4: resolve remaining imports")
    done = resolve_imports(python, repo, venv, wheels, constraints)

    log("step 5: write report")
    notes = ("heuristic venv %s. pip constraints from find-links wheels: %s. requirements installed (%d): %s; "
             "failed: %s. for imports installed: %s; failed: %s; not on PyPI, skipped: %s. "
             "modules still unresolved: %s. ddp not checked." % (
                 venv, short(pins), len(installed), short(installed), short(failed), short(done["installed"]),
                 short(done["failed"]), short(done["skipped"]), short(done["unresolved"])))
    return 0 if write_report(report, python, "venv", str(venv), notes) else 1


if __name__ == "__main__":
    sys.exit(main())
