"""Installed distributions and start-up code against what was published: pure rules.

The in-sandbox probe (probes/installed_files.py, run by the image's python3 after the agent's
processes were stopped) hashes what is installed on the reported interpreter's import path; the
harness reads the published artifacts of the same names and versions from outside the sandbox
(reb_ray.probing.published); `judge` compares the two into the check's record (`summary`), which
the probe phase stores with the start-up, C0 and command-stage records so `reb-ray regrade`
grades the same. Each distribution gets a status:

- `verified`: every file the published artifact lists has its published hash (byte-compiled
  caches and the installer's own files left out: RECORD, INSTALLER, REQUESTED,
  direct_url.json, and scripts, whose first line pip rewrites), and no code file (.py, .so,
  .pth) lies among its packages that the artifact lacks. Debian's packages are checked against
  the md5 sums dpkg recorded (`source` "dpkg:<package>").
- `modified`: some of its files differ from the artifact that matches it best, or code was
  added into its packages; the files are named (at most MAX_FILES).
- `unmatched`: no published artifact matches: the index knows no such name and version, or
  none of the artifact's files is installed with its hash (a hand-written `*.dist-info` for a
  stub). It owns nothing.
- `unverifiable`: it cannot be checked, and that is no failure: built from local source or a
  VCS checkout (PEP 610 `direct_url.json`), only an sdist published for that version (its
  file and sha256 are recorded), or no index reachable and no local artifact.

Top-level modules of a site directory that no metadata directory names are `loose` (unowned).
Start-up code (a `.pth` file with an executable `import` line, `sitecustomize`,
`usercustomize`) is `verified` when a verified distribution's artifact lists that file with its
hash, or Debian's database does, or, for setuptools' editable-install finder of the repository
under test, when it is setuptools' published template with every path inside the repository
(reb_ray.grading.editable); otherwise it is `unverified`, with the reason.

A command stage (`stage_problems`) that imported, in any interpreter of the stage (the witness's
module lists), or whose repository imports (C0's resolved files), a module from a modified
distribution fails as `dist_modified`; one that imported a module from a site
directory that no verified (or unverifiable) distribution owns fails as `unowned_module`; a
stage whose interpreter processes an unverified start-up hook fails as `startup_hook`, the hook
named. All three are the agent's. C0 counts a module resolved to a modified, unmatched or loose
entry as unowned (`c0_unowned`).
"""

from __future__ import annotations

import posixpath
from typing import Any

from reb_ray.grading.editable import judge_finder

VERIFIED, MODIFIED, UNMATCHED, UNVERIFIABLE = "verified", "modified", "unmatched", "unverifiable"
DIST_MODIFIED, UNOWNED_MODULE, STARTUP_HOOK = "dist_modified", "unowned_module", "startup_hook"
#: Files named per distribution at most.
MAX_FILES = 20
#: Metadata files an installer writes itself: never compared.
_INSTALLER_FILES = ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json", "RECORD.jws", "RECORD.p7s")
_CODE = (".py", ".so", ".pth", ".pyd")


def _skip(path: str) -> bool:
    parts = path.split("/")
    if path.startswith("..") or "__pycache__" in parts or path.endswith((".pyc", ".pyo")):
        return True
    if len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] in _INSTALLER_FILES:
        return True
    return len(parts) >= 2 and parts[0].endswith(".data") and parts[1] == "scripts"


def compare(files: dict[str, str | None], published: dict[str, str]) -> dict[str, Any]:
    """Installed `files` ({path relative to the site directory: "sha256=..." or None when
    listed but absent}) against a published RECORD: {"matched": n, "modified": [...], "added":
    [...], "missing": [...], "compared": n}."""
    matched, modified, missing = 0, [], []
    compared = 0
    for path, digest in published.items():
        if _skip(path) or not digest:
            continue
        compared += 1
        got = files.get(path)
        if got is None:
            missing.append(path)
        elif got == digest:
            matched += 1
        else:
            modified.append(path)
    added = sorted(p for p in files if p not in published and not _skip(p) and p.endswith(_CODE)
                   and files.get(p) is not None)
    return {"matched": matched, "modified": sorted(modified), "added": added, "missing": sorted(missing),
            "compared": compared}


