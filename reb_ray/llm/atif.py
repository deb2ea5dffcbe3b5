"""An attempt's trajectory in ATIF, the Agent Trajectory Interchange Format (version 1.7), from
what reb-ray keeps: the agent's transcript (`trajectory.jsonl.gz`: the CLI's own events, or
reb-ray's command records) and the proxy's request log (`llm_requests.jsonl.gz`).

ATIF is the JSON document other tools of the field read (Harbor's viewer, trainers): a root with
`schema_version`, `session_id`, `agent` {name, version, model_name} and `steps`, each step with
`step_id` (1, 2, ...), `source` (system | user | agent), `message`, and on agent steps optionally
`reasoning_content`, `tool_calls` [{tool_call_id, function_name, arguments}], `observation`
{results: [{source_call_id, content}]} and `metrics` {prompt_tokens, completion_tokens,
cached_tokens, cost_usd}; `final_metrics` holds the totals.

How each transcript shape becomes steps (`steps_of`):

- reb-ray's `{"type": "command", ...}` records (the `command` agent and the built-in baselines):
  one agent step per command, its tool call `bash` and its output as the observation.
- codex `exec --json`: reasoning items become the next agent step's reasoning, agent messages
  its message, `command_execution` and `file_change` items tool calls with their output; an
  `error` item (codex's own warning) a system step.
- claude `stream-json`: one agent step per assistant message id (its text, thinking and
  tool_use blocks), each `tool_result` the observation of the step holding its call.
- Chat Completions messages (mini-swe-agent): system and user messages become system and
  user steps, each assistant message an agent step, each tool message an observation.
- NexAU's recorder events (`model_call`, `tool`, `error`): each model call an agent step with
  its tool calls (ids made up as `nexau-<n>`, NexAU gives none), each tool event the
  observation of the oldest unanswered call of that tool name.
- reb-ray's cut markers (`reb_ray.cut`, `reb_ray.dropped`): a system step saying what was not kept.

Token counts and cost per step: the proxy counted every model request; when the transcript's
model turns (claude messages, chat assistant messages) are exactly as many as the proxy's
answered model requests, they are paired in order and each agent step carries its request's
`metrics`. Otherwise (codex reports no turn boundaries), when the transcript carries its events'
arrival times (reb-ray's `reb_ray.received_at` line, reb_ray.agents.cli_events), each request is
paired by time: an agent step belongs to the latest request that ended before its event arrived
(within TIME_SLACK_S; a command's step is timed by its `item.started` event, when the command
began), and each request's metrics go on the first step that belongs to it. A request whose
answer made no step of its own (codex asking the model while a command runs, to poll it) is
added to the metrics of the step that was running when it ended (its `extra.model_requests`
counts them); one before any step stays in the totals only. `extra.metrics_attribution` counts
each kind. Without times no step gets metrics rather
than wrong ones, and `extra.metrics_attribution` says why. The
totals (`final_metrics`) are always the trials row's, the proxy's meter: unknown is absent,
never 0.

Limits: an observation or message is cut at TEXT_CHARS characters (the cut is marked in the
step's `extra`), so a file stays readable whatever the agent printed; the full output is in the
agent's log.
"""

from __future__ import annotations

import bisect
import json
from typing import Any

from reb_ray.jsonl import json_objects

SCHEMA_VERSION = "ATIF-v1.7"
TEXT_CHARS = 20_000
SOURCES = ("system", "user", "agent")
#: Seconds an event may seem to arrive before its request ended (two clocks of one host).
TIME_SLACK_S = 0.05
_AGENT_ONLY = ("model_name", "reasoning_content", "tool_calls", "metrics")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) if isinstance(b, dict) else str(b) for b in content)
    return "" if content is None else json.dumps(content)


def _cut(text: str, step: dict, what: str) -> str:
    if len(text) <= TEXT_CHARS:
        return text
    step.setdefault("extra", {}).setdefault("cut_chars", {})[what] = len(text) - TEXT_CHARS
    return text[:TEXT_CHARS]


