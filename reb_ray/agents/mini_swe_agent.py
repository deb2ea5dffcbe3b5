"""`mini_swe_agent`: the pinned mini-swe-agent 2.x CLI (`mini`), headless, inside the sandbox.

It runs from the agent toolchain (`<toolchain>/bin/mini`, its own venv made with the image's
python: reb_ray.agents.toolchain) with its `local` environment, so every command the model
issues runs in our sandbox, in the repository root, under the sandbox's own PATH (the
toolchain is not on it). The runner writes a config file merged over mini's builtin
`mini.yaml` (whose observation and format-error templates it keeps):

- `agent`: our prompt (system part as the system message, task part as the task, plus how to
  end: mini's submit command), `mode: yolo` and `confirm_exit: false` (the CLI's `-y
  --exit-immediately`: no prompt ever), `step_limit` = the spec's max_turns (0: none),
  `cost_limit` = the spec's max_cost_usd (0: disabled; the proxy enforces the budget too);
- `environment`: `cwd` = the repository, a per-command timeout of COMMAND_TIMEOUT_S (mini's
  default of 30 s would cut off a pip install) capped by the agent phase's;
- `model`: litellm's `openai/<model>` against `ctx.llm.base_url + "/v1"` (OPENAI_BASE_URL,
  OPENAI_API_KEY = the trial's stand-in key), `cost_tracking: ignore_errors` (a model litellm
  cannot price is priced 0 and reported as unknown, not a crash); litellm's bundled price
  map is used (LITELLM_LOCAL_MODEL_COST_MAP: no download at start-up).

Afterwards its trajectory file (saved by mini after every step, so also after a timeout)
becomes the transcript (JSON Lines: one `info` line, then one line per message), the CLI's
own usage is the sum of each model response's `usage` and its cost the trajectory's
`instance_cost` (None when litellm could not price a call), `agent_version` is the
trajectory's `mini_version`, and `limit` says which limit ended it (`max_turns=N`,
`max_cost_usd=X`, or `agent_timeout_s=T`). The report is the agent's file; when it wrote
none, the last JSON object of its submission (the output after the submit line) or of its
last message is written there (`forced_from_output`).
"""

from __future__ import annotations

import json
import re
import time

from reb_ray.agents import runner_support as rs
from reb_ray.agents.base import Agent, AgentContext, AgentRun
from reb_ray.sandbox.base import SYSTEM_PATH
from reb_ray.sandbox import Sandbox

KIND = "mini_swe_agent"
SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"  # minisweagent/environments/local.py
#: Seconds one command of the agent may run (mini's own default is 30).
COMMAND_TIMEOUT_S = 1800
_BANNER = re.compile(r"mini-swe-agent version (\S+?)\.?\s*$", re.M)

_ENDING = f"""

## How to finish

When the report is written and you are done, run exactly `echo {SUBMIT}` as its own command
(nothing else in it). After that command you cannot continue.
"""