def linux_forms(tags) -> set[str]:
    """`tags` ("py-abi-platform") with every Linux platform (manylinux*, musllinux*, linux) of an
    architecture written as `linux_<arch>`: the tags a wheel's WHEEL file and its file name may
    give differently for one artifact."""
    out = set()
    for tag in tags or ():
        py, _, rest = str(tag).partition("-")
        abi, _, plat = rest.partition("-")
        if plat.startswith(("manylinux", "musllinux", "linux_")):
            arch = plat.split("_", 3)[-1] if plat.startswith(("manylinux_", "musllinux_")) else plat.split("_", 1)[-1]
            out.add(f"{py}-{abi}-linux_{arch}")
    return out


def _local_build(dist: dict) -> str | None:
    """Why `dist` was built locally (PEP 610), or None."""
    direct = dist.get("direct_url") or {}
    url = str(direct.get("url") or "")
    if direct.get("editable"):
        return f"editable install of {url}"
    if direct.get("dir"):
        return f"built from the directory {url}"
    if direct.get("vcs"):
        return f"built from a VCS checkout {url}"
    if url and not url.split("#")[0].endswith(".whl"):
        digest = direct.get("archive_hash")
        return f"built from the archive {url}" + (f" ({digest})" if digest else "")
    return None


def judge_dist(dist: dict, lookup: dict | None) -> dict[str, Any]:
    """One distribution's verdict (module docstring) from the probe's entry `dist` and the
    harness's `lookup`: {"candidates": [{"artifact": file name, "source": where, "record":
    {path: hash}}], "index": "ok" | "unreachable", "sdists": [[file name, sha256]]}."""
    out = {"name": dist.get("name"), "version": dist.get("version"), "dir": dist.get("dir"),
           "info": dist.get("info"), "tops": list(dist.get("tops") or []), "status": UNVERIFIABLE,
           "why": None, "source": None, "modified": [], "added": [], "missing": 0}
    if not dist.get("name") or not dist.get("version"):
        out.update(status=UNMATCHED, why="no name or version in its metadata")
        return out
    local = _local_build(dist)
    if local:
        out["why"] = local
        return out
    if str(dist.get("installer") or "").strip().lower() == "conda":
        out["why"] = "installed by conda (its package's paths.json is not compared)"
        return out
    if dist.get("kind") == "egg-info":
        out["why"] = "a legacy setup.py install (egg-info), built locally"
        return out
    lookup = lookup or {}
    candidates = [c for c in lookup.get("candidates") or [] if isinstance(c.get("record"), dict)]
    if not candidates:
        sdists = lookup.get("sdists") or []
        if sdists:
            out["why"] = "only an sdist is published: " + ", ".join(f"{f} (sha256 {h})" for f, h in sdists[:2])
        elif lookup.get("index") == "unreachable":
            out["why"] = "no local artifact and the index could not be reached"
        else:
            out.update(status=UNMATCHED, why=f"no published artifact of {dist['name']}=={dist['version']}")
        return out
    files = dist.get("files") or {}
    tags = set(dist.get("tags") or [])
    tagged = [c for c in candidates if tags & set(c.get("tags") or [])]
    if not tagged:
        # a wheel repaired after its build (auditwheel; PyTorch's, ray's) keeps its build's
        # `linux_x86_64` in WHEEL under a manylinux file name: verified when every file is that
        # artifact's, else judged as a local build (which also says linux_x86_64)
        same = [c for c in candidates if linux_forms(tags) & linux_forms(c.get("tags") or [])]
        for cand in same:
            got = compare(files, cand["record"])
            if got["matched"] and not got["modified"] and not got["added"]:
                out.update(status=VERIFIED, source=f"{cand.get('artifact')} ({cand.get('source')})",
                           missing=len(got["missing"]))
                return out
        return _built_locally(out, files, candidates)
    best = None
    for cand in tagged:
        got = compare(files, cand["record"])
        score = (len(got["modified"]) + len(got["added"]), -got["matched"])
        if best is None or score < best[0]:
            best = (score, cand, got)
    _, cand, got = best
    out["source"] = f"{cand.get('artifact')} ({cand.get('source')})"
    out["missing"] = len(got["missing"])
    if got["matched"] == 0 and not got["modified"]:
        out.update(status=UNMATCHED, why=f"none of the files of {cand.get('artifact')} is installed with its hash",
                   added=got["added"][:MAX_FILES])
    elif got["modified"] or got["added"]:
        out.update(status=MODIFIED, modified=got["modified"][:MAX_FILES], added=got["added"][:MAX_FILES],
                   why=f"{len(got['modified'])} file(s) differ from {cand.get('artifact')}, {len(got['added'])} added")
    else:
        out["status"] = VERIFIED
    return out


