"""The state of a repository's tracked files inside a sandbox, to tell what the agent changed.

`repo_modified` compares the state right after the repository entered the sandbox (before the
agent phase) with the state after it, so the agent is charged only for its own edits: a
tracked file that was already
missing or different before the agent ran is not charged to the agent, and one the agent
changed again, or put back, is.
"""

from __future__ import annotations

from reb_ray.errors import RebRayError
from reb_ray.sandbox import Sandbox, UnreadableFile

# Writes "HASH<TAB>PATH" to file $2 for each tracked file that differs from HEAD: the git blob
# hash of its current content, or "missing" when it is gone ("unreadable" when it cannot be
# hashed, e.g. a directory now stands there); prints "clean" and writes nothing when none
# differs. `-z` keeps paths unquoted (a newline in a path is not supported). A file, not
# stdout: an agent that rewrote every file would overflow the bounded exec output. Exits
# non-zero when git cannot read the repository.
STATE_SCRIPT = r"""
cd "$1" || exit 3
git -c safe.directory='*' status --porcelain -z --untracked-files=no --no-renames > "$2.z" || exit 4
if [ ! -s "$2.z" ]; then rm -f "$2.z"; echo clean; exit 0; fi
: > "$2" || exit 5
tr '\0' '\n' < "$2.z" | while IFS= read -r line; do
  path=${line#???}
  if [ -e "$path" ] || [ -L "$path" ]; then
    h=$(git -c safe.directory='*' hash-object -- "$path" 2>/dev/null) || h=unreadable
  else
    h=missing
  fi
  printf '%s\t%s\n' "$h" "$path"
done >> "$2"
rm -f "$2.z"
"""


def tracked_state(sandbox: Sandbox, repo_dir: str, timeout: float = 120) -> dict[str, str] | None:
    """Tracked files of the repository at sandbox path `repo_dir` that differ from its HEAD.

    Returns {path relative to the repository: blob hash of its content | "missing" |
    "unreadable"} (empty when the checkout equals HEAD), or None when git could not tell
    (not a repository, git broken, the sandbox gone). Never raises.
    """
    listing = f"{repo_dir.rstrip('/')}.reb-ray-state"  # beside the repository, never inside it
    try:
        result = sandbox.exec(["/bin/sh", "-c", STATE_SCRIPT, "repo-state", repo_dir, listing], timeout=timeout)
        if result.ok and result.output.strip() == "clean":  # the usual case: two round trips saved
            return {}
        data = sandbox.read_bytes(listing) if result.ok else None
        sandbox.exec(["rm", "-f", listing, f"{listing}.z"], timeout=60)
    except (RebRayError, FileNotFoundError, UnreadableFile):  # the agent may have planted a link or FIFO there
        return None
    return None if data is None else parse_state(data)


def parse_state(listing: bytes) -> dict[str, str]:
    """{path: blob hash | "missing" | "unreadable"} from STATE_SCRIPT's "HASH<TAB>PATH" lines."""
    state: dict[str, str] = {}
    for line in listing.decode(errors="replace").splitlines():
        digest, sep, path = line.partition("\t")
        if sep and path:
            state[path] = digest
    return state


def changed_since(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Paths whose state differs between `before` and `after` (both from `tracked_state`), sorted."""
    return sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))