class _Builder:
    """Steps under construction; `llm_turns` are the agent steps that each stand for one model
    request (paired with the proxy's log when the counts agree)."""

    def __init__(self) -> None:
        self.steps: list[dict] = []
        self.llm_turns: list[dict] = []
        self.calls: dict[str, dict] = {}  # tool_call_id -> the step holding it
        self.pending_reasoning: list[str] = []
        self.session: str | None = None
        self.model: str | None = None
        self.now: float | None = None  # arrival time of the event being read (None: not recorded)
        self.times: list[float | None] = []  # per step, the arrival time of the event that made it
        self.item_started: dict[str, float | None] = {}  # codex item id -> arrival of its item.started

    def step(self, source: str, message: str = "", **fields) -> dict:
        step = {"step_id": len(self.steps) + 1, "source": source, "message": ""}
        step["message"] = _cut(message, step, "message")
        if source == "agent" and self.pending_reasoning:
            step["reasoning_content"] = "\n".join(self.pending_reasoning)
            self.pending_reasoning = []
        step.update({k: v for k, v in fields.items() if v is not None})
        self.steps.append(step)
        self.times.append(self.now)
        return step

    def call(self, step: dict, call_id: str, name: str, arguments: dict) -> None:
        step.setdefault("tool_calls", []).append({"tool_call_id": call_id, "function_name": name, "arguments": arguments})
        self.calls[call_id] = step

    def observe(self, call_id: str | None, content: str, extra: dict | None = None) -> None:
        step = self.calls.get(call_id) if call_id is not None else None
        if step is None:  # an answer to a call we never saw: keep it, unlinked, on a step of its own
            step = self.step("agent", "")
            call_id = None
        result: dict = {"content": _cut(content, step, f"observation {call_id}")}
        if call_id is not None:
            result["source_call_id"] = call_id
        if extra:
            result["extra"] = extra
        step.setdefault("observation", {"results": []})["results"].append(result)


def _own_command(b: _Builder, event: dict) -> None:
    call_id = f"cmd-{len(b.calls) + 1}"
    step = b.step("agent", "")
    b.call(step, call_id, "bash", {"command": str(event.get("command"))})
    code = event.get("exit_code")
    extra = {k: event[k] for k in ("exit_code", "timed_out", "duration_s") if event.get(k) is not None}
    if event.get("within"):
        step["extra"] = {"within": event["within"]}
    b.observe(call_id, _text(event.get("output")), extra or None)


def _nexau(b: _Builder, event: dict, unanswered: list[tuple[str, str]]) -> None:
    kind = event.get("type")
    if kind == "model_call":
        step = b.step("agent", _text(event.get("text")))
        b.llm_turns.append(step)
        for call in event.get("tool_calls") or []:
            if not isinstance(call, dict):
                continue
            call_id, name = f"nexau-{len(b.calls) + 1}", str(call.get("name"))
            given = call.get("arguments")
            b.call(step, call_id, name, given if isinstance(given, dict) else {"value": given})
            unanswered.append((call_id, name))
    elif kind == "tool":
        name = str(event.get("name"))
        match = next((c for c in unanswered if c[1] == name), None)
        if match is not None:
            unanswered.remove(match)
        b.observe(match[0] if match else None, _text(event.get("output")))
    elif kind == "error":
        b.step("system", f"NexAU stopped with an error: {_text(event.get('error'))}")


def _codex(b: _Builder, event: dict) -> None:
    kind = event.get("type")
    if kind == "thread.started":
        b.session = event.get("thread_id") or b.session
        return
    if kind not in ("item.started", "item.completed") or not isinstance(event.get("item"), dict):
        return
    item = event["item"]
    itype, call_id = item.get("type"), str(item.get("id") or f"item-{len(b.calls) + 1}")
    if kind == "item.started":  # a command's step is timed by its start (its completion may be minutes later)
        b.item_started[call_id] = b.now
        return
    b.now = b.item_started.get(call_id, b.now)
    if itype == "reasoning":
        b.pending_reasoning.append(_text(item.get("text")))
    elif itype == "agent_message":
        b.step("agent", _text(item.get("text")))
    elif itype == "command_execution":
        step = b.step("agent", "")
        b.call(step, call_id, "bash", {"command": str(item.get("command"))})
        code = item.get("exit_code")
        b.observe(call_id, _text(item.get("aggregated_output")), {"exit_code": code} if code is not None else None)
    elif itype == "error":
        b.step("system", f"codex: {_text(item.get('message'))}")
    elif itype in ("file_change", "mcp_tool_call", "web_search", "todo_list"):
        step = b.step("agent", "")
        arguments = {k: v for k, v in item.items() if k not in ("id", "type")}
        b.call(step, call_id, itype, arguments)