#: Files a build from source writes itself (so they differ from the published wheel's).
GENERATED = ("__config__.py", "version.py", "_version.py", "__about__.py", "_distributor_init.py", "_build_info.py")


def _built_locally(out: dict, files: dict, candidates: list[dict]) -> dict:
    """The verdict of a distribution whose wheel tags no published wheel of its release has:
    pip built it from the sdist. Its Python files must still be the release's (a build from
    source compiles extensions, it does not change `.py` files, but for the few it generates,
    GENERATED): one that differs is `modified`; none of them installed is `unmatched`; else
    `unverifiable`."""
    best = None
    for cand in candidates:
        record = {p: h for p, h in cand["record"].items() if p.endswith(".py") and p.rsplit("/", 1)[-1] not in GENERATED}
        got = compare({p: h for p, h in files.items() if p.endswith(".py")}, record)
        if best is None or (len(got["modified"]), -got["matched"]) < (len(best[1]["modified"]), -best[1]["matched"]):
            best = (cand, got)
    cand, got = best
    out["source"] = f"{cand.get('artifact')} ({cand.get('source')}), Python files only"
    if got["modified"]:
        out.update(status=MODIFIED, modified=got["modified"][:MAX_FILES],
                   why=f"built locally; {len(got['modified'])} Python file(s) differ from {cand.get('artifact')}")
    elif not got["matched"]:
        out.update(status=UNMATCHED, why=f"none of the Python files of {cand.get('artifact')} is installed with its hash")
    else:
        out.update(status=UNVERIFIABLE, why=f"built locally (no published wheel has its tags); its Python files are "
                                            f"those of {cand.get('artifact')}")
    return out


def _dpkg_dists(listing: dict) -> list[dict]:
    out = []
    for package, entry in sorted((listing.get("dpkg") or {}).items()):
        if not isinstance(entry, dict):
            continue
        by_dir: dict[str, list[str]] = {}
        for item in entry.get("tops") or []:
            directory, _, top = str(item).partition("\t")
            by_dir.setdefault(directory, []).append(top)
        for directory, tops in by_dir.items():
            modified = [p for p in entry.get("modified") or [] if str(p).startswith(directory.rstrip("/") + "/")]
            out.append({"name": f"dpkg:{package}", "version": None, "dir": directory, "info": None, "tops": sorted(tops),
                        "status": MODIFIED if modified else VERIFIED, "source": f"dpkg:{package} (md5sums)",
                        "why": f"{len(modified)} file(s) differ from dpkg's md5 sums" if modified else None,
                        "modified": [posixpath.relpath(p, directory) for p in modified[:MAX_FILES]], "added": [],
                        "missing": 0})
    return out


def own_files(listing: dict | None) -> dict | None:
    """`listing` with each distribution's files limited to its own: a file that another
    distribution of the same site directory lists in its RECORD, and this one does not, is left
    out of this one's files. The probe hashes every file below a distribution's top-level
    entries so that a file added into a package is seen; a namespace package shared by several
    distributions (`google/` of protobuf and googleapis-common-protos, `opentelemetry/`,
    CUDA torch's `nvidia/`) would otherwise count each one's files as code added to the others,
    and every honest install of them would be `modified`. The file stays judged: the
    distribution that lists it compares it with its own published RECORD (a real one that lists
    a planted file is `modified` for it, a hand-made one is `unmatched`). Idempotent."""
    if not isinstance(listing, dict) or not isinstance(listing.get("dists"), list):
        return listing
    listed_by: dict[tuple[Any, str], set[int]] = {}
    for i, dist in enumerate(listing["dists"]):
        if isinstance(dist, dict):
            for path in dist.get("record") or []:
                if isinstance(path, str):
                    listed_by.setdefault((dist.get("dir"), posixpath.normpath(path)), set()).add(i)
    dists = []
    for i, dist in enumerate(listing["dists"]):
        if isinstance(dist, dict) and isinstance(dist.get("files"), dict):
            listers = {path: listed_by.get((dist.get("dir"), path), set()) for path in dist["files"]}
            dist = {**dist, "files": {path: digest for path, digest in dist["files"].items()
                                      if i in listers[path] or not listers[path]}}
        dists.append(dist)
    return {**listing, "dists": dists}


