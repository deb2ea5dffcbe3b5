"""Which installed distribution owns a file (stdlib only, Python 3.8+), for the C0 and start-up probes.

A file is owned when an installer's manifest lists it, read from the files themselves as
`importlib.metadata` and the package managers do, never by importing anything:

- `*.dist-info/RECORD` (pip, uv, conda's pip layer) in every directory of the interpreter's
  import path: paths relative to that directory, with a `sha256=` hash;
- `*.egg-info/installed-files.txt` (paths relative to the egg-info directory) and, for a
  `setup.py develop` checkout, `SOURCES.txt` (relative to the directory holding the egg-info or
  its parent); a `*.egg` directory with `EGG-INFO/` owns everything below it;
- an editable install (`direct_url.json` with `dir_info.editable`, or a `*.egg-link`) owns the
  source tree it points at;
- `conda-meta/*.json` of a conda prefix (`files`, with `paths_data` sha256 hashes);
- Debian's `/var/lib/dpkg/info/*.list` (with `*.md5sums`, and the conffiles' md5 from
  `/var/lib/dpkg/status`), for interpreters and packages installed with apt.

A listed file whose bytes no longer match its recorded hash is `modified`, not owned: the file
that runs is not the one the distribution installed. Hashes are checked only for files up to
HASH_LIMIT bytes. A manifest is itself a file: an agent that writes a RECORD by hand can make
any file look owned; what this proves is that the file came with something an installer
recorded, not that the distribution is genuine.
"""

import base64
import csv
import hashlib
import io
import json
import os

HASH_LIMIT = 64 * 1024 * 1024  # bytes: larger files are matched by path only
ENV_DIR_NAMES = ("site-packages", "dist-packages")
DPKG_INFO = "/var/lib/dpkg/info"
DPKG_STATUS = "/var/lib/dpkg/status"


def norm(path):
    return os.path.normpath(path)


def under(path, root):
    root = root.rstrip("/")
    return path == root or path.startswith(root + "/")


def _read_text(path, limit=256 * 1024 * 1024):
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            return f.read(limit)
    except OSError:
        return None


def _file_digest(path, algo):
    try:
        if os.path.getsize(path) > HASH_LIMIT:
            return None
        h = hashlib.new(algo)
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h
    except (OSError, ValueError):
        return None


