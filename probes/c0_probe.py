"""C0 probe (stdlib only, Python 3.8+): static imports of a repository via the toolbox's pyright.

Usage: python3 c0_probe.py --toolbox DIR --repo DIR --python PYTHON_PATH --out FILE [--timeout S]

Writes one JSON object to FILE (atomically) with the raw facts; grading is done elsewhere
(reb_ray/grading/c0.py). It never writes into the repository or the agent's environment: the
pyright config lives in a temporary directory outside the repository, bytecode writing is off.

- pyright runs against PYTHON_PATH with `reportMissingImports` = error and
  `reportMissingModuleSource` = warning, English messages forced, type checking off (import
  diagnostics only); the repository root is the execution root (plus `src/` like pyright's own
  default), agent-made environments inside the repository are excluded.
- A quick second `--verbose` run over an empty directory records pyright's search paths, so a
  grader can tell when they miss the interpreter's site-packages (C0 is then not measured,
  never a large count).
- An `ast` scan records imports guarded by try/except ImportError and runtime sys.path
  edits, the walk records the modules that live in the repository below its root (which
  only a sys.path edit makes importable), and a scan of the interpreter's site directories
  records import-hook editable installs (which Python imports and pyright cannot follow).
- `import_owners`: for every top-level module the repository imports, where it resolves for the
  reported interpreter (pyright's order: the repository's roots, the standard library, the
  interpreter's import path) and which installed distribution's manifest lists that file
  (probes/ownership.py); the grader counts the modules C0 calls resolved that no distribution
  owns (`c0_unowned`).
"""

import argparse
import ast
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

PROBE_VERSION = 2  # 2: import_owners
TAIL_CHARS = 4000
MAX_AST_BYTES = 4 * 1024 * 1024
GUARD_NAMES = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
SKIP_DIRS = {"node_modules", "__pycache__"}

# Run by PYTHON_PATH exactly as pyright runs it (plain `-c`, not isolated); Python 2 compatible.
INTERPRETER_SCRIPT = r"""
import json, os, site, sys
cands = []
try:
    cands.extend(site.getsitepackages())
except Exception:
    pass
try:
    if site.ENABLE_USER_SITE:
        cands.append(site.getusersitepackages())
except Exception:
    pass
for p in sys.path:
    if os.path.basename(p.rstrip("/")) in ("site-packages", "dist-packages"):
        cands.append(p)
out = {"executable": sys.executable, "version": list(sys.version_info)[:3], "prefix": sys.prefix,
       "base_prefix": getattr(sys, "base_prefix", sys.prefix), "sys_path": [p for p in sys.path if p], "site_candidates": cands}
sys.stdout.write(json.dumps(out))
"""


def tail(text, n=TAIL_CHARS):
    return text[-n:] if text else ""


def child_env():
    """Our environment minus what would make pyright or the interpreter see something else."""
    env = dict(os.environ)
    for key in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "NODE_OPTIONS", "VSCODE_NLS_CONFIG"):
        env.pop(key, None)
    env.update({"PYTHONDONTWRITEBYTECODE": "1", "VSCODE_NLS_CONFIG": json.dumps({"locale": "en"}),
                "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"})
    return env


def run(argv, timeout, env):
    """(exit_code or None, stdout, stderr, timed_out, error); kills the process group on timeout."""
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
    except OSError as exc:
        return None, "", "", False, "cannot start %s: %s" % (argv[0], exc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        out, err = proc.communicate()
        return None, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), True, "timed out after %gs" % timeout
    return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), False, None


def real(path):
    return os.path.realpath(path) if path.startswith("/") else path


def interpreter_info(python, env):
    code, out, err, _timed_out, error = run([python, "-c", INTERPRETER_SCRIPT], 120, env)
    if code != 0 or error:
        return None, error or "exit %s: %s" % (code, tail(err or out, 500).strip())
    try:
        info = json.loads(out)
    except ValueError:
        return None, "unparseable interpreter output: %r" % tail(out, 300)
    on_path = set(real(p) for p in info["sys_path"])
    site_dirs = []
    for cand in info.pop("site_candidates"):
        r = real(cand)
        if os.path.isdir(r) and r in on_path and r not in site_dirs:
            site_dirs.append(r)
    info["site_packages"] = site_dirs
    return info, None


def editable_hooks(site_dirs):
    """Names of .pth files that install an import hook for an editable install: setuptools'
    `__editable__.*.pth` finders, hatchling/editables, scikit-build-core, meson-python."""
    found = []
    for d in site_dirs:
        try:
            names = sorted(n for n in os.listdir(d) if n.endswith(".pth"))
        except OSError:
            continue
        for name in names:
            try:
                with open(os.path.join(d, name), "r", errors="replace") as f:
                    lines = f.read().splitlines()
            except OSError:
                continue
            if any(ln.startswith(("import ", "import\t")) and "editable" in ln.lower() for ln in lines):
                found.append(name)
    return found