def judge(listing: dict | None, lookups: dict[str, dict], templates: dict[str, dict] | None = None,
          repo_dir: str | None = None) -> dict[str, Any]:
    """The check's record from the probe's `listing` and `lookups` ({"<dir>/<info>": lookup});
    {"error": ...} when the probe left none. `templates` ({setuptools version: {"template",
    "source", "why"}}, read by the harness from setuptools' published wheels) and `repo_dir`
    (the repository under test) decide an editable install's finder hook
    (reb_ray.grading.editable.judge_finder); without them such a hook stays unverified."""
    if not isinstance(listing, dict):
        return {"error": "the installed-files probe left no record"}
    if listing.get("error"):
        return {"error": f"installed-files probe: {str(listing['error'])[:300]}"}
    listing = own_files(listing)
    dists = []
    for dist in listing.get("dists") or []:
        if not isinstance(dist, dict):
            continue
        if dist.get("kind") == "egg-info" and str(dist.get("dir") or "").startswith("/usr/"):
            continue  # Debian's python3-* packages: judged by dpkg below
        dists.append(judge_dist(dist, lookups.get(f"{dist.get('dir')}/{dist.get('info')}")))
    dists.extend(_dpkg_dists(listing))
    by_file = {}
    for dist_in, verdict in zip([d for d in listing.get("dists") or [] if isinstance(d, dict) and not (
            d.get("kind") == "egg-info" and str(d.get("dir") or "").startswith("/usr/"))], dists):
        by_file[dist_in.get("dir")] = by_file.get(dist_in.get("dir"), [])
        by_file[dist_in.get("dir")].append((dist_in.get("files") or {}, verdict))
    dpkg_tops = {(d["dir"], t): d for d in dists if str(d["name"]).startswith("dpkg:") for t in d["tops"]}
    loose = []
    for entry in listing.get("loose") or []:
        if not isinstance(entry, dict):
            continue
        owner = dpkg_tops.get((entry.get("dir"), entry.get("name")))
        if owner is None:
            loose.append({"dir": entry.get("dir"), "name": entry.get("name"), "entry": entry.get("entry")})

    def hook_owner(directory: str, rel: str, digest: str | None) -> tuple[str, str | None, str]:
        for files, verdict in by_file.get(directory, []):
            if rel in files:
                name = f"{verdict['name']} {verdict['version']}"
                if verdict["status"] == VERIFIED and files.get(rel) == digest:
                    return VERIFIED, name, f"installed by {name} as published"
                if verdict["status"] == UNVERIFIABLE:
                    return "unverified", name, f"its distribution {name} cannot be verified ({verdict['why']})"
                return "unverified", name, f"its distribution {name} is {verdict['status']}"
        top = rel.split("/")[0].split(".")[0]
        if (directory, top) in dpkg_tops and dpkg_tops[(directory, top)]["status"] == VERIFIED:
            return VERIFIED, dpkg_tops[(directory, top)]["name"], "installed by Debian's package"
        return "unverified", None, "no distribution owns it"

    hooks = []
    for pth in listing.get("pth") or []:
        if isinstance(pth, dict) and pth.get("exec_lines"):
            same_dir = [d for d in listing.get("dists") or [] if isinstance(d, dict) and d.get("dir") == pth.get("dir")]
            loose_here = [e for e in listing.get("loose") or [] if isinstance(e, dict) and e.get("dir") == pth.get("dir")]
            status, owner, why = judge_finder(pth, same_dir, templates, repo_dir, loose_here) or hook_owner(
                pth.get("dir"), pth.get("name"), pth.get("hash"))
            hooks.append({"kind": "pth", "path": posixpath.join(str(pth.get("dir")), str(pth.get("name"))),
                          "dir": pth.get("dir"), "status": status, "owner": owner, "why": why,
                          "lines": list(pth.get("exec_lines") or [])[:2]})
    for item in listing.get("customize") or []:
        if isinstance(item, dict):
            status, owner, why = hook_owner(item.get("dir"), item.get("rel"), item.get("hash"))
            deb = item.get("dpkg") if isinstance(item.get("dpkg"), dict) else None
            if owner is None and deb:
                owner = f"dpkg:{deb.get('package')}"
                status, why = ((VERIFIED, "installed by Debian's package") if deb.get("md5_ok") is True
                               else ("unverified", "differs from the md5 Debian's package recorded"))
            hooks.append({"kind": item.get("kind"), "path": posixpath.join(str(item.get("dir")), str(item.get("rel"))),
                          "dir": item.get("dir"), "status": status, "owner": owner, "why": why, "lines": []})
    return {"error": None, "site_dirs": list(listing.get("site_dirs") or []), "dists": dists, "loose": loose,
            "hooks": hooks, "hashed_files": listing.get("hashed_files"), "hashed_bytes": listing.get("hashed_bytes"),
            "probe_s": listing.get("duration_s")}


