"""Installed-files probe (stdlib only, Python 3.6+): the bytes of what is installed on an import path.

Usage: python3 -I -S installed_files.py --site DIR [--site DIR ...] [--path-dir DIR ...] --out FILE

Run by the image's /usr/bin/python3 (isolated, no site hooks) in the probe phase, after every
process of the agent was stopped and before any stage runs the reported interpreter. It only
lists and hashes; what the bytes should be comes from outside the sandbox (the published
artifacts, reb_ray.probing.installed), and the comparison is the harness's
(reb_ray.grading.installed). For every directory given (the interpreter's site directories, and
the other directories of its import path that hold distribution metadata) it writes:

- `dists`: each `*.dist-info` / `*.egg-info` directory: name and version (METADATA / PKG-INFO),
  the wheel tags and the `Generator` line (WHEEL), installer, PEP 610 `direct_url.json` (url, editable, archive hash), the
  paths its own RECORD lists, and `files`: the sha256 (RECORD's form, urlsafe base64 without
  padding) of every file its RECORD lists inside the directory AND of every file below the
  top-level entries that RECORD names (so a file added into an installed package is seen too);
  byte-compiled caches (`__pycache__`, `*.pyc`) are left out;
- `loose`: top-level modules and packages of a site directory that no metadata directory's
  RECORD names, with the same hashes (a stub dropped into site-packages);
- `pth`: every `.pth` file of a site directory with its hash and its executable `import` lines;
  for an `__editable__.*.pth` (setuptools' editable install), also its whole text and
  `finder`: the module its first line imports, read from the same directory (its text, at most
  FINDER_CHARS, and hash), which the harness compares with setuptools' published template
  (reb_ray.grading.editable);
  `customize`: every sitecustomize / usercustomize module on the given directories, hashed;
- `dpkg`: for files below /usr in the site directories that Debian's database lists, the
  package and whether the md5 it recorded still matches ({package: {"files": n, "modified":
  [paths], "tops": ["<dir>\t<top-level name>"]}}).

At most MAX_FILES files are hashed per directory entry; the totals are kept.
"""

import argparse
import base64
import csv
import hashlib
import io
import json
import os
import re
import sys
import time

PROBE_VERSION = 2
MAX_FILES = 100000
LINE_CHARS = 200
#: Characters of an editable finder module carried at most (setuptools' is about 3.4 kB).
FINDER_CHARS = 64 * 1024
_FINDER_IMPORT = re.compile(r"^import ([A-Za-z_][A-Za-z0-9_]*)\b")
DPKG_INFO = "/var/lib/dpkg/info"
_SKIP_DIRS = ("__pycache__",)
_stats = {"files": 0, "bytes": 0}


def _read(path, limit=64 * 1024 * 1024):
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            return f.read(limit)
    except OSError:
        return None


def _digest(path, algorithm):
    """hashlib's `algorithm` of the file's bytes (read in 1 MiB chunks, counted in _stats), or
    None when unreadable."""
    try:
        h = hashlib.new(algorithm)
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
                _stats["bytes"] += len(chunk)
        return h
    except OSError:
        return None


def sha256_b64(path):
    """RECORD's hash of the file at `path` ("sha256=<urlsafe b64>"), or None when unreadable."""
    h = _digest(path, "sha256")
    if h is None:
        return None
    _stats["files"] += 1
    return "sha256=" + base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


def _skip(rel):
    parts = rel.split("/")
    return any(p in _SKIP_DIRS for p in parts) or rel.endswith((".pyc", ".pyo"))


def walk_files(base, entry):
    """Paths (relative to `base`) of the regular files at or below `base/entry`, caches left out."""
    root = os.path.join(base, entry)
    if os.path.islink(root) or os.path.isfile(root):
        return [entry]
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in sorted(filenames):
            rel = os.path.relpath(os.path.join(dirpath, name), base)
            if not _skip(rel):
                out.append(rel)
            if len(out) >= MAX_FILES:
                return out
    return out


def _top(rel):
    first = rel.split("/")[0]
    if not first or first in ("..", ".") or first.endswith((".dist-info", ".egg-info", ".data")):
        return None
    return first


def _metadata(info, kind):
    name = version = None
    text = _read(os.path.join(info, "METADATA" if kind == "dist-info" else "PKG-INFO"), 256 * 1024) or ""
    for line in text.splitlines():
        if not line.strip():
            break
        if line.startswith("Name:") and name is None:
            name = line[5:].strip()
        elif line.startswith("Version:") and version is None:
            version = line[8:].strip()
    return name, version


def _direct_url(info):
    text = _read(os.path.join(info, "direct_url.json"), 64 * 1024)
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return {"invalid": True}
    if not isinstance(data, dict):
        return {"invalid": True}
    archive = data.get("archive_info") if isinstance(data.get("archive_info"), dict) else {}
    return {"url": str(data.get("url") or "")[:500], "editable": bool((data.get("dir_info") or {}).get("editable"))
            if isinstance(data.get("dir_info"), dict) else False, "dir": isinstance(data.get("dir_info"), dict),
            "vcs": isinstance(data.get("vcs_info"), dict),
            "archive_hash": str(archive.get("hash") or (archive.get("hashes") or {}).get("sha256") or "")[:200] or None}


