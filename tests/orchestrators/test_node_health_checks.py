"""How long Ray takes to give up a node, on a user's cluster and in the fault tests.

The fault tests (tests/orchestrators/test_faults.py, test_partition.py) start their clusters with
`FAST_HEALTH_CHECKS`, so that a killed or cut-off raylet is declared dead in seconds; what they
test is what follows that verdict. The times docs/DECISIONS.md states for a user's cluster (a
SIGKILLed raylet seen dead about 15 s later, a silent one about 65 s later) come from the
installed Ray's own defaults, which reb-ray never changes: these tests pin those defaults and
that a cluster started without `health_checks` is given none of its own.
"""

from __future__ import annotations

import inspect

from reb_ray.testing.ray_cluster import FAST_HEALTH_CHECKS, ray_cluster


def test_rays_default_node_health_checks_are_the_documented_ones():
    from ray._raylet import Config

    # A check every 3 s, each given 10 s, dead after 5 failures in a row, the first after 5 s.
    assert (Config.health_check_initial_delay_ms(), Config.health_check_period_ms(), Config.health_check_timeout_ms(),
            Config.health_check_failure_threshold()) == (5000, 3000, 10000, 5)


def test_fast_health_checks_name_rays_own_settings_and_are_opt_in():
    from ray._raylet import Config

    # Every key is one of Ray's settings (a misspelt one would leave Ray's default in place silently).
    assert all(callable(getattr(Config, key, None)) for key in FAST_HEALTH_CHECKS), FAST_HEALTH_CHECKS
    # Still dead only after several checks failed in a row: a loaded raylet that answers late once lives.
    assert FAST_HEALTH_CHECKS["health_check_failure_threshold"] >= 3
    assert inspect.signature(ray_cluster).parameters["health_checks"].default is None