def _claude(b: _Builder, event: dict, by_id: dict[str, dict]) -> None:
    kind = event.get("type")
    if kind == "system":
        b.session = event.get("session_id") or b.session
        b.model = event.get("model") or b.model
        return
    message = event.get("message")
    if not isinstance(message, dict):
        return
    blocks = [x for x in (message.get("content") or []) if isinstance(x, dict)] if isinstance(message.get("content"), list) \
        else [{"type": "text", "text": _text(message.get("content"))}]
    if kind == "assistant":
        key = str(message.get("id") or f"msg-{len(b.steps)}")
        step = by_id.get(key)
        if step is None:
            step = by_id[key] = b.step("agent", "", model_name=message.get("model"))
            b.llm_turns.append(step)
        for block in blocks:
            if block.get("type") == "text":
                step["message"] = _cut((step["message"] + "\n" if step["message"] else "") + str(block.get("text", "")),
                                       step, "message")
            elif block.get("type") == "thinking":
                step["reasoning_content"] = ((step.get("reasoning_content") or "") + str(block.get("thinking", ""))).strip()
            elif block.get("type") == "tool_use":
                given = block.get("input")
                b.call(step, str(block.get("id")), str(block.get("name")), given if isinstance(given, dict) else {"input": given})
    elif kind == "user":
        for block in blocks:
            if block.get("type") == "tool_result":
                b.observe(str(block.get("tool_use_id")), _text(block.get("content")),
                          {"is_error": True} if block.get("is_error") else None)
            elif block.get("type") == "text" and block.get("text"):
                b.step("user", str(block["text"]))


def _chat(b: _Builder, event: dict) -> None:
    role = event.get("role")
    if role in ("system", "user"):
        b.step(role, _text(event.get("content")))
    elif role == "assistant":
        step = b.step("agent", _text(event.get("content")), model_name=event.get("model"))
        b.llm_turns.append(step)
        for call in event.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict):
                continue
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except ValueError:
                arguments = {"raw": function.get("arguments")}
            b.call(step, str(call.get("id")), str(function.get("name")),
                   arguments if isinstance(arguments, dict) else {"value": arguments})
    elif role == "tool":
        extra = event.get("extra") if isinstance(event.get("extra"), dict) else {}
        code = extra.get("returncode")
        b.observe(str(event.get("tool_call_id")), _text(event.get("content")),
                  {"exit_code": code} if isinstance(code, int) else None)


def steps_of(transcript: bytes | None) -> _Builder:
    """The steps of a transcript (the shapes in the module docstring), in order."""
    b = _Builder()
    claude_ids: dict[str, dict] = {}
    nexau_calls: list[tuple[str, str]] = []
    events = json_objects(transcript)
    times = events.pop()["times"] if events and events[-1].get("type") == "reb_ray.received_at" \
        and isinstance(events[-1].get("times"), list) else []
    for i, event in enumerate(events):
        b.now = times[i] if i < len(times) and isinstance(times[i], (int, float)) else None
        kind = event.get("type")
        if kind == "command" and isinstance(event.get("command"), str):
            _own_command(b, event)
        elif kind in ("thread.started", "item.started", "item.completed"):
            _codex(b, event)
        elif kind in ("system", "assistant", "user") and isinstance(event.get("message", {}), dict):
            _claude(b, event, claude_ids)
        elif kind == "message" or (kind is None and event.get("role") in ("system", "user", "assistant", "tool")):
            _chat(b, event)
        elif kind in ("model_call", "tool", "error"):
            _nexau(b, event, nexau_calls)
        elif kind == "reb_ray.cut":
            b.step("system", f"reb-ray: the transcript was cut here; {event.get('dropped_bytes')} more bytes not kept")
        elif kind == "reb_ray.dropped":
            b.step("system", f"reb-ray: {event.get('lines')} lines ({event.get('bytes')} bytes) of the CLI's events "
                             "were not kept here")
    return b


