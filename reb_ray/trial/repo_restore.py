"""The repository as pinned: put the agent's changes to tracked files back before the probes.

After the agent phase (its processes stopped, its changes to tracked files recorded as
`repo_modified`), the command stages must run the pinned repository's own code, so an edited
entrypoint cannot pass. `restore_pinned` moves HEAD and the index back to the pinned commit
when the agent moved them (a commit, a checkout or a reset: such edits never show in
`git status`), then checks out, from the pinned commit, every tracked path whose working-tree
content differs from it. Untracked files (build outputs, compiled extensions, an agent's new
files) stay. A path that already differed before the agent ran, and that the agent left as it
was, stays too: it is not the agent's change, and the stages saw it that way before.

The row records `repo_head_moved`, `repo_restored` (true: nothing differs from the pinned
commit any more, apart from those pre-existing paths; false: the restore failed or left paths
differing; null: unknown, e.g. no git repository) and `repo_restored_files`.
"""

from __future__ import annotations

from reb_ray.errors import RebRayError
from reb_ray.sandbox import Sandbox

#: Seconds the restore may take (a checkout of many files on a slow overlay filesystem).
RESTORE_TIMEOUT_S = 300.0

# $1 repository, $2 pinned commit; $KEEP: newline-separated paths left as they are. Prints
# "moved 0|1", "restored PATH" per path put back, "remaining N" (paths still differing, KEEP
# excluded); exits non-zero when git cannot do it. A newline in a path is not supported.
RESTORE_SCRIPT = r"""
cd "$1" || exit 3
pinned=$2
g() { git -c safe.directory='*' -c core.quotepath=off --literal-pathspecs "$@"; }
g rev-parse --git-dir >/dev/null 2>&1 || exit 8
head=$(g rev-parse -q --verify HEAD 2>/dev/null) || head=
if [ "$head" = "$pinned" ]; then echo "moved 0"; else echo "moved 1"; g reset -q "$pinned" >/dev/null 2>&1 || exit 4; fi
list=$(mktemp) || exit 5
g diff --name-only --no-renames "$pinned" > "$list.all" || { rm -f "$list" "$list.all"; exit 6; }
printf '%s\n' "$KEEP" | grep -vxF -f - "$list.all" | grep -v '^$' > "$list" || true
if [ -s "$list" ]; then
  while IFS= read -r p; do
    if [ -d "$p" ] && [ ! -L "$p" ]; then rm -rf -- "$p"; fi
  done < "$list"
  tr '\n' '\0' < "$list" | g checkout -q -f "$pinned" --pathspec-from-file=- --pathspec-file-nul 2>/dev/null
  sed 's/^/restored /' "$list"
fi
g diff --name-only --no-renames "$pinned" > "$list.after" || { rm -f "$list" "$list.all" "$list.after"; exit 7; }
left=$(printf '%s\n' "$KEEP" | grep -vxF -f - "$list.after" | grep -c .)
echo "remaining $left"
rm -f "$list" "$list.all" "$list.after"
"""


def restore_pinned(sandbox: Sandbox, repo_dir: str, pinned: str | None, keep: list[str]) -> dict:
    """Restore the repository at sandbox path `repo_dir` to commit `pinned`, leaving the paths
    in `keep` as they are. Returns the row's columns: repo_head_moved, repo_restored,
    repo_restored_files (all null when it could not run: no commit known, git broken, the
    sandbox gone). Never raises."""
    unknown = {"repo_head_moved": None, "repo_restored": None, "repo_restored_files": None}
    if not pinned:
        return unknown
    try:
        res = sandbox.exec(["/bin/sh", "-c", RESTORE_SCRIPT, "restore", repo_dir, pinned], timeout=RESTORE_TIMEOUT_S,
                           env={"KEEP": "\n".join(keep)})
    except RebRayError:
        return unknown
    lines = res.output.splitlines()
    moved = next((line[6:] == "1" for line in lines if line.startswith("moved ")), None)
    restored = sorted(line[9:] for line in lines if line.startswith("restored "))
    remaining = next((line[10:].strip() for line in lines if line.startswith("remaining ")), None)
    if not res.ok or remaining is None or not remaining.isdigit():
        return {"repo_head_moved": moved, "repo_restored": False if moved is not None else None,
                "repo_restored_files": restored if moved is not None else None}
    return {"repo_head_moved": moved, "repo_restored": int(remaining) == 0, "repo_restored_files": restored}


def unchanged_by_agent(before: dict[str, str] | None, after: dict[str, str] | None) -> list[str]:
    """Paths that already differed from the pinned commit before the agent phase and that the
    agent left in that same state (both states from reb_ray.trial.repo_state.tracked_state)."""
    if not before or after is None:
        return []
    return sorted(path for path, state in before.items() if after.get(path) == state)
