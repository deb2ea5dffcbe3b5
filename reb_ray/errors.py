"""User-facing errors: each carries one line that names what is wrong and how to fix it; and
`first_line`, any exception's message cut to one line."""

from __future__ import annotations


class RebRayError(Exception):
    """An error whose message is a single line fit to print to the user as-is."""


class DockerUnavailable(RebRayError):
    """The Docker daemon cannot be reached (infrastructure, never the agent's fault)."""


class ImageMissing(RebRayError):
    """The sandbox image for a profile has not been built on this node."""


class UnknownName(RebRayError):
    """A provider, profile or similar name is not one of the valid choices."""

    def __init__(self, kind: str, value: str, valid: list[str]) -> None:
        super().__init__(f"unknown {kind} {value!r}; valid: {', '.join(sorted(valid))}")


class UnsafeSandbox(RebRayError):
    """The local (non-isolated) sandbox was asked to run an untrusted agent."""


class InfraError(RebRayError):
    """A failure of the harness or the node, never the agent's: retried as a new attempt.

    `category` is one of the `infra_*` failure categories (infra_daemon, infra_clone,
    infra_disk_full, infra_sandbox, infra_toolbox, ...).
    """

    def __init__(self, category: str, message: str) -> None:
        super().__init__(message)
        self.category = category

    def __reduce__(self):  # picklable with its category (it may cross a Ray call)
        return type(self), (self.category, str(self))


def first_line(exc: BaseException, limit: int = 300) -> str:
    """`exc`'s message cut to one line for a row, a log line or a progress line: the first line
    of its text once surrounding blank space is dropped, at most `limit` characters; its type
    name when it has no text. (A multi-line error, e.g. one raised inside a Ray task, would
    otherwise spill its traceback into a one-line field.)"""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:limit]
