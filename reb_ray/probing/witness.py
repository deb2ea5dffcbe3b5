"""Host side of a command stage's witness: arm the hook before the stage, collect after it.

`arm` draws a fresh nonce (never shown to the agent: the agent's processes were all stopped
before the probe phase, and the toolbox holding the hook arrives only now), makes the stage's
witness directory under the toolbox, asks the reported interpreter (with no nonce in sight) for
its sys.prefix and its first site-packages directory on sys.path, and writes there one `.pth`
file, named with the nonce, whose single `import` line starts the toolbox's hook
(probes/witness/_reb_ray_witness.py) in every interpreter that processes that directory. The
stage's environment also gets the hook's directory first on PYTHONPATH with the nonce in
REB_RAY_WITNESS, for an interpreter whose site-packages could not be written (its
sitecustomize.py chains to the environment's own); with the local provider, whose interpreters
are the host's, only this. `collect` removes the `.pth` file, runs the
collector (probes/witness_collect.py) with the image's python3, and returns its record, which
reb_ray.grading.witness.grade_witness grades. Neither ever raises: a witness that could not be
armed or collected grades as missing, which fails only a stage that would otherwise succeed.
"""

from __future__ import annotations

import json
import logging
import posixpath
import secrets
import shlex
from dataclasses import dataclass, field

from reb_ray.grading.record_types import conform
from reb_ray.probing.facts import facts_env
from reb_ray.probing.record import run_json_probe
from reb_ray.sandbox import Sandbox

log = logging.getLogger(__name__)

WITNESS_ENV = "REB_RAY_WITNESS"
#: Seconds the reported interpreter may take to say its prefix and site-packages.
QUERY_TIMEOUT_S = 60
#: Seconds the collector may take (git ls-tree of the pinned commit dominates).
COLLECT_TIMEOUT_S = 180

# Run by the reported interpreter before the stage, from /, with a bare environment: its prefix
# and the first site-packages directory that is on its sys.path.
_QUERY = (
    "import os, site, sys\n"
    "dirs = [d for d in site.getsitepackages() if d in sys.path and os.path.isdir(d)]\n"
    "print('@@PREFIX ' + sys.prefix)\n"
    "print('@@SITE ' + (dirs[0] if dirs else ''))\n"
)

# $1 witness directory, $2 reported interpreter, $3 the .pth line, $4 the .pth file name, $5 the
# repository ("" for none); $SP the system PATH. Removes the repository's byte-code caches, then
# prints the interpreter's prefix and the .pth file it wrote (if any). An interpreter that finds
# a valid `__pycache__/<module>.pyc` runs it without opening the module's source, so the kernel's
# trace would show no pinned file opened (an honest agent that ran the code in its phase, or an
# earlier stage, leaves them), and the code it ran would be the cache's, not the pinned file's.
_ARM = r"""
out=$1 py=$2 line=$3 name=$4 repo=${5:-}
mkdir -p "$out" && chmod 1777 "$out" || exit 3
if [ -n "$repo" ] && [ -d "$repo" ]; then
  find "$repo" -name __pycache__ -type d -prune -exec rm -rf -- {} + 2>/dev/null
fi
info=$(cd / && env -i PATH="$SP" HOME=/root LC_ALL=C.UTF-8 timeout "$QT" "$py" -c "$QUERY" 2>/dev/null)
prefix=$(printf '%s\n' "$info" | sed -n 's/^@@PREFIX //p' | tail -n 1)
site=$(printf '%s\n' "$info" | sed -n 's/^@@SITE //p' | tail -n 1)
printf '@@PREFIX %s\n' "$prefix"
if [ -n "$name" ] && [ -n "$site" ] && [ -d "$site" ] && [ ! -e "$site/$name" ] && printf '%s\n' "$line" > "$site/$name"; then
  printf '@@PTH %s\n' "$site/$name"
fi
"""

# $1 the .pth file ("" for none), $2 witness directory, $3 reported interpreter; then the
# collector's argv. The image's python3 runs it (the reported interpreter only when none is left).
_COLLECT = r"""
pth=$1 dir=$2 rp=$3; shift 3
[ -n "$pth" ] && rm -f -- "$pth"
py=/usr/bin/python3; [ -x "$py" ] || py=$(command -v python3) || py=""; [ -n "$py" ] || py="$rp"
"$py" -I -S "$@"; rc=$?
rm -rf -- "$dir"
exit $rc
"""

