"""The three LLM wire APIs reb-ray speaks, told apart by request path, and their error bodies.

- `anthropic_messages`: Anthropic Messages, `POST /v1/messages` (claude).
- `openai_responses`: OpenAI Responses, `POST /v1/responses` (codex).
- `openai_chat`: OpenAI Chat Completions, `POST /v1/chat/completions` (mini-swe-agent via
  litellm, NexAU, most OpenAI-compatible servers).

Paths are matched on their ending so a base URL with or without `/v1` (or behind a prefix such
as `/api/v1`) is recognised the same way.
"""

from __future__ import annotations

import json

ANTHROPIC = "anthropic_messages"
RESPONSES = "openai_responses"
CHAT = "openai_chat"
APIS = (ANTHROPIC, RESPONSES, CHAT)

_SUFFIXES = (("/chat/completions", CHAT), ("/responses", RESPONSES), ("/messages", ANTHROPIC))


def api_of(path: str) -> str | None:
    """The API a request path belongs to, or None (e.g. `/v1/models`, `/v1/messages/count_tokens`)."""
    path = path.split("?", 1)[0].rstrip("/")
    for suffix, api in _SUFFIXES:
        if path.endswith(suffix):
            return api
    return None


# Anthropic's error `type` per status (https://docs.anthropic.com/en/api/errors).
_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
                    403: "permission_error", 404: "not_found_error", 413: "request_too_large",
                    429: "rate_limit_error", 500: "api_error", 504: "timeout_error", 529: "overloaded_error"}
# OpenAI's error `type` per status (https://platform.openai.com/docs/guides/error-codes).
_OPENAI_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 402: "insufficient_quota",
                 403: "permission_denied", 404: "invalid_request_error", 429: "rate_limit_exceeded",
                 500: "server_error", 502: "server_error", 503: "server_error", 504: "server_error"}


def error_body(api: str | None, status: int, message: str, error_type: str | None = None) -> bytes:
    """A JSON error body in the shape `api`'s clients parse (Anthropic's or OpenAI's), as bytes.

    `error_type` overrides the vendor's type for `status` (e.g. `insufficient_quota` on a 429).
    """
    if api == ANTHROPIC:
        kind = error_type or _ANTHROPIC_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        body: dict = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        kind = error_type or _OPENAI_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
        body = {"error": {"message": message, "type": kind, "param": None, "code": kind}}
    return json.dumps(body).encode()
