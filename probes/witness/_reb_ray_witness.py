"""Witness hook (stdlib only, Python 3.6+; never raises, never prints): what one interpreter ran.

Started from a `.pth` line the probe phase writes into the reported interpreter's site-packages
for one command stage, and from this directory's `sitecustomize.py` (first on PYTHONPATH), both
carrying the stage's nonce, the output directory and the repository directory; whichever comes
first in an interpreter starts it, the other is a no-op. It writes one JSON file per process,
`<out>/<pid>-<start ns>.json`, rewritten in place (atomically) at three moments:

    start   during site processing: nonce, pid, ppid, sys.executable, the binary really running
            (/proc/self/exe), sys.prefix, version, cwd, argv
    main    when the interpreter starts its main program (audit events cpython.run_file,
            run_module, run_command, run_stdin; Python 3.8+): what it runs; a main file under
            the repository is listed with its git blob hash already, so a process that then
            dies by a signal or os._exit still shows that the repository's script started
    exit    at interpreter exit (atexit): the repository files it imported (module files under
            the repository directory, and files of distributions installed from it, with their
            git blob hashes), and every other non-stdlib top-level module with its file (the
            collector adds the installed distribution that owns each)

A process forked from a hooked one (multiprocessing, DataLoader workers) writes its own file
at its exit. The hook changes nothing the program sees except `sys._reb_ray_witness` (the
nonce) and the audit hook it adds.
"""

import atexit
import json
import os
import sys

VERSION = 1
#: Repository files and modules listed per record at most (counts are kept in full).
MAX_FILES = 400
MAX_MODULES = 400

_state = {}
_HERE = os.path.dirname(os.path.realpath(__file__))


def start(nonce, out_dir, repo_dir, via):
    """Start witnessing this interpreter (once; `via` is "pth" or "sitecustomize")."""
    try:
        if getattr(sys, "_reb_ray_witness", None) is not None:
            return
        sys._reb_ray_witness = nonce
        _state.update(nonce=nonce, out=out_dir, repo=os.path.realpath(repo_dir), via=via, pid=os.getpid(),
                      name="%d-%d.json" % (os.getpid(), _now_ns()), main=None)
        _write("start")
        try:
            sys.addaudithook(_audit)
        except Exception:  # Python < 3.8: start and exit records only
            pass
        atexit.register(_at_exit)
    except Exception:
        pass


def _now_ns():
    try:
        import time
        return time.time_ns()
    except Exception:
        return 0


def _audit(event, args):
    if not event.startswith("cpython.run_") or _state.get("main") is not None:
        return
    try:
        kind = event[len("cpython.run_"):]
        value = args[0] if args else None
        main = {"kind": kind, "value": str(value)[:500] if value is not None else None, "path": None, "blob": None}
        if kind == "file" and value:
            path = os.path.realpath(os.path.join(os.getcwd(), str(value)))
            main["path"] = path
            if _in_repo(path):
                main["repo_path"] = os.path.relpath(path, _state["repo"])
                main["blob"] = _blob(path)
        _state["main"] = main
        _write("main")
    except Exception:
        pass


def _at_exit():
    try:
        _write("exit", full=True)
    except Exception:
        pass


def _in_repo(path):
    repo = _state.get("repo") or ""
    return bool(repo) and (path == repo or path.startswith(repo.rstrip("/") + "/"))


def _blob(path):
    """The git blob hash of a file's bytes (sha1 of "blob <size>\\0" + content), or None."""
    try:
        import hashlib
        with open(path, "rb") as f:
            data = f.read()
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    except Exception:
        return None


def _stdlib_dirs():
    """The standard library's directories (Python < 3.10 only: newer ones name its modules)."""
    dirs = set()
    try:
        import sysconfig
        for key in ("stdlib", "platstdlib"):
            path = sysconfig.get_paths().get(key)
            if path:
                dirs.add(os.path.realpath(path))
    except Exception:
        pass
    return dirs


