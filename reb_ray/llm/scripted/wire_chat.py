"""A scripted reply as OpenAI Chat Completions: a completion, or the chunk stream.

Stream shape (https://platform.openai.com/docs/api-reference/chat-streaming): `data:` chunks
of `chat.completion.chunk` (a role delta, content deltas, `tool_calls` deltas whose first one
carries id and name), a chunk with `finish_reason`, then `data: [DONE]`. Usage comes only when
the request sets `stream_options.include_usage`: every chunk then has `"usage": null` and one
last chunk with empty `choices` carries it, as the API does. Chat cannot express cache writes.
"""

from __future__ import annotations

import json

from reb_ray.llm.scripted.reply import Reply, pieces
from reb_ray.llm.scripted.script import ScriptUsage
from reb_ray.llm.sse import format_event


def offered_tools(body: dict) -> dict[str, dict | None]:
    """Function name -> parameters properties of the request's `tools`."""
    tools = body.get("tools")
    tools = tools if isinstance(tools, list) else []
    found = {}
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            found[function["name"]] = (function.get("parameters") or {}).get("properties")
    return found


def last_tool_result(body: dict) -> str | None:
    """The content of the last `tool` message (or, without tools, the last user message)."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    role = "tool" if any(m.get("role") == "tool" for m in messages) else "user"
    chosen = [m for m in messages if m.get("role") == role]
    if not chosen or (role == "user" and len(chosen) < 2):  # the first user message is the task
        return None
    content = chosen[-1].get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else None


def usage(u: ScriptUsage) -> dict:
    return {"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
            "total_tokens": u.input_tokens + u.output_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cached_input_tokens},
            "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens}}


def _tool_calls(reply: Reply) -> list[dict]:
    if not reply.tool:
        return []
    return [{"id": f"call_{reply.ident}", "type": "function",
             "function": {"name": reply.tool.name, "arguments": json.dumps(reply.tool.arguments)}}]


def body(reply: Reply) -> dict:
    message: dict = {"role": "assistant", "content": reply.text or None}
    if reply.tool:
        message["tool_calls"] = _tool_calls(reply)
    finish = "tool_calls" if reply.tool else "stop"
    return {"id": f"chatcmpl-{reply.ident}", "object": "chat.completion", "created": reply.created,
            "model": reply.model, "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": usage(reply.usage)}


def events(reply: Reply, include_usage: bool) -> list[bytes]:
    def chunk(delta: dict | None, finish: str | None = None, **extra) -> bytes:
        data = {"id": f"chatcmpl-{reply.ident}", "object": "chat.completion.chunk", "created": reply.created,
                "model": reply.model,
                "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish,
                                                      "logprobs": None}]}
        if include_usage:
            data["usage"] = None
        data.update(extra)
        return format_event(data)

    out = [chunk({"role": "assistant", "content": ""})]
    if reply.text:
        out += [chunk({"content": piece}) for piece in pieces(reply.text, reply.chunks)]
    for call in _tool_calls(reply):
        first = {"index": 0, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"],
                                                                               "arguments": ""}}
        out.append(chunk({"tool_calls": [first]}))
        for piece in pieces(call["function"]["arguments"], reply.chunks):
            out.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
    out.append(chunk({}, "tool_calls" if reply.tool else "stop"))
    if include_usage:
        out.append(chunk(None, usage=usage(reply.usage)))
    out.append(format_event("[DONE]"))
    return out
