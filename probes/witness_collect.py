"""Witness collector (stdlib only, Python 3.6+): one stage's witness files into one record.

Usage: python3 witness_collect.py --dir DIR --nonce N --python PYTHON_PATH --repo REPO
       --commit COMMIT --prefix PREFIX --out FILE

Run by the image's /usr/bin/python3 after the stage's command ended, never by PYTHON_PATH. It
reads every `*.json` witness file in DIR (the hook's records, at most MAX_RECORDS, each at most
MAX_BYTES), describes PYTHON_PATH as the filesystem has it (realpath, symlink, ELF or script),
marks each repository file a record lists, and its main program, as `pinned` when the git blob
hash of the file, computed here (the hook's own is kept as `claimed_blob` and never trusted),
is COMMIT's blob at that path (`git ls-tree -r`; any blob of the tree for a file installed from
the repository), and adds to each third-party module the distribution installed
in the directory it was imported from that lists it (null: none does). PREFIX is sys.prefix as PYTHON_PATH reported it before the
stage ("" when unknown). Grading is separate and pure (reb_ray.grading.witness). Writes one
JSON object to FILE (atomically):

    nonce, python_path, python_exists, python_is_symlink, python_realpath, python_kind
    ("elf" | "script" | "other" | "missing"), expected_prefix, pinned_known, repo, records [...],
    records_total, unreadable (files that were not a JSON object), error
"""

import argparse
import json
import os
import subprocess
import sys

MAX_RECORDS = 256
MAX_BYTES = 1 << 20
#: Files larger than this (bytes) are not hashed (a repository file run as Python is smaller).
MAX_HASHED = 64 << 20


def python_facts(path):
    out = {"python_path": path, "python_exists": os.path.exists(path), "python_is_symlink": os.path.islink(path),
           "python_realpath": os.path.realpath(path), "python_kind": "missing"}
    if out["python_exists"]:
        try:
            with open(out["python_realpath"], "rb") as f:
                head = f.read(4)
            out["python_kind"] = "elf" if head == b"\x7fELF" else "script" if head[:2] == b"#!" else "other"
        except OSError:
            out["python_kind"] = "other"
    return out


def pinned_tree(repo, commit):
    """{path: blob} of COMMIT's tree (`git ls-tree -r`), or None when it cannot be listed."""
    try:
        proc = subprocess.run(["git", "-c", "safe.directory=*", "-C", repo, "ls-tree", "-r", "-z", "--full-tree", commit],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    tree = {}
    for item in proc.stdout.decode(errors="replace").split("\0"):
        meta, _, path = item.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == "blob":
            tree[path] = parts[2]
    return tree


def blob_of(path, cache):
    """The git blob hash of the file at `path` now (sha1 of "blob <size>\\0" + content), or None:
    computed here, never taken from a witness record."""
    if path in cache:
        return cache[path]
    blob = None
    try:
        if os.path.isfile(path) and not os.path.islink(path) and os.path.getsize(path) <= MAX_HASHED:
            import hashlib
            with open(path, "rb") as f:
                data = f.read()
            blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    except OSError:
        blob = None
    cache[path] = blob
    return blob


def read_records(directory):
    records, unreadable, total = [], 0, 0
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".json"))
    except OSError:
        return [], 0, 0
    total = len(names)
    for name in names[:MAX_RECORDS]:
        path = os.path.join(directory, name)
        try:
            if os.path.islink(path) or not os.path.isfile(path) or os.path.getsize(path) > MAX_BYTES:
                unreadable += 1
                continue
            with open(path) as f:
                record = json.load(f)
        except (OSError, ValueError):
            unreadable += 1
            continue
        if isinstance(record, dict):
            record["file"] = name
            records.append(record)
        else:
            unreadable += 1
    return records, unreadable, total


