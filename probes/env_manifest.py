"""Environment manifest probe (stdlib only): what an interpreter's environment is made of.

Usage: python3 env_manifest.py PYTHON_PATH REPO_DIR [CHANGED_PATHS_FILE]

Run with the sandbox image's own python3 (so it answers even when the reported interpreter is
broken); it asks PYTHON_PATH only for its sys.prefix, version and sys.path (`-I`: the user's
PYTHON* variables and user site are ignored, as in the probes). Prints one JSON object:

- interpreter: path, realpath, version, implementation, prefix, base_prefix, sys_path, venv
  (prefix != base_prefix), pyvenv_cfg (the prefix's pyvenv.cfg text, null when none), error
  (why it did not answer, else null);
- distributions: one per dist-info / egg-info directory on sys.path, the first of a name wins
  (later ones are listed with shadowed true): name, version, installer (the INSTALLER file:
  pip, uv, conda, ...), requested (pip's REQUESTED marker), location, and source, from PEP 610's
  direct_url.json where there is one: {kind: vcs|editable|local_dir|wheel_file|archive_url,
  url, vcs, commit_id, hash}; {kind: index} for an installer's download with no direct_url.json;
  {kind: egg_link} for a legacy `setup.py develop`; null when unknown;
- conda: for a prefix holding conda-meta/, its packages (name, version, build, channel, url,
  sha256/md5) and the sibling environments of its installation, else null;
- dpkg: {"pkg:arch": version} of every installed system package (/var/lib/dpkg/status), or null;
- activation: the files an environment is activated by, each path with sha256 and size where
  it exists (the prefix's bin/activate and pyvenv.cfg, conda activate.d scripts, the shell
  start-up files of root and /etc/profile.d);
- changed: for CHANGED_PATHS_FILE (one absolute path a line: what the container's filesystem
  diff says was added or changed), {path: [files, bytes]} of the regular files under each group
  (the path's first three components), sizes by lstat, symlinks counted as 0 bytes.
"""

import hashlib
import json
import os
import subprocess
import sys
from email.parser import HeaderParser

QUERY = ("import json, sys, platform; print(json.dumps({'version': platform.python_version(), "
         "'implementation': sys.implementation.name, 'prefix': sys.prefix, 'base_prefix': sys.base_prefix, "
         "'exec_prefix': sys.exec_prefix, 'sys_path': sys.path}))")
HASH_LIMIT = 1 << 20  # activation files larger than this are listed without a hash
ACTIVATION_FIXED = ("/root/.bashrc", "/root/.profile", "/root/.bash_profile", "/etc/bash.bashrc", "/etc/environment",
                    "/etc/profile", "/root/.condarc", "/etc/pip.conf", "/root/.config/pip/pip.conf",
                    "/root/.pip/pip.conf")