class Manifests:
    """The manifests reachable from `path_dirs` (the interpreter's import path, real paths) and
    `prefixes` (its sys.prefix and base prefix, for conda-meta). Loaded once; dpkg and conda
    manifests only when a lookup needs them."""

    def __init__(self, path_dirs, prefixes=()):
        self.files = {}  # normalised path -> (distribution, algorithm or None, expected digest)
        self.trees = []  # (real directory, distribution): editable sources, eggs
        self.prefixes = [norm(p) for p in prefixes if p]
        self._conda = {}  # prefix -> [(json path, text)] read lazily
        self._dpkg = None
        self.errors = []
        seen = set()
        for d in path_dirs:
            d = norm(d)
            if d in seen or not os.path.isdir(d):
                continue
            seen.add(d)
            self._scan_dir(d)

    # -- pip / setuptools metadata in one import-path directory
    def _scan_dir(self, d):
        if d.endswith(".egg") and os.path.isdir(os.path.join(d, "EGG-INFO")):
            self.trees.append((os.path.realpath(d), os.path.basename(d)))
        try:
            names = sorted(os.listdir(d))
        except OSError:
            return
        for name in names:
            path = os.path.join(d, name)
            if name.endswith(".dist-info"):
                self._dist_info(d, path, name[:-10])
            elif name.endswith(".egg-info") and os.path.isdir(path):
                self._egg_info(d, path, name[:-9])
            elif name.endswith(".egg") and os.path.isdir(os.path.join(path, "EGG-INFO")):
                self.trees.append((os.path.realpath(path), name[:-4]))
            elif name.endswith(".egg-link"):
                text = _read_text(path, 64 * 1024) or ""
                target = text.splitlines()[0].strip() if text.strip() else ""
                if target:
                    self.trees.append((os.path.realpath(os.path.join(d, target)), name[:-9]))

    def _dist_info(self, base, info, dist):
        text = _read_text(os.path.join(info, "RECORD"))
        if text is not None:
            try:
                for row in csv.reader(io.StringIO(text)):
                    if not row or not row[0]:
                        continue
                    algo, digest = None, None
                    if len(row) > 1 and "=" in row[1]:
                        algo, digest = row[1].split("=", 1)
                    self.files.setdefault(norm(os.path.join(base, row[0])), (dist, algo, digest))
            except csv.Error as exc:
                self.errors.append("%s: %s" % (info, exc))
        direct = _read_text(os.path.join(info, "direct_url.json"), 64 * 1024)
        if direct:
            try:
                data = json.loads(direct)
                url = data.get("url") or ""
                if (data.get("dir_info") or {}).get("editable") and url.startswith("file://"):
                    self.trees.append((os.path.realpath(url[len("file://"):]), dist))
            except (ValueError, AttributeError):
                pass

    def _egg_info(self, base, info, dist):
        text = _read_text(os.path.join(info, "installed-files.txt"))
        if text is not None:
            for line in text.splitlines():
                if line.strip():
                    self.files.setdefault(norm(os.path.join(info, line.strip())), (dist, None, None))
            return
        text = _read_text(os.path.join(info, "SOURCES.txt"))
        if text is not None:  # a develop checkout: sources relative to the project root
            for line in text.splitlines():
                if line.strip():
                    for root in (base, os.path.dirname(base)):
                        self.files.setdefault(norm(os.path.join(root, line.strip())), (dist, None, None))

    # -- conda and dpkg, read when a lookup needs them
    def _conda_docs(self, prefix):
        if prefix not in self._conda:
            docs = []
            meta = os.path.join(prefix, "conda-meta")
            try:
                names = sorted(n for n in os.listdir(meta) if n.endswith(".json"))
            except OSError:
                names = []
            for name in names:
                text = _read_text(os.path.join(meta, name))
                if text:
                    docs.append((name[:-5], text))
            self._conda[prefix] = docs
        return self._conda[prefix]

    def _conda_lookup(self, path):
        for prefix in self.prefixes:
            if not under(path, prefix):
                continue
            rel = os.path.relpath(path, prefix)
            needle = json.dumps(rel)
            for name, text in self._conda_docs(prefix):
                if needle not in text:
                    continue
                try:
                    doc = json.loads(text)
                except ValueError:
                    continue
                if rel not in (doc.get("files") or []):
                    continue
                digest = None
                for entry in (doc.get("paths_data") or {}).get("paths") or []:
                    if isinstance(entry, dict) and entry.get("_path") == rel:
                        digest = entry.get("sha256")
                return ("conda:" + name, "sha256-hex" if digest else None, digest)
        return None

    def _dpkg_index(self):
        if self._dpkg is None:
            owners, sums = {}, {}
            try:
                names = sorted(os.listdir(DPKG_INFO))
            except OSError:
                names = []
            for name in names:
                if name.endswith(".list"):
                    pkg = name[:-5]
                    for line in (_read_text(os.path.join(DPKG_INFO, name)) or "").splitlines():
                        if line.startswith("/"):
                            owners.setdefault(line, pkg)
                elif name.endswith(".md5sums"):
                    for line in (_read_text(os.path.join(DPKG_INFO, name)) or "").splitlines():
                        parts = line.split(None, 1)
                        if len(parts) == 2:
                            sums["/" + parts[1].strip()] = parts[0]
            for line in (_read_text(DPKG_STATUS) or "").splitlines():  # conffiles: " /etc/x md5"
                parts = line.split()
                if line.startswith(" /") and len(parts) >= 2 and len(parts[1]) == 32:
                    sums.setdefault(parts[0], parts[1])
            self._dpkg = (owners, sums)
        return self._dpkg

    def _dpkg_lookup(self, path):
        owners, sums = self._dpkg_index()
        if path in owners:
            digest = sums.get(path)
            return ("dpkg:" + owners[path], "md5-hex" if digest else None, digest)
        return None

    # -- the lookup
    def owner(self, path):
        """{"owner": "distribution", "name": ...} | {"owner": "modified", "name": ...} |
        {"owner": None}: who installed the file at `path` (as found on the import path)."""
        real = os.path.realpath(path)
        candidates = [norm(path)] + ([real] if real != norm(path) else [])
        for cand in candidates:
            entry = self.files.get(cand)
            if entry is None:
                entry = self._conda_lookup(cand) if self.prefixes else None
            if entry is None:
                entry = self._dpkg_lookup(cand)
            if entry is not None:
                return self._verify(real, entry)
        for root, dist in self.trees:
            if under(real, root):
                return {"owner": "distribution", "name": dist, "via": "source tree"}
        return {"owner": None}

    def _verify(self, real, entry):
        dist, algo, digest = entry
        if algo and digest and os.path.isfile(real):
            if algo == "sha256-hex":
                h = _file_digest(real, "sha256")
                ok = h is None or h.hexdigest() == digest.lower()
            elif algo == "md5-hex":
                h = _file_digest(real, "md5")
                ok = h is None or h.hexdigest() == digest.lower()
            else:
                try:
                    h = _file_digest(real, algo)
                except ValueError:
                    h = None
                ok = h is None or base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode() == digest
            if not ok:
                return {"owner": "modified", "name": dist}
        return {"owner": "distribution", "name": dist}


# -- where a top-level module lives

_SOURCE_SUFFIXES = (".py", ".pyc")
_NATIVE_MARKERS = (".so", ".pyd")


_LISTINGS = {}


