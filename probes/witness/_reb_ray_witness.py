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
            git blob hashes), and every other non-stdlib top-level module with the installed
            distribution that owns it (null: no distribution owns it)

A process forked from a hooked one (multiprocessing, DataLoader workers) writes its own file
at its exit. The hook changes nothing the program sees except `sys._reb_ray_witness` (the
nonce) and the audit hook it adds.
"""

import atexit
import hashlib
import json
import os
import sys

VERSION = 1
#: Repository files and modules listed per record at most (counts are kept in full).
MAX_FILES = 400
MAX_MODULES = 400

_state = {}


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
        with open(path, "rb") as f:
            data = f.read()
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    except Exception:
        return None


def _stdlib_dirs():
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


def _repo_dists():
    """{distribution name: its install location} for distributions installed from the
    repository (PEP 610 direct_url.json naming a file: URL under the repository)."""
    found = {}
    try:
        from importlib import metadata
        for dist in metadata.distributions():
            try:
                text = dist.read_text("direct_url.json")
                if not text:
                    continue
                url = json.loads(text).get("url") or ""
                if url.startswith("file://") and _in_repo(os.path.realpath(url[len("file://"):])):
                    found[dist.metadata["Name"]] = dist
            except Exception:
                continue
    except Exception:
        pass
    return found


def _owners():
    try:
        from importlib import metadata
        return metadata.packages_distributions()
    except Exception:
        return {}


def _imports():
    """(repository files, non-stdlib top-level modules -> owning distribution) of sys.modules."""
    stdlib = _stdlib_dirs()
    builtin = set(getattr(sys, "stdlib_module_names", ())) | set(sys.builtin_module_names)
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
        real = os.path.realpath(path)
        if _in_repo(real):
            repo_files[real] = name
            continue
        top = name.split(".")[0]
        if top in builtin or top.startswith("_reb_ray_witness") or top == "sitecustomize" and "witness" in real:
            continue
        if any(real.startswith(d.rstrip("/") + "/") and "-packages/" not in real[len(d):] for d in stdlib):
            continue
        tops.setdefault(top, real)
    return repo_files, tops


def _installed_from_repo(tops):
    """Repository files the interpreter ran from a copy installed from the repository."""
    files = []
    dists = _repo_dists() if tops else {}
    for name, dist in dists.items():
        try:
            for entry in dist.files or ():
                path = str(entry)
                if not path.endswith(".py") or path.split("/")[0] not in tops:
                    continue
                located = os.path.realpath(str(dist.locate_file(entry)))
                modules = [m for m in list(sys.modules.values())
                           if os.path.realpath(getattr(m, "__file__", "") or "") == located]
                if modules:
                    files.append({"path": path, "blob": _blob(located), "installed": name})
        except Exception:
            continue
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
        owners = _owners() if tops else {}
        record["repo_files_total"] = len(listed)
        record["repo_files"] = listed[:MAX_FILES]
        modules = {top: (owners.get(top) or [None])[0] for top in sorted(tops)}
        record["modules_total"] = len(modules)
        record["modules"] = dict(list(modules.items())[:MAX_MODULES])
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