def mark_pinned(records, tree, repo):
    """Mark each repository file a record lists, and its main program, `pinned`: the file's blob,
    hashed here from the file, is the pinned tree's blob at the same path (a repository file),
    or any blob of the tree (a file installed from the repository, whose path differs). A
    module run as main (`-m`) gets the file it ran from (the `__main__` entry of its files).
    The hook's own hashes are kept as `claimed_blob`, never used. `tree` None: unknown."""
    repo = os.path.realpath(repo)
    blobs = set(tree.values()) if tree is not None else None
    cache = {}

    def judge(entry, absolute, rel):
        entry["claimed_blob"] = entry.get("blob")
        entry["blob"] = blob_of(absolute, cache) if absolute else None
        if tree is None:
            entry["pinned"] = None
        elif entry["blob"] is None:
            entry["pinned"] = False
        elif rel is not None:
            entry["pinned"] = tree.get(rel) == entry["blob"]
        else:
            entry["pinned"] = entry["blob"] in blobs

    for record in records:
        files = [f for f in record.get("repo_files") or [] if isinstance(f, dict)] if isinstance(record.get("repo_files"), list) else []
        for entry in files:
            path = entry.get("path") if isinstance(entry.get("path"), str) else None
            if entry.get("installed"):
                absolute = entry.get("file") if isinstance(entry.get("file"), str) else None
                judge(entry, absolute, None)
            else:
                absolute = os.path.normpath(os.path.join(repo, path)) if path else None
                inside = absolute is not None and absolute.startswith(repo + os.sep)
                judge(entry, absolute if inside else None, os.path.relpath(absolute, repo) if inside else None)
        main = record.get("main") if isinstance(record.get("main"), dict) else None
        if main is None:
            continue
        if main.get("kind") == "module":
            ran = next((f for f in files if f.get("module") == "__main__"), None)
            if ran is not None:
                main["path"] = ran.get("file") if ran.get("installed") else os.path.join(repo, str(ran.get("path")))
                if not ran.get("installed"):
                    main["repo_path"] = ran.get("path")
        path = main.get("path") if isinstance(main.get("path"), str) else None
        if not path:
            main["pinned"] = None if tree is None else False
            continue
        real = os.path.realpath(path)
        if real.startswith(repo + os.sep):
            main["repo_path"] = os.path.relpath(real, repo)
            judge(main, real, main["repo_path"])
        else:
            main.pop("repo_path", None)
            judge(main, real, None)


def _top_of(entry):
    """The top-level import name a RECORD path's first component provides, or None."""
    first = entry.split("/")[0]
    if not first or first.endswith((".dist-info", ".egg-info", ".data")) or first in ("..", "__pycache__"):
        return None
    if "/" not in entry:  # a single-file module or extension: name.py, name.cpython-311-x86_64-linux-gnu.so
        base = first.split(".")[0]
        return base if first.endswith((".py", ".so", ".pyd")) else None
    return first


def site_owners(site_dir, cache):
    """{top-level name: distribution name} of the distributions installed in `site_dir` (their
    RECORD or installed-files.txt, and top_level.txt), cached per directory."""
    if site_dir in cache:
        return cache[site_dir]
    owners = cache[site_dir] = {}
    try:
        entries = sorted(os.listdir(site_dir))
    except OSError:
        return owners
    for entry in entries:
        if not entry.endswith((".dist-info", ".egg-info")):
            continue
        info = os.path.join(site_dir, entry)
        name = entry.rsplit(".", 1)[0].split("-")[0]
        try:
            with open(os.path.join(info, "METADATA" if entry.endswith(".dist-info") else "PKG-INFO"), errors="replace") as f:
                for line in f:
                    if line.startswith("Name:"):
                        name = line[5:].strip()
                        break
                    if not line.strip():
                        break
        except OSError:
            pass
        for listing, relative_to in (("RECORD", site_dir), ("installed-files.txt", info), ("top_level.txt", None)):
            try:
                with open(os.path.join(info, listing), errors="replace") as f:
                    lines = [line.split(",")[0].strip() for line in f]
            except OSError:
                continue
            for line in lines:
                if relative_to is None:
                    top = line or None
                else:
                    rel = os.path.relpath(os.path.normpath(os.path.join(relative_to, line)), site_dir)
                    top = _top_of(rel)
                if top:
                    owners.setdefault(top, name)
    return owners


def mark_owners(records):
    """Each record's modules {top: file} become {top: {"file", "dist"}} (dist null: no
    distribution in the directory the module was imported from lists it)."""
    cache = {}
    for record in records:
        modules = record.get("modules")
        if not isinstance(modules, dict):
            continue
        for top, path in list(modules.items()):
            if not isinstance(path, str):
                modules[top] = {"file": None, "dist": None}
                continue
            marker = "/" + top + "/"
            site_dir = path.rsplit(marker, 1)[0] if marker in path else os.path.dirname(path)
            modules[top] = {"file": path, "dist": site_owners(site_dir, cache).get(top)}


def main(argv=None):
    parser = argparse.ArgumentParser()
    for name in ("--dir", "--nonce", "--python", "--repo", "--commit", "--prefix", "--out"):
        parser.add_argument(name, required=True)
    args = parser.parse_args(argv)
    result = {"nonce": args.nonce, "expected_prefix": os.path.realpath(args.prefix) if args.prefix else None,
              "error": None}
    try:
        result.update(python_facts(args.python))
        records, unreadable, total = read_records(args.dir)
        tree = pinned_tree(args.repo, args.commit) if args.commit else None
        mark_pinned(records, tree, args.repo)
        mark_owners(records)
        result.update(records=records, records_total=total, unreadable=unreadable, pinned_known=tree is not None,
                      repo=os.path.realpath(args.repo))
    except Exception as exc:  # noqa: BLE001 - the record says what failed
        result["error"] = "%s: %s" % (type(exc).__name__, exc)
    if not os.path.isdir(os.path.dirname(args.out)):
        os.makedirs(os.path.dirname(args.out))
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