def model_requests(request_log: bytes | None) -> list[dict]:
    """The proxy's answered model requests (2xx, an API the meter knows), in the order sent."""
    out = [e for e in json_objects(request_log) if e.get("type") == "request" and e.get("api")
           and isinstance(e.get("status"), int) and 200 <= e["status"] < 300]
    return sorted(out, key=lambda e: e.get("started_at") or 0)


def _metrics(request: dict) -> dict:
    usage = request.get("usage") or {}
    pairs = (("prompt_tokens", usage.get("input_tokens")), ("completion_tokens", usage.get("output_tokens")),
             ("cached_tokens", usage.get("cached_input_tokens")), ("cost_usd", request.get("cost_usd")))
    metrics: dict = {k: v for k, v in pairs if v is not None}
    extra = {k: usage.get(k) for k in ("cache_write_tokens", "reasoning_tokens") if usage.get(k) is not None}
    if request.get("duration_s") is not None:
        extra["duration_s"] = request["duration_s"]
    if extra:
        metrics["extra"] = extra
    return metrics


def _add_metrics(step: dict, request: dict) -> None:
    more = _metrics(request)
    own = 1 if "metrics" in step else 0  # the step's own request, already on it
    metrics = step.setdefault("metrics", {})
    for key in ("prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd"):
        if more.get(key) is not None:
            metrics[key] = metrics.get(key, 0) + more[key]
    extra = metrics.setdefault("extra", {})
    extra["model_requests"] = extra.get("model_requests", own) + 1


def _pair_by_time(b: _Builder, requests: list[dict]) -> tuple[int, int]:
    """Put each request's metrics on the first agent step whose event arrived after it ended,
    then each request left over on the step running when it ended (the module docstring's
    rule); returns (requests on a step of their own, requests added to a running step)."""
    ends = sorted(((r.get("started_at") or 0.0) + (r.get("duration_s") or 0.0), i) for i, r in enumerate(requests))
    keys = [end for end, _ in ends]
    timed = [(at, step) for step, at in zip(b.steps, b.times) if step["source"] == "agent" and at is not None]
    taken: set[int] = set()
    for at, step in timed:
        k = bisect.bisect_right(keys, at + TIME_SLACK_S) - 1
        if k < 0 or ends[k][1] in taken:
            continue
        request = requests[ends[k][1]]
        taken.add(ends[k][1])
        metrics = _metrics(request)
        if metrics:
            step["metrics"] = metrics
        if request.get("model"):
            step.setdefault("model_name", request["model"])
    added = 0
    starts = [at for at, _ in timed]
    for end, i in ends:
        if i in taken:
            continue
        k = bisect.bisect_right(starts, end + TIME_SLACK_S) - 1
        if k >= 0:
            _add_metrics(timed[k][1], requests[i])
            added += 1
    return len(taken), added