#: The collected record's shape for the grader (reb_ray.grading.record_types.conform).
WITNESS_SHAPE = {"nonce": str, "python_path": str, "python_realpath": str, "python_kind": str,
                 "expected_prefix": str, "pinned_known": bool, "repo": str, "records": [dict], "records_total": int,
                 "unreadable": int, "error": str}


@dataclass
class Witness:
    """One stage's armed witness: its nonce, directory, `.pth` file (None: none written) and the
    reported interpreter's prefix as it told it (None: unknown)."""

    nonce: str
    out_dir: str
    hook_dir: str
    repo_dir: str
    pth: str | None = None
    prefix: str | None = None
    notes: list[str] = field(default_factory=list)

    def env(self, stage_env: dict[str, str]) -> dict[str, str]:
        """Variables the stage runs with: the hook's directory first on PYTHONPATH (before a
        PYTHONPATH the stage sets itself) and the nonce's configuration."""
        config = json.dumps({"nonce": self.nonce, "out": self.out_dir, "repo": self.repo_dir})
        own = stage_env.get("PYTHONPATH")
        return {"PYTHONPATH": f"{self.hook_dir}:{own}" if own else self.hook_dir, WITNESS_ENV: config}


def pth_line(nonce: str, out_dir: str, repo_dir: str, hook_dir: str) -> str:
    """The one `import` line of the witness `.pth` file (site.py executes lines that start with
    `import`); it never raises into the interpreter's start-up."""
    code = (f"try:\n d = {hook_dir!r}\n sys.path.insert(0, d)\n import _reb_ray_witness\n sys.path.remove(d)\n"
            f" _reb_ray_witness.start({nonce!r}, {out_dir!r}, {repo_dir!r}, 'pth')\nexcept Exception:\n pass\n")
    return f"import sys; exec({code!r})"


def arm(sandbox: Sandbox, toolbox: str, python_path: str, repo_dir: str) -> Witness:
    """Prepare one stage's witness in `sandbox` (see the module docstring). Never raises."""
    nonce = secrets.token_hex(16)
    witness = Witness(nonce, posixpath.join(toolbox, "witness-out", nonce), posixpath.join(toolbox, "probes", "witness"),
                      repo_dir)
    # The local provider's interpreters are the host's: never write into the host's site-packages.
    name = f"reb_ray_witness_{nonce[:16]}.pth" if sandbox.capabilities.own_interpreters else ""
    line = pth_line(nonce, witness.out_dir, repo_dir, witness.hook_dir)
    env = {"SP": facts_env()["PATH"], "QUERY": _QUERY, "QT": str(QUERY_TIMEOUT_S), **facts_env()}
    try:
        res = sandbox.exec(["sh", "-c", _ARM, "arm", witness.out_dir, python_path, line, name, repo_dir or ""],
                           timeout=QUERY_TIMEOUT_S + 30, env=env)
    except Exception as exc:  # noqa: BLE001 - a gone sandbox: the collect finds nothing, graded missing
        witness.notes.append(f"arm failed: {type(exc).__name__}: {exc}"[:200])
        return witness
    for text in res.output.splitlines():
        if text.startswith("@@PREFIX ") and text[9:].strip():
            witness.prefix = text[9:].strip()
        elif text.startswith("@@PTH "):
            witness.pth = text[6:].strip()
    if not res.ok:
        witness.notes.append(f"arm exited {res.exit_code}")
    return witness


def collect(sandbox: Sandbox, toolbox: str, witness: Witness, python_path: str, commit: str | None) -> dict | None:
    """The stage's collected witness record (conformed for the grader), or None. Never raises."""
    script = posixpath.join(toolbox, "probes", "witness_collect.py")

    def argv(out: str) -> list[str]:
        return ["sh", "-c", _COLLECT, "collect", witness.pth or "", witness.out_dir, python_path, script,
                "--dir", witness.out_dir, "--nonce", witness.nonce, "--python", python_path,
                "--repo", witness.repo_dir, "--commit", commit or "", "--prefix", witness.prefix or "", "--out", out]

    data, result = run_json_probe(sandbox, "witness", toolbox, argv, COLLECT_TIMEOUT_S, facts_env())
    if data is None:
        log.warning("witness collector left no record: %s", shlex.quote((result.output if result else "")[-300:]))
        return None
    if witness.notes:
        data["notes"] = witness.notes
    return conform(data, WITNESS_SHAPE)
