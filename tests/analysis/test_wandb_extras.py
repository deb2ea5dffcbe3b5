"""What a sweep's W&B run shows beyond its rows (analysis.wandb_extras), read from rows written
by the real sink: a Harbor sweep's reward numbers per agent, never C0..C5."""

from __future__ import annotations

import pytest

from analysis.wandb_extras import summary_and_plots

from .harbor_runs import SWEEP, write_harbor_run


def test_a_harbor_sweeps_summary_is_its_reward_table_and_unknown_stays_out(tmp_path):
    """The numbers of tests.analysis.harbor_runs, derived there by hand."""
    summary, plots = summary_and_plots(write_harbor_run(tmp_path / "run"), SWEEP, tmp_path / "plots")
    assert plots == {}
    assert summary["oracle/trials"] == 3 and summary["oracle/rewarded"] == 2
    assert summary["oracle/mean_reward"] == pytest.approx(0.75)
    assert summary["oracle/mean_reward_low"] <= 0.75 <= summary["oracle/mean_reward_high"]
    assert summary["oracle/agent_s"] == pytest.approx(40.0) and summary["oracle/cost_usd"] == 0.0
    assert summary["oracle/failed_hardware"] == 1 and summary["oracle/infra"] == 0
    assert summary["oracle/reward_passed"] == pytest.approx(2.0)
    assert summary["command/mean_reward"] == pytest.approx(1 / 3) and summary["command/cost_usd"] == pytest.approx(0.0123)
    assert "command/reward_passed" not in summary  # no rewarded command trial has the metric: unknown, not 0
    assert not any(key.endswith(("/c1_success", "/c0_missing_ratio")) for key in summary)
