"""The keep policy's default inside the test process.

Keeping an attempt's environment commits its container to an image: about 3 s of an idle
2-core machine per success, and 15 s or more while other trials run beside it, plus up to a
gigabyte of disk written. Keeping is the subject of the environment tests only, and they name
the policy they test; every other test that runs trials in this process gets `none` as the
default (`TEST_DEFAULT`). Sweeps started as the `reb-ray` command (the quick start, the CLI
and `ray up` tests) are other processes and keep the product's default (`PRODUCT_DEFAULT`).
"""

from __future__ import annotations

from contextlib import contextmanager

from reb_ray.models.sweep import OutputSettings, SweepConfig

#: The product's default, read before any test changes it.
PRODUCT_DEFAULT: str = OutputSettings.model_fields["keep_environments"].default
#: The default for sweeps and trials a test starts in its own process.
TEST_DEFAULT = "none"


def set_default(policy: str) -> None:
    """Make `policy` the default of `OutputSettings.keep_environments` (and so of every
    SweepConfig made afterwards without one) in this process."""
    OutputSettings.model_fields["keep_environments"].default = policy
    OutputSettings.model_rebuild(force=True)
    SweepConfig.model_rebuild(force=True)


@contextmanager
def product_default():
    """Within the block, the product's own default applies (a test of that default)."""
    before = OutputSettings.model_fields["keep_environments"].default
    set_default(PRODUCT_DEFAULT)
    try:
        yield
    finally:
        set_default(before)