def read_dist(base, entry):
    """One metadata directory of `base` as the module docstring lists it."""
    kind = "dist-info" if entry.endswith(".dist-info") else "egg-info"
    info = os.path.join(base, entry)
    name, version = _metadata(info, kind)
    dist = {"dir": base, "info": entry, "kind": kind, "name": name, "version": version, "tags": [], "generator": None,
            "installer": (_read(os.path.join(info, "INSTALLER"), 1024) or "").strip()[:50] or None,
            "direct_url": _direct_url(info) if kind == "dist-info" else None, "record": [], "files": {}}
    for line in (_read(os.path.join(info, "WHEEL"), 64 * 1024) or "").splitlines():
        if line.startswith("Tag:"):
            dist["tags"].append(line[4:].strip())
        elif line.startswith("Generator:") and dist["generator"] is None:
            dist["generator"] = line[10:].strip()[:LINE_CHARS]
    listed = []
    if kind == "dist-info":
        text = _read(os.path.join(info, "RECORD"))
        if text:
            try:
                listed = [row[0] for row in csv.reader(io.StringIO(text)) if row and row[0]]
            except csv.Error:
                listed = []
    else:
        text = _read(os.path.join(info, "installed-files.txt"))
        if text:
            listed = [os.path.relpath(os.path.normpath(os.path.join(info, line.strip())), base)
                      for line in text.splitlines() if line.strip()]
    dist["record"] = listed[:MAX_FILES]
    tops = sorted({t for t in (_top(os.path.normpath(p)) for p in listed) if t})
    dist["tops"] = tops
    wanted = set()
    for rel in listed:
        rel = os.path.normpath(rel)
        if not rel.startswith("..") and not _skip(rel):
            wanted.add(rel)
    for top in tops:
        if os.path.lexists(os.path.join(base, top)):
            wanted.update(walk_files(base, top))
    for rel in sorted(wanted)[:MAX_FILES]:
        path = os.path.join(base, rel)
        if os.path.isfile(path):
            dist["files"][rel] = sha256_b64(path)
        elif not os.path.lexists(path):
            dist["files"][rel] = None  # listed, absent
    return dist


def scan_dir(base, is_site, out, claimed_tops):
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return
    for entry in names:
        if entry.endswith((".dist-info", ".egg-info")) and os.path.isdir(os.path.join(base, entry)):
            dist = read_dist(base, entry)
            out["dists"].append(dist)
            claimed_tops.setdefault(base, set()).update(dist["tops"])
    if not is_site:
        return
    for entry in names:
        path = os.path.join(base, entry)
        if entry.endswith(".pth") and os.path.isfile(path):
            lines = (_read(path, 1 << 20) or "").splitlines()
            execs = [line[:LINE_CHARS] for line in lines if line.startswith(("import ", "import\t"))]
            item = {"dir": base, "name": entry, "hash": sha256_b64(path), "exec_lines": execs[:5]}
            item.update(editable_finder(base, entry, lines))
            out["pth"].append(item)
    for entry in names:
        if entry.startswith(".") or entry in _SKIP_DIRS or entry.endswith(
                (".dist-info", ".egg-info", ".data", ".pth", ".egg-link", ".txt", ".json", ".pyi", ".typed")):
            continue
        module = entry.split(".")[0]
        if module in claimed_tops.get(base, ()) or entry in claimed_tops.get(base, ()):
            continue
        path = os.path.join(base, entry)
        if os.path.isfile(path) and not entry.endswith((".py", ".so", ".pyd", ".pyc")):
            continue
        files = {rel: sha256_b64(os.path.join(base, rel)) for rel in walk_files(base, entry)
                 if os.path.isfile(os.path.join(base, rel))}
        out["loose"].append({"dir": base, "name": module, "entry": entry, "files": files})


def editable_finder(base, entry, lines):
    """For an `__editable__.*.pth` file: {"text": its text (at most 4 KiB), "finder": {"file",
    "text", "hash", "truncated"} of the module its first line imports, in the same directory}
    (module docstring); {} for any other `.pth`. Only read, never imported: whether it is
    setuptools' own is the harness's judgement."""
    if not entry.startswith("__editable__."):
        return {}
    try:
        with open(os.path.join(base, entry), "rb") as f:
            pth_text = f.read(4096).decode("utf-8", "replace")
    except OSError:
        return {}
    found = _FINDER_IMPORT.match(lines[0]) if lines else None
    if not found:
        return {"text": pth_text}
    module = found.group(1)
    path = os.path.join(base, module + ".py")
    finder = {"file": module + ".py", "text": None, "hash": None, "truncated": False}
    if os.path.isfile(path) and not os.path.islink(path):
        try:
            with open(path, "rb") as f:
                data = f.read(FINDER_CHARS + 1)
            finder["text"] = data[:FINDER_CHARS].decode("utf-8", "replace")
            finder["truncated"] = len(data) > FINDER_CHARS
            finder["hash"] = sha256_b64(path)
        except OSError:
            pass
    return {"text": pth_text, "finder": finder}


