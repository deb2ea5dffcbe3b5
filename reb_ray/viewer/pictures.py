"""The viewer's pictures: SVG drawn by matplotlib from the same analysis as `reb-ray report`.

Per sweep, for the overview: `rates` (each agent's success rate per stage with its 95%
interval: `analysis.plots.pyramid`), `frontier` (cost, or tokens where nothing is priced, per
trial against success rate, the Pareto frontier drawn: `analysis.plots.cost_success`) and
`spend` (agent time and tokens per trial as distributions: `analysis.plots.spend_distributions`);
for the compare page, `paired` (two agents' paired success differences per stage:
`analysis.plots.paired_differences`).

Drawn in a child process (`python -m reb_ray.viewer.pictures OUTPUT SWEEP [A B]`, one JSON
object {name: SVG text} on stdout, or {"error": ...}), for the reason the paper's table is
(reb_ray.viewer.summary): at 100,000 trials the analysis peaks at hundreds of MB, which the
server should not keep. Text stays text (`svg.fonttype = none`: smaller, and readable by a
screen reader), and the files carry no date, so the same rows give the same bytes. The SVG
holds no script; the server sends it with its own Content-Security-Policy.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

SWEEP_PICTURES = ("rates", "frontier", "spend")
PAIR_PICTURES = ("paired",)
PICTURES = SWEEP_PICTURES + PAIR_PICTURES


def available() -> bool:
    """Whether matplotlib is installed (the pictures' only optional part)."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def _svg(fig) -> str:
    import matplotlib.pyplot as plt

    buffer = io.StringIO()
    try:
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    finally:
        plt.close(fig)
    return buffer.getvalue()


def draw(output_dir: Path, sweep_id: str, pair: tuple[str, str] | None = None) -> dict[str, str]:
    """{picture name: SVG text} of sweep `sweep_id` under `output_dir`: SWEEP_PICTURES, or with
    `pair` (agents a, b) PAIR_PICTURES. Raises RebRayError for an unreadable run, a sweep with
    no scored trial, or an agent without one."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    matplotlib.rcParams["svg.fonttype"] = "none"
    matplotlib.rcParams["svg.hashsalt"] = "reb-ray"  # element ids the same from run to run
    from analysis import plots
    from analysis.analyze import analyze
    from analysis.outcomes import COLUMNS
    from reb_ray.errors import RebRayError
    from reb_ray.results.read import read_trials

    trials = read_trials(Path(output_dir), sweep_id, columns=list(COLUMNS))
    a = analyze(trials)
    if not plots._agents(a, sweep_id):
        raise RebRayError(f"sweep {sweep_id!r} has no scored trial to draw")
    if pair is not None:
        for agent in pair:
            if not a.stats.run.has_scored((sweep_id, agent)):
                raise RebRayError(f"agent {agent!r} has no scored trial in sweep {sweep_id!r}")
        return {"paired": _svg(plots.paired_differences(a, sweep_id, *pair))}
    return {"rates": _svg(plots.pyramid(a, sweep_id)), "frontier": _svg(plots.cost_success(a, sweep_id)),
            "spend": _svg(plots.spend_distributions(a, sweep_id))}


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 4):
        print("usage: python -m reb_ray.viewer.pictures OUTPUT SWEEP [AGENT_A AGENT_B]", file=sys.stderr)
        return 2
    from reb_ray.errors import RebRayError

    try:
        result = draw(Path(argv[0]), argv[1], (argv[2], argv[3]) if len(argv) == 4 else None)
    except RebRayError as exc:
        result = {"error": str(exc)}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
