"""Start-up probe (stdlib only, Python 3.8+): what the reported interpreter is, and what runs when it starts.

Usage: python3 startup_probe.py --python PYTHON_PATH --out FILE [--timeout S]

Run by the image's /usr/bin/python3 before any other probe runs the reported interpreter, so a
hook that removes itself when it first runs is still seen. Writes one JSON object to FILE:

- `python_kind`: what PYTHON_PATH is on disk, looked at without running it: `elf` (a regular
  ELF executable), `symlink_to_elf` (a symlink chain ending at one, as every venv's bin/python
  is), `script` (a text file: a shebang script or a shell script), `other` (anything else: a
  directory, a non-ELF binary) or `missing` (nothing, or a dangling symlink); with the real
  path and a script's first line.
- `interpreter`: the interpreter's import path as it starts WITHOUT its site hooks (`-S`, so no
  `.pth` line and no sitecustomize runs here), its prefix and, for a venv, its pyvenv.cfg; the
  site directories are then processed statically as site.py would (`.pth` path lines added).
- `hooks`: start-up code that no installed distribution's manifest owns (probes/ownership.py):
  `sitecustomize` / `usercustomize` modules anywhere on that path and `.pth` files in the site
  directories with executable `import` lines; `owned_hooks` lists the owned ones.
- `unowned_site_packages`: top-level modules and packages in the site directories that no
  distribution owns (made by hand, or copied in), or whose file differs from its recorded hash.

Grading is separate and pure (reb_ray.grading.startup).
"""

import argparse
import json
import os
import subprocess
import sys
import time

PROBE_VERSION = 1
MAX_LISTED = 200  # entries of each list kept
LINE_CHARS = 200

# Run by PYTHON_PATH with -S (site.py's hooks do not run); Python 2 compatible. It repeats site.py's
# venv detection (pyvenv.cfg beside or above the executable) without adding any directory.
INTERPRETER_SCRIPT = r"""
import json, os, sys
exe = sys.executable
cfg, system_site = None, True
for d in (os.path.dirname(exe), os.path.dirname(os.path.dirname(exe))):
    if os.path.isfile(os.path.join(d, "pyvenv.cfg")):
        cfg = os.path.join(d, "pyvenv.cfg")
        break
base_prefix = getattr(sys, "base_prefix", sys.prefix)
if cfg:
    for line in open(cfg):
        key, _, value = line.partition("=")
        if key.strip().lower() == "include-system-site-packages":
            system_site = value.strip().lower() == "true"
    sys.prefix = sys.exec_prefix = os.path.dirname(cfg)
import site
prefixes = [sys.prefix] + ([base_prefix] if cfg and system_site else [])
try:
    site.PREFIXES[:] = prefixes
    sites = site.getsitepackages(prefixes)
except Exception:
    sites = []
user = None
if not cfg or system_site:
    try:
        user = site.getusersitepackages()
    except Exception:
        user = None
sys.stdout.write(json.dumps({"executable": exe, "version": list(sys.version_info)[:3], "prefix": sys.prefix,
                             "base_prefix": base_prefix, "sys_path": [p for p in sys.path if p], "site_dirs": sites,
                             "user_site": user, "venv_cfg": cfg}))
"""


def child_env():
    env = dict(os.environ)
    for key in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONUSERBASE"):
        env.pop(key, None)
    env.update({"PYTHONDONTWRITEBYTECODE": "1", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"})
    return env


def classify(python):
    """What `python` is on disk: {"kind", "realpath", "first_line"} (module docstring)."""
    out = {"kind": "missing", "realpath": None, "first_line": None, "is_symlink": os.path.islink(python)}
    if not os.path.exists(python):
        return out
    real = os.path.realpath(python)
    out["realpath"] = real
    if not os.path.isfile(real):
        out["kind"] = "other"
        return out
    try:
        with open(real, "rb") as f:
            head = f.read(4096)
    except OSError:
        out["kind"] = "other"
        return out
    if head.startswith(b"\x7fELF"):
        out["kind"] = "symlink_to_elf" if out["is_symlink"] else "elf"
    elif head.startswith(b"#!") or (head and b"\0" not in head):
        out["kind"] = "script"
        out["first_line"] = head.split(b"\n", 1)[0][:LINE_CHARS].decode("utf-8", "replace")
    else:
        out["kind"] = "other"
    return out


def interpreter(python, timeout):
    """(the -S query's answer or None, error or None)."""
    try:
        proc = subprocess.run([python, "-S", "-c", INTERPRETER_SCRIPT], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=child_env(),
                              timeout=timeout, cwd="/")
    except subprocess.TimeoutExpired:
        return None, "timed out after %gs" % timeout
    except OSError as exc:
        return None, "cannot start: %s" % exc
    if proc.returncode != 0:
        return None, "exit %s: %s" % (proc.returncode, proc.stderr.decode("utf-8", "replace")[-300:].strip())
    try:
        return json.loads(proc.stdout.decode("utf-8", "replace")), None
    except ValueError:
        return None, "unparseable output: %r" % proc.stdout[-200:]


def read_pth(path):
    """([path lines], [executable import lines]) of a .pth file, as site.addpackage reads it."""
    paths, execs = [], []
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            lines = f.read(1 << 20).splitlines()
    except OSError:
        return paths, execs
    for line in lines:
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith(("import ", "import\t")):
            execs.append(line[:LINE_CHARS])
        else:
            paths.append(line.rstrip())
    return paths, execs


def import_path(info):
    """(every directory the interpreter imports from once site.py ran, in order; its site
    directories; [(.pth file, exec lines)]), computed statically."""
    dirs = [os.path.realpath(p) for p in info.get("sys_path") or [] if p.startswith("/")]
    site_dirs, pth_execs = [], []
    candidates = list(info.get("site_dirs") or []) + ([info["user_site"]] if info.get("user_site") else [])
    for site_dir in candidates:
        if not site_dir or not os.path.isdir(site_dir):
            continue
        real = os.path.realpath(site_dir)
        if real in site_dirs:
            continue
        site_dirs.append(real)
        if real not in dirs:
            dirs.append(real)
        try:
            names = sorted(n for n in os.listdir(real) if n.endswith(".pth") and not n.startswith("."))
        except OSError:
            names = []
        for name in names:
            paths, execs = read_pth(os.path.join(real, name))
            if execs:
                pth_execs.append((os.path.join(real, name), execs))
            for line in paths:
                extra = os.path.realpath(os.path.join(real, line))
                if os.path.isdir(extra) and extra not in dirs:
                    dirs.append(extra)
    return dirs, site_dirs, pth_execs


def _customize_files(directory, stem):
    found = []
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return found
    for name in names:
        path = os.path.join(directory, name)
        if name in (stem + ".py", stem + ".pyc") or (name.startswith(stem + ".") and name.endswith(".so")):
            found.append(path)
        elif name == stem and os.path.isfile(os.path.join(path, "__init__.py")):
            found.append(os.path.join(path, "__init__.py"))
    return found


def representative(path):
    """The file whose owner stands for a site-packages entry (a package's __init__ or its first
    module), or None when it holds no Python code."""
    if os.path.isfile(path):
        return path if path.endswith((".py", ".pyc", ".so")) else None
    init = os.path.join(path, "__init__.py")
    if os.path.isfile(init):
        return init
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".py", ".so")):
                return os.path.join(dirpath, name)
    return None


