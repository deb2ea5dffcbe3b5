"""Agent-phase overhead of the Python-CLI runners (mini_swe_agent, nexau) beyond the scripted
session, median of N runs each, in real Docker sandboxes with the real toolchain.

Each run is the shortest real session: one shell tool call (`true`) and the end (mini's
submit command; NexAU's final message), through the metering proxy to the scripted endpoint.
Printed per kind (seconds, medians): the agent phase's wall time; of it, the CLI's exec (its
start-up, the model turns, the tool command) and the runner's own steps around it (writing
the config, reading the trajectory, forcing the report, removing its work directory); the
model turns as the proxy timed them; overhead = agent phase minus the model turns (the
scripted session's own time: the endpoint answers at once and `true` takes milliseconds).
Also the toolchain mount (slot open + detach + close), which the trial adds per agent phase.
nexau runs only when its part is installed (`reb-ray agents install --nexau-src DIR`).
Needs root and Docker. Usage: python benchmarks/llm_runners.py [N]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # reb_ray.testing.llm_session

from reb_ray.agents.toolchain import Toolchain  # noqa: E402
from reb_ray.agents.toolchain_mount import ToolchainSlot  # noqa: E402
from reb_ray.sandbox.docker.docker_client import connect  # noqa: E402
from reb_ray.sandbox.docker.image import require_image  # noqa: E402
from reb_ray.testing.llm_session import LlmSession  # noqa: E402

USAGE = {"input_tokens": 1000, "cached_input_tokens": 200, "output_tokens": 20}
SCRIPTS = {
    "mini_swe_agent": [{"kind": "tool", "command": "true", "usage": USAGE},
                       {"kind": "tool", "command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "usage": USAGE}],
    "nexau": [{"kind": "tool", "tool": "run_shell_command", "command": "true", "usage": USAGE},
              {"kind": "message", "text": "Done.", "usage": USAGE}],
}


class TimedSandbox:
    """Delegates to a sandbox and keeps each exec's (argv[0], seconds)."""

    def __init__(self, sandbox) -> None:
        self._sandbox, self.execs = sandbox, []

    def exec(self, cmd, *args, **kwargs):
        result = self._sandbox.exec(cmd, *args, **kwargs)
        self.execs.append((cmd[0] if isinstance(cmd, list) else cmd, result.duration_s))
        return result

    def __getattr__(self, name):
        return getattr(self._sandbox, name)


def median(values) -> float:
    return statistics.median(values)


def measure(kind: str, n: int, client, image: str, toolchain: Toolchain) -> None:
    walls, clis, model = [], [], []
    for _ in range(n):
        with LlmSession(client, image, {"kind": kind, "model": "gpt-5-mini"}, {"model": "gpt-5-mini", "turns": SCRIPTS[kind]},
                        timeout_s=300, toolchain=toolchain) as s:
            timed = TimedSandbox(s.sandbox)
            run = s.agent.run(timed, s.ctx)
            assert run.exit_code == 0 and run.limit is None, run.output[-2000:]
            walls.append(run.wall_time_s)
            clis.append(sum(d for argv0, d in timed.execs if argv0.endswith(("/bin/mini", "/bin/python"))))
            model.append(sum(r["duration_s"] for r in s.request_log()))
    print(f"{kind}: agent phase {median(walls):.2f} s (CLI exec {median(clis):.2f} s, runner steps "
          f"{median(w - c for w, c in zip(walls, clis)):.2f} s); model turns {median(model):.3f} s; "
          f"overhead beyond the scripted session {median(w - m for w, m in zip(walls, model)):.2f} s "
          f"(median of {n}; min {min(walls):.2f}, max {max(walls):.2f})")


def mount(n: int, toolchain: Toolchain) -> None:
    times = []
    for _ in range(n):
        start = time.monotonic()
        slot = ToolchainSlot(toolchain).open()
        slot.detach()
        slot.close()
        times.append(time.monotonic() - start)
    print(f"toolchain mount (open + detach + close): {median(times) * 1000:.0f} ms (median of {n})")


if __name__ == "__main__":
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    docker = connect()
    image = require_image(docker)
    toolchain = Toolchain.current()
    mount(runs, toolchain)
    for name in SCRIPTS:
        if name == "nexau" and not toolchain.installed("nexau"):
            print("nexau: not installed in the toolchain (reb-ray agents install --nexau-src DIR): not measured")
            continue
        measure(name, runs, docker, image, toolchain)