def trajectory(row: dict, transcript: bytes | None, request_log: bytes | None,
               prompt: tuple[str, str] | None = None) -> dict:
    """The ATIF document of one attempt: `row` its trials row (a dict), `transcript` and
    `request_log` the decompressed artifacts (None: not kept). `prompt`: the (system, task)
    parts the agent was given, when known (the attempt writing its own file): its first steps,
    a system and a user step; else one user step naming the prompt by its digest."""
    b = steps_of(transcript)
    if prompt is not None:
        first = [{"step_id": 1, "source": "system", "message": prompt[0]},
                 {"step_id": 2, "source": "user", "message": prompt[1]}]
    else:
        first = [{"step_id": 1, "source": "user", "message": (
            f"reb-ray task prompt for {row.get('task_id')} (sha256 {row.get('prompt_sha256') or 'unknown'};"
            " rendered from the prompt template, not stored per attempt)")}]
    steps = first + b.steps
    if len(steps) == len(first) and row.get("agent_output_tail"):
        steps.append({"step_id": len(steps) + 1, "source": "agent", "message": _cut(row["agent_output_tail"], {}, "message"),
                      "extra": {"from": "agent_output_tail (no transcript kept)"}})
    for i, step in enumerate(steps, start=1):
        step["step_id"] = i
    requests = model_requests(request_log)
    extra: dict = {"sweep_id": row.get("sweep_id"), "trial_id": row.get("trial_id"), "attempt": row.get("attempt"),
                   "task_id": row.get("task_id"), "reb_ray_agent": row.get("agent"), "status": row.get("status"),
                   "agent_exit_code": row.get("agent_exit_code"), "model_requests": len(requests)}
    if b.session:
        extra["agent_session_id"] = b.session
    if requests and len(requests) == len(b.llm_turns):
        for step, request in zip(b.llm_turns, requests):
            metrics = _metrics(request)
            if metrics:
                step["metrics"] = metrics
            step.setdefault("model_name", request.get("model"))
        extra["metrics_attribution"] = "one proxy request per model turn, in order"
    elif requests and any(t is not None for t in b.times):
        paired, added = _pair_by_time(b, requests)
        left = len(requests) - paired - added
        extra["metrics_attribution"] = (f"by time: {paired} of {len(requests)} answered model requests on the first "
                                        "step whose event arrived after the request ended"
                                        + (f"; {added} made no step and are added to the step running when they "
                                           "ended" if added else "")
                                        + (f"; {left} before any step (in the totals only)" if left else ""))
    elif requests:
        extra["metrics_attribution"] = (f"not per step: {len(requests)} answered model requests against "
                                        f"{len(b.llm_turns)} model turns in the transcript; totals only")
    for step in steps:
        if step.get("model_name") is None:
            step.pop("model_name", None)
    agent = {"name": str(row.get("agent_kind") or row.get("agent") or "unknown"),
             "version": str(row.get("agent_version") or "unknown")}
    model = row.get("llm_model") or row.get("agent_model") or b.model
    if model:
        agent["model_name"] = model
    agent["extra"] = {"reb_ray_agent": row.get("agent")}
    final = {"total_steps": len(steps)}
    for key, column in (("total_prompt_tokens", "input_tokens"), ("total_completion_tokens", "output_tokens"),
                        ("total_cached_tokens", "cached_input_tokens"), ("total_cost_usd", "cost_usd")):
        if row.get(column) is not None:
            final[key] = row[column]
    return {"schema_version": SCHEMA_VERSION, "session_id": f"{row.get('sweep_id')}/{row.get('trial_id')}/{row.get('attempt')}",
            "agent": agent, "steps": steps, "final_metrics": final, "extra": extra}


# -- validation: the specification's required fields and types


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return (isinstance(v, (int, float))) and not isinstance(v, bool)


def _message_ok(message: Any) -> bool:
    if isinstance(message, str):
        return True
    return isinstance(message, list) and all(isinstance(p, dict) and isinstance(p.get("type"), str) for p in message)


