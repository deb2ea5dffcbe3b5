"""A scripted reply as Anthropic Messages: a message body, or the SSE events claude reads.

Stream shape (https://docs.anthropic.com/en/docs/build-with-claude/streaming): `message_start`
(usage with the input counts), per content block `content_block_start` / `content_block_delta`
(`text_delta` or `input_json_delta`) / `content_block_stop`, `message_delta` (stop_reason and
the cumulative output_tokens), `message_stop`.
"""

from __future__ import annotations

import json

from reb_ray.llm.scripted.reply import Reply, pieces
from reb_ray.llm.scripted.script import ScriptUsage
from reb_ray.llm.sse import format_event


def offered_tools(body: dict) -> dict[str, dict | None]:
    """Tool name -> input_schema properties of the request's `tools`."""
    tools = body.get("tools")
    tools = tools if isinstance(tools, list) else []
    return {t["name"]: (t.get("input_schema") or {}).get("properties") for t in tools
            if isinstance(t, dict) and isinstance(t.get("name"), str)}


def last_tool_result(body: dict) -> str | None:
    """The text of the last `tool_result` block in the request's messages, if any."""
    result = None
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                inner = block.get("content")
                if isinstance(inner, list):
                    inner = "".join(b.get("text", "") for b in inner if isinstance(b, dict))
                result = inner if isinstance(inner, str) else json.dumps(inner)
    return result


def usage(u: ScriptUsage) -> dict:
    return {"input_tokens": u.input_tokens - u.cached_input_tokens - u.cache_write_tokens,
            "cache_creation_input_tokens": u.cache_write_tokens, "cache_read_input_tokens": u.cached_input_tokens,
            "output_tokens": u.output_tokens}


def _stop_reason(reply: Reply) -> str:
    return "tool_use" if reply.tool else "end_turn"


def body(reply: Reply) -> dict:
    content: list[dict] = []
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    if reply.tool:
        content.append({"type": "tool_use", "id": f"toolu_{reply.ident}", "name": reply.tool.name,
                        "input": reply.tool.arguments})
    return {"id": f"msg_{reply.ident}", "type": "message", "role": "assistant", "model": reply.model,
            "content": content, "stop_reason": _stop_reason(reply), "stop_sequence": None, "usage": usage(reply.usage)}


def events(reply: Reply) -> list[bytes]:
    full = usage(reply.usage)
    start = {**full, "output_tokens": min(1, full["output_tokens"])}  # the API reports 1 here too
    message = {**body(reply), "content": [], "stop_reason": None, "usage": start}
    out = [format_event({"type": "message_start", "message": message}, "message_start"),
           format_event({"type": "ping"}, "ping")]
    index = 0
    if reply.text:
        out.append(_block_start(index, {"type": "text", "text": ""}))
        for piece in pieces(reply.text, reply.chunks):
            out.append(_delta(index, {"type": "text_delta", "text": piece}))
        out.append(format_event({"type": "content_block_stop", "index": index}, "content_block_stop"))
        index += 1
    if reply.tool:
        block = {"type": "tool_use", "id": f"toolu_{reply.ident}", "name": reply.tool.name, "input": {}}
        out.append(_block_start(index, block))
        for piece in pieces(json.dumps(reply.tool.arguments), reply.chunks):
            out.append(_delta(index, {"type": "input_json_delta", "partial_json": piece}))
        out.append(format_event({"type": "content_block_stop", "index": index}, "content_block_stop"))
    out.append(format_event({"type": "message_delta", "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": None},
                             "usage": {"output_tokens": full["output_tokens"]}}, "message_delta"))
    out.append(format_event({"type": "message_stop"}, "message_stop"))
    return out


def _block_start(index: int, block: dict) -> bytes:
    return format_event({"type": "content_block_start", "index": index, "content_block": block}, "content_block_start")


def _delta(index: int, delta: dict) -> bytes:
    return format_event({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta")
