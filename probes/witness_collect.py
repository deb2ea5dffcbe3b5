"""Witness collector (stdlib only, Python 3.6+): one stage's witness files into one record.

Usage: python3 witness_collect.py --dir DIR --nonce N --python PYTHON_PATH --repo REPO
       --commit COMMIT --prefix PREFIX --out FILE

Run by the image's /usr/bin/python3 after the stage's command ended, never by PYTHON_PATH. It
reads every `*.json` witness file in DIR (the hook's records, at most MAX_RECORDS, each at most
MAX_BYTES), describes PYTHON_PATH as the filesystem has it (realpath, symlink, ELF or script),
marks each repository file a record lists as `pinned` when its git blob hash is a blob of
COMMIT's tree (`git ls-tree -r`), and adds to each third-party module the distribution installed
in the directory it was imported from that lists it (null: none does). PREFIX is sys.prefix as PYTHON_PATH reported it before the
stage ("" when unknown). Grading is separate and pure (reb_ray.grading.witness). Writes one
JSON object to FILE (atomically):

    nonce, python_path, python_exists, python_is_symlink, python_realpath, python_kind
    ("elf" | "script" | "other" | "missing"), expected_prefix, pinned_known, records [...],
    records_total, unreadable (files that were not a JSON object), error
"""

import argparse
import json
import os
import subprocess
import sys

MAX_RECORDS = 256
MAX_BYTES = 1 << 20


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


def pinned_blobs(repo, commit):
    try:
        proc = subprocess.run(["git", "-c", "safe.directory=*", "-C", repo, "ls-tree", "-r", "--full-tree", commit],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    blobs = set()
    for line in proc.stdout.decode(errors="replace").splitlines():
        parts = line.split("\t", 1)[0].split()
        if len(parts) == 3 and parts[1] == "blob":
            blobs.add(parts[2])
    return blobs


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


def mark_pinned(records, blobs):
    for record in records:
        files = record.get("repo_files") if isinstance(record.get("repo_files"), list) else []
        main = record.get("main") if isinstance(record.get("main"), dict) else None
        for entry in files + ([main] if main else []):
            if isinstance(entry, dict):
                blob = entry.get("blob")
                entry["pinned"] = None if blobs is None else (isinstance(blob, str) and blob in blobs)


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
        blobs = pinned_blobs(args.repo, args.commit) if args.commit else None
        mark_pinned(records, blobs)
        mark_owners(records)
        result.update(records=records, records_total=total, unreadable=unreadable, pinned_known=blobs is not None)
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