# -- reading the check's record


def _entry_of(path: str, summary: dict) -> tuple[str, str] | None:
    """(directory, first path component) of `path` when it lies in a directory the check read."""
    dirs = {d.get("dir") for d in summary.get("dists") or []} | set(summary.get("site_dirs") or [])
    for directory in sorted((d for d in dirs if isinstance(d, str)), key=len, reverse=True):
        if path.startswith(directory.rstrip("/") + "/"):
            return directory, path[len(directory.rstrip("/")) + 1:].split("/")[0]
    return None


def owner_of_file(path: str, summary: dict) -> dict | None:
    """The verdict of who owns the module file `path`: {"status", "name", "why"}; None when the
    file lies outside every directory the check read (not installed code it judged)."""
    where = _entry_of(path, summary)
    if where is None:
        if "/site-packages/" in path or "/dist-packages/" in path:
            return {"status": UNMATCHED, "name": None, "why": "outside the import path the harness checked"}
        return None
    directory, first = where
    module = first.split(".")[0]
    owners = [d for d in summary.get("dists") or [] if d.get("dir") == directory
              and (first in (d.get("tops") or []) or module in (d.get("tops") or []))]
    bad = [d for d in owners if d.get("status") in (MODIFIED, UNMATCHED)]
    good = [d for d in owners if d.get("status") in (VERIFIED, UNVERIFIABLE)]
    if any(d.get("status") == MODIFIED for d in bad):
        d = next(d for d in bad if d.get("status") == MODIFIED)
        return {"status": MODIFIED, "name": f"{d.get('name')} {d.get('version')}",
                "why": d.get("why"), "files": (d.get("modified") or []) + (d.get("added") or [])}
    if good and not bad:
        d = good[0]
        return {"status": d.get("status"), "name": f"{d.get('name')} {d.get('version')}", "why": d.get("why")}
    if bad:
        d = bad[0]
        return {"status": UNMATCHED, "name": f"{d.get('name')} {d.get('version')}", "why": d.get("why")}
    return {"status": UNMATCHED, "name": None, "why": "no distribution owns it"}


def stage_problems(summary: dict | None, witness: dict | None) -> tuple[str, str] | None:
    """(category, reason) when a command stage that succeeded must fail for what it ran
    (module docstring), else None. Nothing is judged without the check's record."""
    if not isinstance(summary, dict) or summary.get("error") or not isinstance(witness, dict):
        return None
    nonce = witness.get("nonce")
    records = [r for r in witness.get("records") or [] if isinstance(r, dict) and r.get("nonce") == nonce]
    # What the stage imported: the witness lists the modules whose import completed; a module
    # whose import ended the process is not among them, so the repository's own static imports
    # (C0's resolved files, `repo_imports`) count as imported too.
    imported = [(top, got.get("file") if isinstance(got, dict) else got)
                for record in records if isinstance(record.get("modules"), dict)
                for top, got in sorted(record["modules"].items())]
    repo_imports = summary.get("repo_imports") if isinstance(summary.get("repo_imports"), dict) else {}
    imported += sorted(repo_imports.items())
    modified, unowned = {}, {}
    for top, path in imported:
        if not isinstance(path, str):
            continue
        owner = owner_of_file(path, summary)
        if owner is None:
            continue
        if owner["status"] == MODIFIED:
            modified.setdefault(owner["name"], (top, owner.get("files") or []))
        elif owner["status"] == UNMATCHED:
            unowned.setdefault(top, (path, owner.get("why")))
    if modified:
        parts = [f"{name} (imported as {top}; {', '.join(files[:3]) or 'files differ'})"
                 for name, (top, files) in sorted(modified.items())]
        return DIST_MODIFIED, "imported installed code that differs from what was published: " + "; ".join(parts)[:400]
    if unowned:
        parts = [f"{top} from {path} ({why})" for top, (path, why) in sorted(unowned.items())]
        return UNOWNED_MODULE, "imported a module no verified distribution owns: " + "; ".join(parts)[:400]
    # The check read the reported interpreter's own import path: every hook there runs in it.
    hooks = [h for h in summary.get("hooks") or [] if isinstance(h, dict) and h.get("status") != VERIFIED]
    if hooks:
        text = "; ".join(f"{h.get('kind')} {h.get('path')} ({h.get('why')})" for h in hooks[:3])
        return STARTUP_HOOK, f"the interpreter runs start-up code the harness could not verify: {text}"[:500]
    return None