def dpkg_file(path):
    """{"package", "md5_ok"} when Debian's database lists `path` (or its real path; a conffile's
    md5 is in the status file), else None."""
    real = os.path.realpath(path)
    try:
        names = sorted(n for n in os.listdir(DPKG_INFO) if n.endswith(".list"))
    except OSError:
        return None
    for candidate in (real, path):
        for name in names:
            text = _read(os.path.join(DPKG_INFO, name)) or ""
            if candidate + "\n" not in text + "\n":
                continue
            pkg = name[:-len(".list")]
            want = None
            for line in (_read(os.path.join(DPKG_INFO, pkg + ".md5sums")) or "").splitlines():
                parts = line.split(None, 1)
                if len(parts) == 2 and "/" + parts[1].strip() == candidate:
                    want = parts[0]
            if want is None:
                for line in (_read("/var/lib/dpkg/status") or "").splitlines():
                    parts = line.split()
                    if line.startswith(" /") and len(parts) >= 2 and parts[0] == candidate:
                        want = parts[1]
            try:
                with open(real, "rb") as f:
                    got = hashlib.md5(f.read()).hexdigest()
            except OSError:
                got = None
            return {"package": pkg, "md5_ok": bool(want) and got == want}
    return None


def customize(dirs, out):
    for base in dirs:
        for stem in ("sitecustomize", "usercustomize"):
            for name in (stem + ".py", stem + "/__init__.py"):
                path = os.path.join(base, name)
                if os.path.isfile(path):
                    out["customize"].append({"dir": base, "rel": name, "kind": stem, "hash": sha256_b64(path),
                                             "dpkg": dpkg_file(path) if path.startswith("/usr/") else None})


def dpkg(dirs, out):
    """Debian's owners and md5 sums of the files below /usr in `dirs` (module docstring)."""
    want = [d for d in dirs if d.startswith("/usr/")]
    if not want or not os.path.isdir(DPKG_INFO):
        return
    result = {}
    for name in sorted(os.listdir(DPKG_INFO)):
        if not name.endswith(".md5sums"):
            continue
        pkg = name[:-len(".md5sums")]
        for line in (_read(os.path.join(DPKG_INFO, name)) or "").splitlines():
            parts = line.split(None, 1)
            if len(parts) != 2:
                continue
            path = "/" + parts[1].strip()
            if not any(path.startswith(d.rstrip("/") + "/") for d in want) or _skip(path):
                continue
            entry = result.setdefault(pkg, {"files": 0, "modified": [], "tops": []})
            entry["files"] += 1
            base = next(d for d in want if path.startswith(d.rstrip("/") + "/"))
            top = base + "\t" + path[len(base.rstrip("/")) + 1:].split("/")[0].split(".")[0]
            if top not in entry["tops"]:
                entry["tops"].append(top)
            h = _digest(path, "md5")
            ok = h is not None and h.hexdigest() == parts[0].lower()
            if not ok and len(entry["modified"]) < 50:
                entry["modified"].append(path)
    out["dpkg"] = result


def probe(args):
    started = time.time()
    sites = [os.path.realpath(d) for d in args.site if d and os.path.isdir(d)]
    others = [os.path.realpath(d) for d in args.path_dir if d and os.path.isdir(d)]
    out = {"probe_version": PROBE_VERSION, "site_dirs": sites, "dists": [], "loose": [], "pth": [], "customize": [],
           "dpkg": {}, "error": None}
    claimed = {}
    seen = set()
    for base in sites:
        if base not in seen:
            seen.add(base)
            scan_dir(base, True, out, claimed)
    for base in others:
        if base not in seen:
            seen.add(base)
            scan_dir(base, False, out, claimed)
    customize(list(dict.fromkeys(sites + others)), out)
    dpkg(sites, out)
    out["hashed_files"], out["hashed_bytes"] = _stats["files"], _stats["bytes"]
    out["duration_s"] = round(time.time() - started, 3)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", action="append", default=[])
    parser.add_argument("--path-dir", action="append", default=[])
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        rec = probe(args)
    except Exception as exc:  # noqa: BLE001 - still a record: the harness says what is unknown
        rec = {"probe_version": PROBE_VERSION, "error": "%s: %s" % (type(exc).__name__, exc)}
    out_dir = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(out_dir):
        os.makedirs(out_dir)
    with open(args.out + ".tmp", "w") as f:
        json.dump(rec, f)
    os.replace(args.out + ".tmp", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