def validate(doc: Any) -> list[str]:
    """Every way `doc` departs from ATIF v1.7's required fields and types, one line each
    naming the field ([] when it conforms): the root's schema_version (an "ATIF-v1.x" string),
    agent (name and version strings; model_name a string when present) and a non-empty steps
    array; each step's step_id (1, 2, ... in order), source (system | user | agent) and message
    (a string or content parts); model_name, reasoning_content, tool_calls and metrics only on
    agent steps; each tool call's tool_call_id and function_name strings and arguments object;
    observation.results a list whose source_call_id names a tool call of the same step;
    metrics' token counts integers >= 0 and cost_usd a number; final_metrics likewise."""
    errors: list[str] = []
    if not isinstance(doc, dict):
        return ["root: not an object"]
    version = doc.get("schema_version")
    if not (isinstance(version, str) and version.startswith("ATIF-v1.")):
        errors.append(f"schema_version: {version!r} is not an ATIF-v1.x string")
    if "session_id" in doc and not isinstance(doc["session_id"], str):
        errors.append("session_id: not a string")
    agent = doc.get("agent")
    if not isinstance(agent, dict):
        errors.append("agent: missing or not an object")
    else:
        for key in ("name", "version"):
            if not isinstance(agent.get(key), str):
                errors.append(f"agent.{key}: missing or not a string")
        if "model_name" in agent and not isinstance(agent["model_name"], str):
            errors.append("agent.model_name: not a string")
    steps = doc.get("steps")
    if not isinstance(steps, list) or not steps:
        errors.append("steps: missing, not an array, or empty")
        steps = []
    for i, step in enumerate(steps):
        where = f"steps[{i}]"
        if not isinstance(step, dict):
            errors.append(f"{where}: not an object")
            continue
        if step.get("step_id") != i + 1 or not _is_int(step.get("step_id")):
            errors.append(f"{where}.step_id: {step.get('step_id')!r}, expected {i + 1}")
        source = step.get("source")
        if source not in SOURCES:
            errors.append(f"{where}.source: {source!r} is not one of {', '.join(SOURCES)}")
        if "message" not in step or not _message_ok(step["message"]):
            errors.append(f"{where}.message: missing, or not a string or content parts")
        if source != "agent":
            errors.extend(f"{where}.{key}: only agent steps may have it" for key in _AGENT_ONLY if key in step)
        for key in ("model_name", "reasoning_content", "timestamp"):
            if key in step and not isinstance(step[key], str):
                errors.append(f"{where}.{key}: not a string")
        ids = set()
        calls = step.get("tool_calls", [])
        if not isinstance(calls, list):
            errors.append(f"{where}.tool_calls: not an array")
            calls = []
        for j, call in enumerate(calls):
            cw = f"{where}.tool_calls[{j}]"
            if not isinstance(call, dict):
                errors.append(f"{cw}: not an object")
                continue
            for key in ("tool_call_id", "function_name"):
                if not isinstance(call.get(key), str):
                    errors.append(f"{cw}.{key}: missing or not a string")
            if not isinstance(call.get("arguments"), dict):
                errors.append(f"{cw}.arguments: missing or not an object")
            ids.add(call.get("tool_call_id"))
        if "observation" in step:
            results = step["observation"].get("results") if isinstance(step["observation"], dict) else None
            if not isinstance(results, list):
                errors.append(f"{where}.observation.results: missing or not an array")
                results = []
            for j, result in enumerate(results):
                rw = f"{where}.observation.results[{j}]"
                if not isinstance(result, dict):
                    errors.append(f"{rw}: not an object")
                    continue
                ref = result.get("source_call_id")
                if ref is not None and ref not in ids:
                    errors.append(f"{rw}.source_call_id: {ref!r} names no tool call of this step")
                if "content" in result and result["content"] is not None and not _message_ok(result["content"]):
                    errors.append(f"{rw}.content: not a string or content parts")
        if "metrics" in step:
            errors.extend(_metric_errors(step["metrics"], f"{where}.metrics",
                                         ("prompt_tokens", "completion_tokens", "cached_tokens"), "cost_usd"))
    if "final_metrics" in doc:
        errors.extend(_metric_errors(doc["final_metrics"], "final_metrics",
                                     ("total_prompt_tokens", "total_completion_tokens", "total_cached_tokens", "total_steps"),
                                     "total_cost_usd"))
    return errors


def _metric_errors(metrics: Any, where: str, counts: tuple[str, ...], cost: str) -> list[str]:
    if not isinstance(metrics, dict):
        return [f"{where}: not an object"]
    errors = [f"{where}.{k}: {metrics[k]!r} is not an integer >= 0" for k in counts
              if k in metrics and not (_is_int(metrics[k]) and metrics[k] >= 0)]
    if cost in metrics and not _is_num(metrics[cost]):
        errors.append(f"{where}.{cost}: {metrics[cost]!r} is not a number")
    return errors
