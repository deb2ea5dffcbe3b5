"""Exit codes of `reb-ray`, one meaning each, so that a script can tell a complete run from one
that left work undone without reading the output:

    0    done: every trial of the run was scored (`sweep`), re-probed (`regrade --rerun-probes`),
         every task measured and healthy (`tasks verify`), the rebuild reproducible (`env verify`)
    1    the command's own check failed: a task broken, an environment not reproducible, a
         pinned commit missing from a mirror, a stage impossible by construction
    2    usage: an unknown option or value (typer's usage error), a bad config file, a missing
         directory; one line on stderr, nothing run
    3    incomplete: some of the run's trials (or tasks, or verifications) were left undone: an
         infrastructure or hardware error, not launched once the budget was reached, no kept
         image to re-probe, a rebuild not attempted, the cluster's head lost mid-sweep. The last
         line of the output says how many and why; running the same command again resumes
    130  interrupted (Ctrl-C): finished trials are saved

A run with both a failed check and undone work exits 1: a definite failure outranks a gap.
The same table is docs/exit-codes.md, and `reb-ray --help` prints it.
"""

from __future__ import annotations

OK = 0
FAILED = 1
USAGE = 2
INCOMPLETE = 3  # also reb_ray.orchestrators.head_watch.HEAD_LOST_EXIT: a lost head leaves trials undone
INTERRUPTED = 130

#: The table as `reb-ray --help` shows it (click rewraps a paragraph unless it starts with \b).
HELP_TABLE = ("\b\nExit codes (docs/exit-codes.md):\n"
              "  0    done: every trial scored, re-probed or verified\n"
              "  1    a check failed (a broken task, not reproducible, a missing commit)\n"
              "  2    usage error (typer's), bad input; nothing run\n"
              "  3    incomplete: some trials left as infrastructure errors or skipped; the last line counts them\n"
              "  130  interrupted")


def incomplete_line(undone: dict[str, int], noun: str = "trial") -> str | None:
    """The last line of a run that left work undone, or None when `undone` (why -> how many)
    counts nothing: `incomplete: 3 of the run's trials not scored (2 infrastructure error,
    1 not launched: budget)`."""
    parts = {why: n for why, n in undone.items() if n}
    if not parts:
        return None
    total = sum(parts.values())
    return (f"incomplete: {total} {noun}(s) left undone ("
            + ", ".join(f"{n} {why}" for why, n in parts.items()) + f"); exit code {INCOMPLETE}")


def exit_code(failed: int = 0, undone: int = 0) -> int:
    """FAILED when any check failed, else INCOMPLETE when anything was left undone, else OK."""
    return FAILED if failed else INCOMPLETE if undone else OK
