"""`command`: any CLI agent, run from its spec's argv template inside the sandbox.

The generic kind, like the paper's runners.json: no Python needed to plug in an agent.

    [agents.my-cli]
    kind = "command"
    command = ["my-agent", "--prompt-file", "{prompt_file}", "--repo", "{repo_root}", "--report", "{report_path}"]
    report_mode = "output"        # "file" (default): the agent writes {report_path} itself
    key_env = "MY_AGENT_KEY"

The prompt (reb_ray.agents.prompt) is written to `{prompt_file}` in the sandbox; the
command runs in the repository root with the toolchain's bin/ first on PATH (the agent phase
only), the spec's `env`, and the agent timeout; `extra_args` are appended.

With `base_url` the agent is an LLM agent: the trial registers it with the node's metering
proxy, which relays its requests to `base_url` with the real key (tokens, cost and failures
are metered as for the CLI kinds). The sandbox sees the proxy's URL as `{llm_base_url}` (with
`/v1` when `base_url` ends in it, so the agent's client is configured as it would be for the
vendor), in the argv and in `env` values, and the trial's stand-in key in `key_env`. A
`command` spec without `base_url` has no key at all (AgentSpec refuses `key_env` there).

In `output` mode the report is the last JSON object the agent printed (its last line that is a
JSON object, else the last complete object in its output), which the runner writes to the
report path: the row's `report_source` is then `forced_from_output`.
"""

from __future__ import annotations

import json
import posixpath
import time

from reb_ray.agents.base import Agent, AgentContext, AgentRun
from reb_ray.sandbox.base import SYSTEM_PATH
from reb_ray.sandbox import Sandbox

#: Bytes at the end of the output searched for the report in `output` mode.
REPORT_SEARCH_BYTES = 256 * 1024


class CommandAgent(Agent):
    """Runs `spec.command`; see the module docstring. Not trusted (no local sandbox by default)."""

    name = "command"
    uses_toolchain = True

    @property
    def uses_llm(self) -> bool:  # type: ignore[override]
        """An LLM agent (metered through the node's proxy) exactly when its spec names `base_url`."""
        return self.spec is not None and self.spec.base_url is not None

    def run(self, sandbox: Sandbox, ctx: AgentContext) -> AgentRun:
        assert self.spec is not None and ctx.prompt is not None, "get_agent sets the spec; run_trial the prompt"
        started = time.monotonic()
        prompt_file = posixpath.normpath(f"{ctx.repo_dir}/../.reb-ray-agent/prompt.md")
        sandbox.write_bytes(prompt_file, ctx.prompt.text.encode())
        llm_url, llm_env = None, {}
        if ctx.llm is not None:
            llm_url = ctx.llm.base_url + ("/v1" if (self.spec.base_url or "").rstrip("/").endswith("/v1") else "")
            llm_env = {self.spec.key_env: ctx.llm.api_key} if self.spec.key_env else {}
        argv = self.spec.render_command(prompt_file, ctx.repo_dir, ctx.report_path, llm_url) + list(self.spec.extra_args)
        path = f"{ctx.toolchain}/bin:{SYSTEM_PATH}" if ctx.toolchain else SYSTEM_PATH
        env = {**self.spec.render_env(llm_url), **ctx.env, **llm_env, "PATH": path}
        result = sandbox.exec(argv, timeout=ctx.timeout_s, env=env, workdir=ctx.repo_dir)
        run = AgentRun.from_exec(result, ctx.timeout_s, started)
        if self.spec.report_mode == "output":
            report = last_json_object(result.output)
            if report is not None:
                sandbox.write_bytes(ctx.report_path, (json.dumps(report, indent=2) + "\n").encode())
                run.report_source = "forced_from_output"
        run.wall_time_s = time.monotonic() - started
        return run


def last_json_object(output: str) -> dict | None:
    """The report an agent printed: its last line that is a JSON object, else the last complete
    (outermost) JSON object in the last REPORT_SEARCH_BYTES of `output`; None when there is none."""
    text = output[-REPORT_SEARCH_BYTES:]
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    decoder, best, best_span = json.JSONDecoder(), None, (-1, 0)
    start = text.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            value, end = None, -1
        # The latest-ending object wins; of those, the outermost (earliest start).
        if isinstance(value, dict) and end > best_span[0]:
            best, best_span = value, (end, start)
        start = text.find("{", start + 1)
    return best