def walk_repo(repo):
    """(excluded dirs relative to repo, source files relative to repo). Hidden dirs,
    node_modules, __pycache__ are skipped; a dir holding pyvenv.cfg, conda-meta or site-packages
    is an environment, excluded whole."""
    excluded, files = [], []
    for dirpath, dirnames, filenames in os.walk(repo):
        rel = os.path.relpath(dirpath, repo)
        if rel != "." and ("pyvenv.cfg" in filenames or "conda-meta" in dirnames or "site-packages" in dirnames):
            excluded.append(rel.replace(os.sep, "/"))
            dirnames[:] = []
            continue
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in SKIP_DIRS)
        for name in sorted(filenames):
            if name.endswith((".py", ".pyi")) and not name.startswith("."):
                files.append(os.path.normpath(os.path.join(rel, name)).replace(os.sep, "/"))
    return excluded, files


def _catches_import_error(node):
    if node is None:
        return True
    if isinstance(node, ast.Tuple):
        return any(_catches_import_error(e) for e in node.elts)
    if isinstance(node, ast.Name):
        return node.id in GUARD_NAMES
    if isinstance(node, ast.Attribute):
        return node.attr in GUARD_NAMES
    return False


def _is_suppress(item):
    call = item.context_expr
    if not isinstance(call, ast.Call):
        return False
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return name == "suppress" and any(_catches_import_error(a) for a in call.args)


def _imports_in(stmts, out):
    """Import statements executed as part of `stmts` (not inside function bodies)."""
    for stmt in stmts:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            out.append(stmt)
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            sub = getattr(stmt, field, None)
            if isinstance(sub, list):
                for child in sub:
                    # except handlers and match cases are not statements: descend into their bodies
                    _imports_in(child.body if hasattr(child, "body") and not isinstance(child, ast.stmt) else [child], out)


def guarded_lines(tree):
    """Line numbers (1-based) of import statements guarded by an ImportError handler or
    `contextlib.suppress(ImportError)`; every line a statement spans is listed."""
    lines = set()
    try_types = tuple(t for t in (getattr(ast, "Try", None), getattr(ast, "TryStar", None)) if t)
    for node in ast.walk(tree):
        guarded_body = None
        if isinstance(node, try_types) and any(_catches_import_error(h.type) for h in node.handlers):
            guarded_body = node.body
        elif isinstance(node, (ast.With, ast.AsyncWith)) and any(_is_suppress(i) for i in node.items):
            guarded_body = node.body
        if guarded_body is None:
            continue
        found = []
        _imports_in(guarded_body, found)
        for stmt in found:
            lines.update(range(stmt.lineno, (getattr(stmt, "end_lineno", None) or stmt.lineno) + 1))
    return lines


_PATH_CALLS = {("path", "insert"), ("path", "append"), ("path", "extend"), ("site", "addsitedir")}


