"""Old spellings of options kept working after an option took its concept's one name.

Each concept has one option name across every command (tests/cli/test_option_names.py holds the
table); where a command used another name before, that name stays accepted as a hidden option
(not in --help) so that scripts written against it still run. Giving both is an error, since
they could disagree.
"""

from __future__ import annotations

from typing import Any

import typer


def old_name(flag: str, canonical: str) -> Any:
    """A hidden option `flag`, an old spelling of `canonical`."""
    return typer.Option(None, flag, hidden=True, help=f"Old spelling of {canonical}.")


def either(value: Any, old: Any, flag: str, canonical: str) -> Any:
    """The option's value from its canonical name or its old spelling `flag` (an empty list, a
    repeatable option not given, counts as not given). Raises RebRayError when both were given."""
    from reb_ray.errors import RebRayError

    if old in (None, []):
        return value
    if value not in (None, []):
        raise RebRayError(f"{flag} and {canonical} both given: {flag} is the old spelling of {canonical}; give one")
    return old