def _listing(root):
    """(the names in directory `root`, {module name: its native extension file name}), cached
    for the probe's run."""
    if root not in _LISTINGS:
        try:
            names = set(os.listdir(root))
        except OSError:
            names = set()
        native = {}
        for entry in sorted(names):
            if entry.endswith(_NATIVE_MARKERS) and "." in entry:
                native.setdefault(entry.split(".")[0], entry)
        _LISTINGS[root] = (names, native)
    return _LISTINGS[root]


def _module_file(root, name):
    """(kind, file) of top-level `name` in directory `root`: ("package", __init__ file),
    ("module", file), ("namespace", directory) or (None, None). Stub-only files (.pyi) are not
    what an import runs, so they do not count."""
    names, native = _listing(root)
    pkg = os.path.join(root, name)
    if name in names and os.path.isdir(pkg):
        for init in ("__init__.py", "__init__.pyc"):
            if os.path.isfile(os.path.join(pkg, init)):
                return "package", os.path.join(pkg, init)
        if "__init__" in _listing(pkg)[1]:
            return "package", os.path.join(pkg, _listing(pkg)[1]["__init__"])
    for suffix in _SOURCE_SUFFIXES:
        if name + suffix in names and os.path.isfile(os.path.join(root, name + suffix)):
            return "module", os.path.join(root, name + suffix)
    if name in native:
        return "module", os.path.join(root, native[name])
    if name in names and os.path.isdir(pkg):
        return "namespace", pkg
    return None, None


def in_environment(path, repo):
    """True when `path`, below the repository `repo`, lies in an environment there (a
    site-packages or dist-packages directory): that is installed code, not the repository's."""
    rel = os.path.relpath(path, repo).split(os.sep)
    return any(part in ENV_DIR_NAMES for part in rel)


def stdlib_names(versions_file, version):
    """Top-level modules the typeshed `VERSIONS` file gives to Python `version` (a [major, minor]
    list): the standard library as pyright resolves it."""
    names = set()
    text = _read_text(versions_file) or ""
    want = tuple(version[:2]) if version else (3, 99)
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if ":" not in line:
            continue
        name, span = [part.strip() for part in line.split(":", 1)]
        if "." in name:
            continue
        low, _, high = span.partition("-")
        try:
            lo = tuple(int(x) for x in low.split("."))
            hi = tuple(int(x) for x in high.split(".")) if high.strip() else (99, 99)
        except ValueError:
            continue
        if lo <= want <= hi:
            names.add(name)
    return names


def _namespace_owner(directory, manifests, limit=200):
    """The owner of a namespace package directory: that of the first owned file below it (at most
    `limit` files looked at), else unowned."""
    seen = 0
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if not name.endswith(_SOURCE_SUFFIXES + _NATIVE_MARKERS):
                continue
            seen += 1
            got = manifests.owner(os.path.join(dirpath, name))
            if got["owner"] == "distribution":
                return got, os.path.join(dirpath, name)
            if seen >= limit:
                return {"owner": None}, directory
    return {"owner": None}, directory


def resolve_owner(name, repo, repo_roots, stdlib, path_dirs, manifests, local_dirs=()):
    """Where top-level module `name` resolves and who owns it, in pyright's order: the
    repository's roots (`repo_roots`: its root and src/), the standard library (`stdlib`, the
    typeshed names), then the interpreter's import path `path_dirs`, then the directories of
    the files importing it (`local_dirs`, pyright's fallback for scripts).

    Returns {"owner": "repository" | "stdlib" | "distribution" | "modified" | "unowned" |
    "unlocated", "path": file or None, "name": distribution or None}.
    """
    def judge(kind, found):
        real = os.path.realpath(found)
        if under(real, repo) and not in_environment(real, repo):
            return {"owner": "repository", "path": found, "name": None}
        if kind == "namespace":
            got, where = _namespace_owner(found, manifests)
        else:
            got, where = manifests.owner(found), found
        return {"owner": got["owner"] or "unowned", "path": where, "name": got.get("name")}

    for root in repo_roots:
        kind, found = _module_file(root, name)
        if kind in ("package", "module"):
            return {"owner": "repository", "path": found, "name": None}
    if name in stdlib:
        return {"owner": "stdlib", "path": None, "name": None}
    namespace = None
    for root in path_dirs:
        kind, found = _module_file(root, name)
        if kind in ("package", "module"):
            return judge(kind, found)
        if kind == "namespace" and namespace is None:
            namespace = found
    for root in repo_roots:
        kind, found = _module_file(root, name)
        if kind == "namespace":
            return {"owner": "repository", "path": found, "name": None}
    if namespace is not None:
        return judge("namespace", namespace)
    for root in local_dirs:
        kind, found = _module_file(root, name)
        if kind is not None:
            return {"owner": "repository", "path": found, "name": None}
    return {"owner": "unlocated", "path": None, "name": None}