def sys_path_edit_lines(tree):
    """Line numbers of runtime import-path edits: sys.path.insert/append/extend(...),
    `sys.path += ...` / `sys.path = ...`, site.addsitedir(...)."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", None)
            if (name, node.func.attr) in _PATH_CALLS:
                lines.add(node.lineno)
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Attribute) and t.attr == "path" and getattr(t.value, "id", None) == "sys"
                   for t in targets):
                lines.add(node.lineno)
    return lines


def nested_modules(files):
    """Top-level module name -> the first directory (relative to the repo) below the root and
    src/, not itself a package, that holds it as `name.py` or a package `name/`: what only a
    runtime sys.path edit makes importable (e.g. third_party/stylegan/dnnlib imported as `dnnlib`)."""
    packages = set(rel.rsplit("/", 1)[0] for rel in files if rel.endswith("/__init__.py"))
    found = {}
    for rel in files:
        parts = rel.split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            if parent == "src" or parent in packages:
                continue
            name = parts[depth] if depth < len(parts) - 1 else parts[depth].rsplit(".", 1)[0]
            if name != "__init__" and name.isidentifier():
                found.setdefault(name, parent)
    return found


def top_level_imports(tree):
    """Top-level module names of the absolute imports anywhere in `tree` (relative ones are the
    repository's own)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def scan_guarded(repo, files, imports=None):
    """(guarded imports [[file, line]], unparsed files, sys.path edits [[file, line]]). When
    `imports` is a dict, it is filled with top-level imported name -> set of the directories
    (relative to repo) of the files importing it."""
    guarded, unparsed, path_edits = [], [], []
    for rel in files:
        path = os.path.join(repo, rel)
        try:
            if os.path.getsize(path) > MAX_AST_BYTES:
                unparsed.append(rel)
                continue
            with open(path, "rb") as f:
                tree = ast.parse(f.read(), filename=rel)
        except (SyntaxError, ValueError, OSError, RecursionError, MemoryError):
            unparsed.append(rel)
            continue
        guarded.extend([rel, line] for line in sorted(guarded_lines(tree)))
        path_edits.extend([rel, line] for line in sorted(sys_path_edit_lines(tree)))
        if imports is not None:
            for name in top_level_imports(tree):
                imports.setdefault(name, set()).add(os.path.dirname(rel))
    return guarded, unparsed, path_edits


def import_owners(toolbox, repo, info, imports, extra_roots):
    """Who owns the file each imported top-level module resolves to, for the reported
    interpreter (probes/ownership.py): name -> {"owner", "path", "name"}. `info` is
    interpreter_info's answer (its import path and prefix), `extra_roots` the repository
    directories pyright resolves from besides the root (src/)."""
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import ownership

    path_dirs = [real(p) for p in info["sys_path"] if p.startswith("/") and os.path.isdir(p)]
    prefixes = [info.get("prefix"), info.get("base_prefix")]
    manifests = ownership.Manifests(path_dirs, [real(p) for p in prefixes if p])
    stdlib = ownership.stdlib_names(os.path.join(toolbox, "pyright", "dist", "typeshed-fallback", "stdlib", "VERSIONS"),
                                    info.get("version"))
    roots = [repo] + extra_roots
    out = {}
    for name in sorted(imports):
        if not name.isidentifier():
            continue
        local = []
        for rel in sorted(imports[name]):
            d = os.path.normpath(os.path.join(repo, rel))
            while under_dir(d, repo) and d not in local:
                local.append(d)
                d = os.path.dirname(d)
        out[name] = ownership.resolve_owner(name, repo, roots, stdlib, path_dirs, manifests, local)
    return out


def under_dir(path, root):
    return path == root or path.startswith(root.rstrip("/") + "/")


def parse_search_paths(text):
    """The `Search paths:` block of pyright's verbose output (first execution environment)."""
    paths, inside = [], False
    for line in text.splitlines():
        if line.strip() == "Search paths:":
            if paths:
                break
            inside = True
            continue
        if inside:
            if line.startswith("    ") and line.strip():
                paths.append(line.strip())
            else:
                inside = False
                if paths:
                    break
    return paths if paths else None


def heap_limit_mb():
    """Node heap: 3/4 of the memory we may use (cgroup limit or RAM), between 1 and 8 GiB."""
    limit = None
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                value = f.read().strip()
            if value.isdigit() and int(value) < 1 << 60:
                limit = int(value)
                break
        except OSError:
            continue
    try:
        with open("/proc/meminfo") as f:
            total = int(f.readline().split()[1]) * 1024
        limit = min(limit, total) if limit else total
    except (OSError, ValueError, IndexError):
        pass
    mb = (limit or 8 << 30) * 3 // 4 // (1 << 20)
    return max(1024, min(8192, mb))


def pyright_config(confdir, repo, excluded):
    rel = os.path.relpath(repo, confdir).replace(os.sep, "/")
    env = {"root": rel}
    src = os.path.join(repo, "src")
    if os.path.isdir(src) and not os.path.isfile(os.path.join(src, "__init__.py")):
        env["extraPaths"] = [rel + "/src"]  # pyright's default for a project rooted at the repo
    return {
        "include": [rel],
        "exclude": [rel + "/**/node_modules", rel + "/**/__pycache__", rel + "/**/.*"]
        + [rel + "/" + d for d in excluded],
        "executionEnvironments": [env],
        "stubPath": rel + "/typings",
        "typeCheckingMode": "off",
        "reportMissingImports": "error",
        "reportMissingModuleSource": "warning",
    }


def pick_tempdir(repo, out):
    for cand in (tempfile.gettempdir(), os.path.dirname(os.path.abspath(out)), "/tmp"):
        c = os.path.realpath(cand)
        if os.path.isdir(c) and not (c + "/").startswith(repo.rstrip("/") + "/"):
            try:
                return tempfile.mkdtemp(prefix="reb-ray-c0-", dir=c)
            except OSError:
                continue
    raise RuntimeError("no writable temporary directory outside the repository")


def pyright_version(toolbox):
    for path in ("MANIFEST.json", "pyright/package.json"):
        try:
            with open(os.path.join(toolbox, path)) as f:
                data = json.load(f)
            return data.get("pyright_version") or data["version"]
        except (OSError, ValueError, KeyError):
            continue
    return None


def probe(args):
    started = time.time()
    toolbox, repo, python = os.path.abspath(args.toolbox), os.path.realpath(args.repo), args.python
    env = child_env()
    rec = {"probe_version": PROBE_VERSION, "pyright_version": pyright_version(toolbox), "repo": repo,
           "python": python, "pyright_exit_code": None, "pyright": None, "pyright_stderr_tail": "",
           "pyright_timed_out": False, "pyright_error": None, "search_paths": None, "search_paths_real": None,
           "interpreter": None, "interpreter_site_packages": [], "python_ok": False, "python_error": None,
           "guarded_imports": [], "unparsed_files": [], "editable_hook_installs": [], "excluded_dirs": [],
           "sys_path_edits": [], "nested_modules": {},
           "config": None, "error": None}
    if not os.path.isdir(repo):
        rec["error"] = "repository directory %s does not exist" % repo
        return rec
    info, rec["python_error"] = interpreter_info(python, env)
    if info is not None:
        rec.update(python_ok=True, interpreter=info, interpreter_site_packages=info["site_packages"],
                   editable_hook_installs=editable_hooks(info["site_packages"]))
    excluded, files = walk_repo(repo)
    rec["excluded_dirs"], rec["files_scanned"] = excluded, len(files)
    imports = {}
    rec["guarded_imports"], rec["unparsed_files"], rec["sys_path_edits"] = scan_guarded(repo, files, imports)
    rec["nested_modules"] = nested_modules(files)
    if info is not None:  # who owns what each import resolves to (the grader counts the unowned)
        t = time.time()
        try:
            src = os.path.join(repo, "src")
            extra = [src] if os.path.isdir(src) and not os.path.isfile(os.path.join(src, "__init__.py")) else []
            rec["import_owners"] = import_owners(toolbox, repo, info, imports, extra)
        except Exception as exc:  # the ownership check must never cost the C0 record
            rec["import_owners_error"] = "%s: %s" % (type(exc).__name__, exc)
        rec["import_owners_duration_s"] = round(time.time() - t, 3)

    node = [os.path.join(toolbox, "node"), "--max-old-space-size=%d" % heap_limit_mb(),
            os.path.join(toolbox, "pyright", "index.js")]
    tmp = pick_tempdir(repo, args.out)
    try:
        # 1. Search paths only: verbose run over an empty directory (a fraction of a second).
        os.mkdir(os.path.join(tmp, "empty"))
        with open(os.path.join(tmp, "searchpaths.json"), "w") as f:
            json.dump({"include": ["empty"]}, f)
        code, out, err, _t, error = run(node + ["--verbose", "--pythonpath", python, "-p",
                                                os.path.join(tmp, "searchpaths.json")], 120, env)
        rec["verbose_head"] = (out or "")[:TAIL_CHARS]
        rec["search_paths"] = parse_search_paths(out)
        if rec["search_paths"] is not None:
            rec["search_paths_real"] = [real(p) for p in rec["search_paths"]]
        # 2. The analysis.
        config = pyright_config(tmp, repo, excluded)
        rec["config"] = config
        config_path = os.path.join(tmp, "pyrightconfig.json")
        with open(config_path, "w") as f:
            json.dump(config, f, indent=1)
        t = time.time()
        code, out, err, timed_out, error = run(node + ["--outputjson", "--pythonpath", python, "-p", config_path],
                                               args.timeout, env)
        rec.update(pyright_exit_code=code, pyright_timed_out=timed_out, pyright_error=error,
                   pyright_stderr_tail=tail(err), pyright_duration_s=round(time.time() - t, 3))
        try:
            parsed = json.loads(out) if out.strip() else None
            rec["pyright"] = parsed if isinstance(parsed, dict) else None
        except ValueError:
            rec["pyright_stdout_tail"] = tail(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rec["duration_s"] = round(time.time() - started, 3)
    return rec


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toolbox", required=True)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--python", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--timeout", type=float, default=540.0, help="seconds for the pyright analysis")
    args = parser.parse_args(argv)
    try:
        rec = probe(args)
    except Exception as exc:  # still write a record: the grader says not_run with this reason
        rec = {"probe_version": PROBE_VERSION, "pyright": None, "python_ok": False,
               "error": "%s: %s" % (type(exc).__name__, exc)}
    out_dir = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(out_dir):
        os.makedirs(out_dir)
    tmp_out = args.out + ".tmp"
    with open(tmp_out, "w") as f:
        json.dump(rec, f)
    os.replace(tmp_out, args.out)
    missing = None
    if isinstance(rec.get("pyright"), dict):
        missing = sum(1 for d in rec["pyright"].get("generalDiagnostics", []) if d.get("rule") == "reportMissingImports")
    sys.stdout.write("c0 probe: pyright exit %s, %s missing-import diagnostics, %.1fs\n"
                     % (rec.get("pyright_exit_code"), missing, rec.get("duration_s") or 0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