def apply_installed(graded: dict, witness: dict | None) -> dict:
    """`graded` ({status, failure_category, reason}) under the installed-code check stored in
    the witness record (`witness["installed"]`): a success that ran unverified installed code
    becomes the agent's failure (`stage_problems`)."""
    if graded.get("status") != "success" or not isinstance(witness, dict):
        return graded
    found = stage_problems(witness.get("installed"), witness)
    if found is None:
        return graded
    return {"status": "failure", "failure_category": found[0], "reason": f"command succeeded but {found[1]}"}


def unowned_by_check(import_owners: dict, summary: dict | None) -> list[str] | None:
    """Top-level modules whose resolving file (C0's `import_owners`) the check judges modified or
    unowned; None without the check's record."""
    if not isinstance(summary, dict) or summary.get("error") or not isinstance(import_owners, dict):
        return None
    out = []
    for name, got in import_owners.items():
        path = got.get("path") if isinstance(got, dict) else None
        if not isinstance(path, str) or got.get("owner") in ("repository", "stdlib"):
            continue
        owner = owner_of_file(path, summary)
        if owner is not None and owner["status"] in (MODIFIED, UNMATCHED):
            out.append(name)
    return sorted(out)


def row_columns(summary: dict | None) -> dict[str, Any]:
    """The trials-row columns of the check: dist_checked (distributions judged), dist_modified
    ("name version: file, ..." per modified one), dist_unmatched, dist_unverifiable ("name
    version (why)"), startup_hooks_unverified; all None without a record."""
    keys = ("dist_checked", "dist_modified", "dist_unmatched", "dist_unverifiable", "startup_hooks_unverified")
    if not isinstance(summary, dict) or summary.get("error"):
        return {k: None for k in keys}
    dists = [d for d in summary.get("dists") or [] if isinstance(d, dict)]

    def named(d: dict) -> str:
        return f"{d.get('name')} {d.get('version')}" if d.get("version") else str(d.get("name"))

    return {
        "dist_checked": len(dists),
        "dist_modified": [f"{named(d)}: {', '.join((d.get('modified') or []) + (d.get('added') or []))[:300]}"
                          for d in dists if d.get("status") == MODIFIED][:MAX_FILES],
        "dist_unmatched": ([f"{named(d)} ({d.get('why')})" for d in dists if d.get("status") == UNMATCHED]
                           + [f"{e.get('name')} ({e.get('dir')}/{e.get('entry')}: no distribution owns it)"
                              for e in summary.get("loose") or []])[:MAX_FILES],
        "dist_unverifiable": [f"{named(d)} ({d.get('why')})" for d in dists if d.get("status") == UNVERIFIABLE][:MAX_FILES],
        "startup_hooks_unverified": [f"{h.get('kind')} {h.get('path')} ({h.get('why')})"
                                     for h in summary.get("hooks") or [] if h.get("status") != VERIFIED][:MAX_FILES],
    }


__all__ = ["DIST_MODIFIED", "STARTUP_HOOK", "UNOWNED_MODULE", "apply_installed", "compare", "judge", "judge_dist",
           "owner_of_file", "row_columns", "stage_problems", "unowned_by_check"]