def _imports():
    """(repository files {realpath: module}, other non-stdlib top-level modules {name: realpath
    of its file}) of sys.modules. Owning distributions are looked up by the collector, once per
    stage, not here in every interpreter."""
    names = set(getattr(sys, "stdlib_module_names", ())) | set(sys.builtin_module_names)
    stdlib = () if getattr(sys, "stdlib_module_names", None) else _stdlib_dirs()
    repo = _state.get("repo") or "/nonexistent"
    repo_files, tops = {}, {}
    for name, module in list(sys.modules.items()):
        try:
            path = getattr(module, "__file__", None)
            if name == "__main__" and not path:  # a main script's __file__ is deleted once it ran
                path = getattr(getattr(module, "__loader__", None), "path", None)
        except Exception:
            continue
        if not isinstance(path, str) or not path:
            continue
        top = name.split(".")[0]
        if top in names and not path.startswith(repo):
            continue
        if top in tops and not path.startswith(repo):  # another module of a package already listed
            continue
        real = os.path.realpath(path)
        if _in_repo(real):
            repo_files[real] = name
            continue
        if top.startswith("_reb_ray_witness") or top == "sitecustomize" and real.startswith(_HERE):
            continue
        if any(real.startswith(d.rstrip("/") + "/") and "-packages/" not in real[len(d):] for d in stdlib):
            continue
        tops.setdefault(top, real)
    return repo_files, tops


def _installed_from_repo(tops):
    """Repository files the interpreter imported from a copy installed from the repository: the
    imported modules' files of a distribution whose PEP 610 direct_url.json names a file: URL
    under the repository (only the few dist-info directories holding a direct_url.json are read)."""
    files = []
    if not tops:
        return files
    loaded = {}
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None) if name.split(".")[0] in tops else None
        if isinstance(path, str) and path.endswith(".py"):
            loaded[os.path.realpath(path)] = name
    for site_dir in {p for p in sys.path if p and "-packages" in p}:
        try:
            entries = [e for e in os.listdir(site_dir) if e.endswith(".dist-info")]
        except Exception:
            continue
        for entry in entries:
            info = os.path.join(site_dir, entry)
            try:
                with open(os.path.join(info, "direct_url.json")) as f:
                    url = json.load(f).get("url") or ""
            except Exception:
                continue
            if not (url.startswith("file://") and _in_repo(os.path.realpath(url[len("file://"):]))):
                continue
            try:
                with open(os.path.join(info, "RECORD")) as f:
                    recorded = [line.split(",")[0] for line in f]
            except Exception:
                continue
            for rel in recorded:
                real = os.path.realpath(os.path.join(site_dir, rel))
                if real in loaded:
                    files.append({"path": rel, "blob": _blob(real), "installed": entry[:-len(".dist-info")],
                                  "module": loaded[real], "file": real})
    return files


def _write(phase, full=False):
    pid = os.getpid()
    if pid != _state.get("pid"):  # a forked child: a file of its own
        _state.update(pid=pid, name="%d-%d.json" % (pid, _now_ns()), forked=True)
    try:
        exe = os.readlink("/proc/self/exe")
    except Exception:
        exe = None
    record = {
        "v": VERSION, "nonce": _state["nonce"], "phase": phase, "via": _state.get("via"), "pid": pid,
        "ppid": os.getppid(), "forked": bool(_state.get("forked")), "executable": sys.executable,
        "executable_realpath": os.path.realpath(sys.executable) if sys.executable else None, "proc_exe": exe,
        "prefix": sys.prefix, "prefix_realpath": os.path.realpath(sys.prefix), "base_prefix": getattr(sys, "base_prefix", None),
        "version": "%d.%d.%d" % tuple(sys.version_info[:3]), "cwd": _cwd(),
        "argv": [str(a)[:300] for a in (getattr(sys, "orig_argv", None) or getattr(sys, "argv", None) or [])[:50]],
        "main": _state.get("main"), "repo_files": None, "repo_files_total": None, "modules": None, "modules_total": None,
    }
    if full:
        repo, tops = _imports()
        listed = [{"path": os.path.relpath(p, _state["repo"]), "blob": _blob(p) if p.endswith(".py") else None,
                   "module": m} for p, m in sorted(repo.items())]
        listed += _installed_from_repo(tops)
        record["repo_files_total"] = len(listed)
        record["repo_files"] = listed[:MAX_FILES]
        record["modules_total"] = len(tops)
        record["modules"] = dict(sorted(tops.items())[:MAX_MODULES])
    path = os.path.join(_state["out"], _state["name"])
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(record, f)
    os.replace(tmp, path)


def _cwd():
    try:
        return os.getcwd()
    except Exception:
        return None