def ask_interpreter(python):
    try:
        proc = subprocess.run([python, "-I", "-c", QUERY], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, "%s: %s" % (type(exc).__name__, exc)
    if proc.returncode != 0:
        return None, "exit %d: %s" % (proc.returncode, proc.stderr.decode(errors="replace")[-300:])
    try:
        return json.loads(proc.stdout.decode(errors="replace").strip().splitlines()[-1]), None
    except (ValueError, IndexError):
        return None, "unreadable answer"


def read_text(path, limit=1 << 20):
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return None


def source_of(meta_dir, installer):
    """The source of one installed distribution (see the module docstring)."""
    direct = read_text(os.path.join(meta_dir, "direct_url.json"))
    if direct is not None:
        try:
            info = json.loads(direct)
        except ValueError:
            info = None
        if isinstance(info, dict):
            url = info.get("url")
            if isinstance(info.get("vcs_info"), dict):
                vcs = info["vcs_info"]
                return {"kind": "vcs", "url": url, "vcs": vcs.get("vcs"), "commit_id": vcs.get("commit_id"),
                        "requested_revision": vcs.get("requested_revision")}
            if isinstance(info.get("dir_info"), dict):
                editable = bool(info["dir_info"].get("editable"))
                return {"kind": "editable" if editable else "local_dir", "url": url}
            if isinstance(info.get("archive_info"), dict):
                archive = info["archive_info"]
                hashes = archive.get("hashes") if isinstance(archive.get("hashes"), dict) else {}
                digest = ("sha256=" + hashes["sha256"]) if "sha256" in hashes else archive.get("hash")
                kind = "wheel_file" if str(url).endswith(".whl") and str(url).startswith("file:") else "archive_url"
                return {"kind": kind, "url": url, "hash": digest}
    if installer in ("pip", "uv", "poetry", "pdm"):
        return {"kind": "index"}
    return None


def distributions(sys_path):
    found, seen = [], set()
    for entry in sys_path:
        if not entry or not os.path.isdir(entry):
            continue
        try:
            names = sorted(os.listdir(entry))
        except OSError:
            continue
        for name in names:
            full = os.path.join(entry, name)
            if name.endswith(".egg-link"):
                target = (read_text(full) or "").splitlines()
                found.append({"name": name[:-len(".egg-link")], "version": None, "installer": None, "requested": None,
                              "location": entry, "shadowed": False,
                              "source": {"kind": "egg_link", "url": "file://" + target[0] if target else None}})
                continue
            if not (name.endswith(".dist-info") or name.endswith(".egg-info")):
                continue
            meta_file = os.path.join(full, "METADATA" if name.endswith(".dist-info") else "PKG-INFO")
            if not os.path.isdir(full):
                meta_file = full  # a single-file egg-info
            text = read_text(meta_file)
            if text is None:
                continue
            headers = HeaderParser().parsestr(text, headersonly=True)
            dist_name, version = headers.get("Name"), headers.get("Version")
            if not dist_name:
                continue
            installer = (read_text(os.path.join(full, "INSTALLER")) or "").strip() or None
            key = dist_name.lower().replace("_", "-").replace(".", "-")
            found.append({"name": dist_name, "version": version, "installer": installer,
                          "requested": os.path.exists(os.path.join(full, "REQUESTED")) if name.endswith(".dist-info") else None,
                          "location": entry, "shadowed": key in seen, "source": source_of(full, installer)})
            seen.add(key)
    return found


def conda(prefix):
    meta = os.path.join(prefix, "conda-meta")
    if not os.path.isdir(meta):
        return None
    packages = []
    for name in sorted(os.listdir(meta)):
        if not name.endswith(".json"):
            continue
        try:
            record = json.loads(read_text(os.path.join(meta, name)) or "")
        except ValueError:
            continue
        if isinstance(record, dict):
            packages.append({k: record.get(k) for k in ("name", "version", "build", "channel", "url", "sha256", "md5")})
    parent = os.path.dirname(prefix)
    root = os.path.dirname(parent) if os.path.basename(parent) == "envs" else prefix
    envs_dir = os.path.join(root, "envs")
    envs = sorted(os.path.join(envs_dir, e) for e in os.listdir(envs_dir)) if os.path.isdir(envs_dir) else []
    history = read_text(os.path.join(meta, "history"), limit=256 * 1024)
    return {"prefix": prefix, "root": root, "envs": [root] + envs, "packages": packages,
            "explicit_specs": [line[len("# update specs: "):] for line in (history or "").splitlines()
                               if line.startswith("# update specs: ")]}


def dpkg():
    text = read_text("/var/lib/dpkg/status", limit=64 << 20)
    if text is None:
        return None
    packages = {}
    for block in text.split("\n\n"):
        fields = {}
        for line in block.splitlines():
            if line[:1] not in (" ", "\t") and ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if fields.get("Package") and fields.get("Status", "").endswith(" installed"):
            packages["%s:%s" % (fields["Package"], fields.get("Architecture", ""))] = fields.get("Version")
    return packages


def file_entry(path):
    try:
        st = os.lstat(path)
    except OSError:
        return None
    entry = {"path": path, "size": st.st_size, "sha256": None}
    if (st.st_mode & 0o170000) == 0o100000 and st.st_size <= HASH_LIMIT:
        try:
            with open(path, "rb") as f:
                entry["sha256"] = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            pass
    return entry


def activation(prefix):
    candidates = list(ACTIVATION_FIXED)
    if prefix:
        candidates += [os.path.join(prefix, "bin", "activate"), os.path.join(prefix, "pyvenv.cfg")]
        for sub in ("activate.d", "deactivate.d"):
            folder = os.path.join(prefix, "etc", "conda", sub)
            if os.path.isdir(folder):
                candidates += [os.path.join(folder, n) for n in sorted(os.listdir(folder))]
    if os.path.isdir("/etc/profile.d"):
        candidates += [os.path.join("/etc/profile.d", n) for n in sorted(os.listdir("/etc/profile.d"))]
    entries = [file_entry(p) for p in candidates]
    return [e for e in entries if e is not None]


def group_of(path):
    parts = [p for p in path.split("/") if p]
    return "/" + "/".join(parts[:3])


def changed(list_file):
    groups = {}
    try:
        with open(list_file, encoding="utf-8", errors="replace") as f:
            paths = [line.rstrip("\n") for line in f if line.strip()]
    except OSError:
        return None
    for path in paths:
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if (st.st_mode & 0o170000) == 0o040000:
            continue  # directories: their files are listed themselves
        files_bytes = groups.setdefault(group_of(path), [0, 0])
        files_bytes[0] += 1
        if (st.st_mode & 0o170000) == 0o100000:
            files_bytes[1] += st.st_size
    return groups


def main(argv):
    python, repo = argv[1], argv[2]
    info, error = ask_interpreter(python)
    interp = {"path": python, "realpath": os.path.realpath(python), "error": error}
    if info is not None:
        interp.update(info)
        interp["venv"] = info["prefix"] != info["base_prefix"]
        interp["pyvenv_cfg"] = read_text(os.path.join(info["prefix"], "pyvenv.cfg"), limit=64 * 1024)
    prefix = info["prefix"] if info else None
    out = {
        "interpreter": interp,
        "repo_dir": repo,
        "distributions": distributions(info["sys_path"]) if info else [],
        "conda": conda(prefix) if prefix else None,
        "dpkg": dpkg(),
        "activation": activation(prefix),
        "changed": changed(argv[3]) if len(argv) > 3 else None,
    }
    sys.stdout.write(json.dumps(out, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv)