_METADATA = (".dist-info", ".egg-info", ".data", ".egg", ".egg-link", ".pth", ".pyi", ".typed", ".txt", ".json")


def unowned_site_entries(site_dirs, manifests):
    found = []
    for site_dir in site_dirs:
        try:
            names = sorted(os.listdir(site_dir))
        except OSError:
            continue
        for name in names:
            if name.startswith((".", "__pycache__")) or name.endswith(_METADATA) or "-" in name.split(".")[0]:
                continue
            path = os.path.join(site_dir, name)
            rep = representative(path)
            if rep is None:
                continue
            got = manifests.owner(rep)
            if got["owner"] != "distribution":
                found.append({"site_dir": site_dir, "name": name.split(".")[0], "path": rep,
                              "owner": got["owner"] or "unowned", "distribution": got.get("name")})
                if len(found) >= MAX_LISTED:
                    return found
    return found


def probe(args):
    started = time.time()
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import ownership

    rec = {"probe_version": PROBE_VERSION, "python": args.python, "python_kind": classify(args.python),
           "interpreter": None, "interpreter_error": None, "site_dirs": [], "path_dirs": [], "hooks": [],
           "owned_hooks": [], "unowned_site_packages": [], "error": None}
    if rec["python_kind"]["kind"] == "missing":
        rec["interpreter_error"] = "%s does not exist" % args.python
        rec["duration_s"] = round(time.time() - started, 3)
        return rec
    info, rec["interpreter_error"] = interpreter(args.python, args.timeout)
    if info is None:
        rec["duration_s"] = round(time.time() - started, 3)
        return rec
    rec["interpreter"] = info
    dirs, site_dirs, pth_execs = import_path(info)
    rec["path_dirs"], rec["site_dirs"] = dirs, site_dirs
    prefixes = [os.path.realpath(p) for p in (info.get("prefix"), info.get("base_prefix")) if p]
    manifests = ownership.Manifests(dirs, prefixes)

    def note(kind, path, detail=None):
        got = manifests.owner(path)
        entry = {"kind": kind, "path": path, "owner": got["owner"] or "unowned", "distribution": got.get("name")}
        if detail:
            entry["lines"] = detail[:3]
        (rec["owned_hooks"] if got["owner"] == "distribution" else rec["hooks"]).append(entry)

    for directory in dirs:
        for stem in ("sitecustomize", "usercustomize"):
            for path in _customize_files(directory, stem):
                note(stem, path)
    for path, execs in pth_execs:
        note("pth", path, execs)
    rec["unowned_site_packages"] = unowned_site_entries(site_dirs, manifests)
    rec["manifest_errors"] = manifests.errors[:20]
    rec["duration_s"] = round(time.time() - started, 3)
    return rec


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds for the interpreter query")
    args = parser.parse_args(argv)
    try:
        rec = probe(args)
    except Exception as exc:  # still write a record: the grader says what is unknown
        rec = {"probe_version": PROBE_VERSION, "python": args.python, "error": "%s: %s" % (type(exc).__name__, exc)}
    out_dir = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(out_dir):
        os.makedirs(out_dir)
    with open(args.out + ".tmp", "w") as f:
        json.dump(rec, f)
    os.replace(args.out + ".tmp", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
