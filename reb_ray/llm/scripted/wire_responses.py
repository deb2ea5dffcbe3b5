"""A scripted reply as OpenAI Responses: a response object, or the SSE events codex reads.

Stream shape (https://platform.openai.com/docs/api-reference/responses-streaming):
`response.created`, `response.in_progress`, per output item `response.output_item.added`,
its deltas (`response.output_text.delta` within a content part, or
`response.function_call_arguments.delta`) and `response.output_item.done`, then
`response.completed` carrying the full response with `usage`. Every event has a
`sequence_number`. Responses cannot express cache writes: `cache_write_tokens` is not sent.
"""

from __future__ import annotations

import json

from reb_ray.llm.scripted.reply import Reply, pieces
from reb_ray.llm.scripted.script import ScriptUsage
from reb_ray.llm.sse import format_event


def offered_tools(body: dict) -> dict[str, dict | None]:
    """Function tool name -> parameters properties of the request's `tools`."""
    tools = body.get("tools")
    tools = tools if isinstance(tools, list) else []
    return {t["name"]: (t.get("parameters") or {}).get("properties") for t in tools
            if isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("name"), str)}


def last_tool_result(body: dict) -> str | None:
    """The output of the last `function_call_output` item of the request's input, if any."""
    items = body.get("input")
    items = items if isinstance(items, list) else []
    outputs = [i.get("output") for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]
    if not outputs:
        return None
    last = outputs[-1]
    if isinstance(last, list):  # content items
        last = "".join(p.get("text", "") for p in last if isinstance(p, dict))
    return last if isinstance(last, str) else json.dumps(last)


def usage(u: ScriptUsage) -> dict:
    return {"input_tokens": u.input_tokens, "input_tokens_details": {"cached_tokens": u.cached_input_tokens},
            "output_tokens": u.output_tokens, "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
            "total_tokens": u.input_tokens + u.output_tokens}


def _items(reply: Reply) -> list[dict]:
    items = []
    if reply.text:
        items.append({"type": "message", "id": f"msg_{reply.ident}", "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": reply.text, "annotations": []}]})
    if reply.tool:
        items.append({"type": "function_call", "id": f"fc_{reply.ident}", "call_id": f"call_{reply.ident}",
                      "name": reply.tool.name, "arguments": json.dumps(reply.tool.arguments), "status": "completed"})
    return items


def body(reply: Reply) -> dict:
    return {"id": f"resp_{reply.ident}", "object": "response", "created_at": reply.created, "status": "completed",
            "error": None, "incomplete_details": None, "model": reply.model, "output": _items(reply),
            "usage": usage(reply.usage)}


def events(reply: Reply) -> list[bytes]:
    seq = iter(range(1_000_000))

    def event(kind: str, **fields) -> bytes:
        return format_event({"type": kind, "sequence_number": next(seq), **fields}, kind)

    pending = {**body(reply), "status": "in_progress", "output": [], "usage": None}
    out = [event("response.created", response=pending), event("response.in_progress", response=pending)]
    for index, item in enumerate(_items(reply)):
        if item["type"] == "message":
            out.append(event("response.output_item.added", output_index=index,
                             item={**item, "status": "in_progress", "content": []}))
            part = {"type": "output_text", "text": "", "annotations": []}
            out.append(event("response.content_part.added", item_id=item["id"], output_index=index, content_index=0,
                             part=part))
            for piece in pieces(reply.text, reply.chunks):
                out.append(event("response.output_text.delta", item_id=item["id"], output_index=index,
                                 content_index=0, delta=piece))
            out.append(event("response.output_text.done", item_id=item["id"], output_index=index, content_index=0,
                             text=reply.text))
            out.append(event("response.content_part.done", item_id=item["id"], output_index=index, content_index=0,
                             part=item["content"][0]))
        else:
            out.append(event("response.output_item.added", output_index=index,
                             item={**item, "status": "in_progress", "arguments": ""}))
            for piece in pieces(item["arguments"], reply.chunks):
                out.append(event("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                                 delta=piece))
            out.append(event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                             arguments=item["arguments"]))
        out.append(event("response.output_item.done", output_index=index, item=item))
    out.append(event("response.completed", response=body(reply)))
    return out
