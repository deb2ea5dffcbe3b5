"""analysis.plots: the figures show the analysis' numbers, and PNGs get deterministic names
and bytes (numbers by hand from reb_ray/testing/synthetic.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis import plots  # matplotlib: the `plots` extra, which the test extra includes
from analysis.analyze import analyze_run

from reb_ray.testing.synthetic import write_fixture


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    return analyze_run(write_fixture(tmp_path_factory.mktemp("fixture") / "run"))


def test_pyramid_bars_are_the_rates_with_their_intervals(analysis):
    fig = plots.pyramid(analysis, "syn")
    (ax,) = fig.axes
    bars = {c.get_label(): c for c in ax.containers if hasattr(c, "errorbar")}
    assert sorted(bars) == ["frugal", "spender", "weak"]
    heights = [p.get_height() for p in bars["frugal"].patches]
    # frugal C1 3/8, C2 7/12, C3 3/10, C4 1/6, C5 10/12
    assert heights == pytest.approx([3 / 8, 7 / 12, 3 / 10, 1 / 6, 10 / 12])
    segments = bars["frugal"].errorbar.lines[2][0].get_segments()
    for seg, stage in zip(segments, plots.PYRAMID_STAGES):
        interval = analysis.stats.stage("syn", "frugal", stage).interval
        assert (seg[0][1], seg[1][1]) == pytest.approx((interval.low, interval.high))
    plots._pyplot().close(fig)


def test_cost_success_draws_the_frontier_and_names_the_unpriced(analysis):
    fig = plots.cost_success(analysis, "syn")
    c1 = fig.axes[0]
    points = sorted(float(v) for coll in c1.collections for o in coll.get_offsets() for v in o)
    assert points == pytest.approx(sorted([0.02, 0.375, 0.40, 0.375]))  # $/trial, C1 rate; weak has no price
    assert len([o for coll in c1.collections for o in coll.get_offsets()]) == 2
    (frontier,) = [line for line in c1.get_lines() if line.get_label() == "Pareto frontier"]
    assert (list(frontier.get_xdata()), list(frontier.get_ydata())) == (pytest.approx([0.02]), [0.375])
    assert any(t.get_text() == "unknown: weak" for t in c1.texts)
    plots._pyplot().close(fig)


def test_failures_stack_every_non_success(analysis):
    fig = plots.failures(analysis, "syn")
    (ax,) = fig.axes
    tops: dict[str, float] = {}
    for patch in ax.patches:
        x = round(patch.get_x() + patch.get_width() / 2)
        tops[x] = max(tops.get(x, 0), patch.get_y() + patch.get_height())
    # frugal: C0 7 + C1 5 + C2 5 + C3 7 + C4 5 + C5 2 (categories are agents in x order)
    assert [tops[0], tops[1]] == [31, 31]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "insufficient_hardware (hardware)" in labels and "infra_assets_missing (infra)" in labels
    plots._pyplot().close(fig)


def test_heatmap_values_are_the_highest_stage_reached(analysis):
    agents, tasks, values = plots.highest_stages(analysis, "syn")
    assert agents == ["frugal", "spender", "weak"] and tasks == ["t1", "t2", "t3", "t4", "t5", "t6"]
    # frugal t1: SSSS -> 4, SSSF -> 3; t2: SSSH -> 3, FSFH -> 2; t3: FSFF twice -> 2; t5: -FF- -> 0
    assert values[0][:3] == [3.5, 2.5, 2.0] and values[0][4] == 0.0
    assert values[2][0] == 2.0  # weak t1: FSFF twice


def test_write_plots_names_and_bytes_are_deterministic(analysis, tmp_path):
    first = plots.write_plots(analysis, tmp_path / "a")
    assert [p.name for p in first] == ["syn-pyramid.png", "syn-cost_success.png", "syn-failures.png", "syn-heatmap.png"]
    second = plots.write_plots(analysis, tmp_path / "b")
    for a, b in zip(first, second):
        data = a.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
        assert data == b.read_bytes()


def test_plot_path():
    assert plots.plot_path(Path("d"), "s1", "heatmap") == Path("d/s1-heatmap.png")
    odd = plots.plot_path(Path("d"), "a/b c", "pyramid").name
    assert odd.startswith("a_b_c-") and odd.endswith("-pyramid.png") and odd != plots.plot_path(Path("d"), "a_b_c", "pyramid").name
    with pytest.raises(ValueError, match="unknown plot 'pie'"):
        plots.plot_path(Path("d"), "s1", "pie")


def test_cost_success_labels_never_overlap_or_leave_the_axes_and_unused_stages_are_not_drawn(tmp_path):
    """Two agents at the same point share one label; an agent at the top right of a panel has
    its label inside the axes; C3/C4, which no task applies, get no panel."""
    from reb_ray.testing.synthetic import trial, write

    attempts = []
    for agent, letters, cost in (("twin-a", "SS--", 0.5), ("twin-b", "SS--", 0.5), ("corner", "SS--", 2.0),
                                 ("cheap", "FF--", 0.1)):
        for task in ("t1", "t2"):
            attempts.append(trial(agent, task, 0, letters, input_tokens=10, output_tokens=10, cost_usd=cost))
    fig = plots.cost_success(analyze_run(write(tmp_path / "run", attempts)), "syn")
    assert [ax.get_title() for ax in fig.axes] == ["C1", "C2"]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        labels = [t for t in ax.texts if t.get_text() and not t.get_text().startswith("unknown")]
        assert sorted(t.get_text() for t in labels) == ["cheap", "corner", "twin-a, twin-b"]
        frame = ax.get_window_extent(renderer)
        boxes = [t.get_window_extent(renderer) for t in labels]
        for box in boxes:
            assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
        for i, one in enumerate(boxes):
            assert not any(one.overlaps(other) for other in boxes[i + 1:])
    plots._pyplot().close(fig)


def test_spend_counts_whole_tokens_and_a_single_task_is_not_plural(tmp_path):
    """The demo's shape: agents without an LLM record 0 tokens in every trial; the tokens axis
    still ticks at whole tokens only (never 0.01 of a token), and the paired picture of a stage
    one task applies to says "1 task"."""
    from reb_ray.testing.synthetic import trial, write

    attempts = [trial(agent, task, 0, letters, input_tokens=0, output_tokens=0, cost_usd=0.0)
                for agent, letters in (("heuristic", "S---"), ("noop", "F---"))
                for task in ("t1", "t2", "t3", "t4")]
    attempts += [trial(agent, "t5", 0, "-F--", input_tokens=0, output_tokens=0, cost_usd=0.0) for agent in ("heuristic", "noop")]
    run = analyze_run(write(tmp_path / "run", attempts))
    fig = plots.spend_distributions(run, "syn")
    fig.canvas.draw()
    tokens_axis = fig.axes[1]
    assert tokens_axis.get_xlabel() == "tokens per trial (input + output)"
    ticks = [t for t in tokens_axis.get_xticks() if tokens_axis.get_xlim()[0] <= t <= tokens_axis.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks)
    plots._pyplot().close(fig)
    fig = plots.paired_differences(run, "syn", "heuristic", "noop")
    notes = [t.get_text() for t in fig.axes[0].texts]
    assert any(n.startswith("4 tasks, p=") for n in notes) and any(n.startswith("1 task, p=") for n in notes), notes
    plots._pyplot().close(fig)