class MiniSweAgent(Agent):
    """Runs `mini` from the toolchain; see the module docstring. Not trusted."""

    name = KIND
    uses_toolchain = True
    uses_llm = True
    requires_model = True

    def config(self, ctx: AgentContext, trajectory: str, timeout_s: float) -> dict:
        """The config file's content (merged over mini.yaml by the CLI)."""
        assert ctx.prompt is not None and ctx.llm is not None
        max_cost = self.spec.max_cost_usd if self.spec is not None else None
        return {
            "run": {"task": ctx.prompt.task.rstrip() + _ENDING},
            "agent": {"system_template": rs.jinja_literal(ctx.prompt.system), "instance_template": "{{ task }}",
                      "mode": "yolo", "confirm_exit": False, "output_path": trajectory,
                      "step_limit": ctx.llm.max_turns or 0, "cost_limit": max_cost or 0.0},
            "environment": {"cwd": ctx.repo_dir, "timeout": max(1, min(COMMAND_TIMEOUT_S, int(timeout_s)))},
            "model": {"model_name": f"openai/{ctx.llm.model}", "cost_tracking": "ignore_errors"},
        }

    def run(self, sandbox: Sandbox, ctx: AgentContext) -> AgentRun:
        started = time.monotonic()
        llm = rs.require_llm(ctx, self.name, KIND, sandbox)
        assert ctx.prompt is not None and ctx.toolchain is not None, "run_trial sets the prompt and mounts the toolchain"
        work = rs.work_dir(ctx, KIND)
        trajectory, config_file = f"{work}/trajectory.json", f"{work}/config.yaml"
        timeout = rs.time_left(ctx, started)
        # JSON is YAML: no quoting rules of our own.
        sandbox.write_bytes(config_file, json.dumps(self.config(ctx, trajectory, timeout), indent=1).encode())
        env = rs.cli_env(self, ctx, {"PATH": SYSTEM_PATH, "OPENAI_BASE_URL": f"{llm.base_url}/v1",
                                     "OPENAI_API_KEY": llm.api_key, "MSWEA_CONFIGURED": "true",
                                     "MSWEA_GLOBAL_CONFIG_DIR": f"{work}/home", "MSWEA_CONFIG_DIR": work,
                                     "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
        argv = [f"{ctx.toolchain}/bin/mini", "-c", "mini.yaml", "-c", config_file, "-y", "--exit-immediately",
                "-o", trajectory, *(self.spec.extra_args if self.spec else [])]
        # cwd = the work dir: `-c mini.yaml` must resolve to the builtin file, never one in the repository.
        result = sandbox.exec(argv, timeout=timeout, env=env, workdir=work)
        run = AgentRun.from_exec(result, ctx.timeout_s, started)
        data = _load(rs.read_optional(sandbox, trajectory))
        info = data.get("info") or {}
        run.agent_version = info.get("mini_version") or _banner_version(result.output)
        run.reported_usage = reported_usage(data)
        run.transcript = transcript(data) if data else None
        if not result.timed_out:
            run.limit = self.limit_fired(info, ctx)
        if rs.force_report(sandbox, ctx.report_path, [info.get("submission"), _last_assistant_text(data)]):
            run.report_source = "forced_from_output"
        rs.remove_dir(sandbox, work)
        run.wall_time_s = time.monotonic() - started
        return run

    def limit_fired(self, info: dict, ctx: AgentContext) -> str | None:
        """`max_turns=N` or `max_cost_usd=X` when mini stopped on its step or cost limit."""
        if info.get("exit_status") != "LimitsExceeded":
            return None
        calls = (info.get("model_stats") or {}).get("api_calls")
        max_turns = ctx.llm.max_turns if ctx.llm else None
        if max_turns and isinstance(calls, int) and calls >= max_turns:
            return f"max_turns={max_turns}"
        max_cost = self.spec.max_cost_usd if self.spec else None
        return f"max_cost_usd={max_cost:g}" if max_cost else "LimitsExceeded"


def _load(raw: bytes | None) -> dict:
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _banner_version(output: str) -> str | None:
    match = _BANNER.search(output)
    return match.group(1) if match else None


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _responses(data: dict) -> list[dict]:
    """The raw model responses the trajectory keeps (each model message's `extra.response`,
    also those of calls that failed to parse)."""
    out = []
    for message in data.get("messages") or []:
        response = (message.get("extra") or {}).get("response") if isinstance(message, dict) else None
        if isinstance(response, dict):
            out.append(response)
    return out


def reported_usage(data: dict) -> dict | None:
    """mini-swe-agent's own figures from its trajectory: token sums of the responses' `usage`
    (Chat Completions fields: prompt_tokens incl. cached, completion_tokens incl. reasoning)
    and `cost_usd` = `info.model_stats.instance_cost`, None when any call went unpriced
    (litellm priced it 0). None when the trajectory holds no response."""
    responses = _responses(data)
    if not responses:
        return None
    sums: dict[str, int | None] = {}

    def add(field: str, value) -> None:
        value = _int(value)
        if value is not None:
            sums[field] = (sums.get(field) or 0) + value

    costs = []
    for message in data.get("messages") or []:
        extra = message.get("extra") if isinstance(message, dict) else None
        if isinstance(extra, dict) and isinstance(extra.get("response"), dict):
            costs.append(extra.get("cost"))
    for response in responses:
        usage = response.get("usage")
        if not isinstance(usage, dict):
            continue
        add("input_tokens", usage.get("prompt_tokens"))
        add("output_tokens", usage.get("completion_tokens"))
        prompt_details = usage.get("prompt_tokens_details") or {}
        completion_details = usage.get("completion_tokens_details") or {}
        add("cached_input_tokens", prompt_details.get("cached_tokens") if isinstance(prompt_details, dict) else None)
        add("reasoning_tokens", completion_details.get("reasoning_tokens") if isinstance(completion_details, dict) else None)
        add("cache_write_tokens", usage.get("cache_creation_input_tokens"))
    instance_cost = ((data.get("info") or {}).get("model_stats") or {}).get("instance_cost")
    priced = bool(costs) and all(isinstance(c, (int, float)) and c > 0 for c in costs)
    sums["cost_usd"] = float(instance_cost) if priced and isinstance(instance_cost, (int, float)) else None
    return sums


def _last_assistant_text(data: dict) -> str | None:
    for message in reversed(data.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "assistant":
            content = message.get("content")
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return content if isinstance(content, str) else None
    return None


def transcript(data: dict) -> bytes:
    """The trajectory as JSON Lines: `{"type": "info", ...}` (format, info), then one
    `{"type": "message", ...}` line per message in order."""
    head = {"type": "info", "trajectory_format": data.get("trajectory_format"), "info": data.get("info")}
    return rs.json_lines([head, *({"type": "message", **m} for m in data.get("messages") or [] if isinstance(m, dict))])
