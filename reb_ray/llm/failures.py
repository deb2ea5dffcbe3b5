"""Which LLM-side failures are infrastructure, and of what kind (a rate limit or an outage is
not the agent's failure and must not be scored as one).

Categories (owner infra, never the agent's):

- `infra_llm_rate_limit`: HTTP 429 (that is not an exhausted quota).
- `infra_llm_unavailable`: HTTP 5xx (Anthropic's 529 overloaded included), connection refused,
  DNS failure, timeout, a stream cut off mid-way.
- `infra_llm_auth`: HTTP 401, or 403 that is not about money.
- `infra_llm_budget`: HTTP 402; a 403/429/400 whose error says quota, budget, billing or credit
  (OpenAI answers an exhausted quota with 429 `insufficient_quota`, Anthropic a low balance
  with 400 "credit balance is too low").

Other statuses (400 bad request, 404, 413) are the request's own problem: no category. Retry
policy belongs to the orchestrator; rate limits and unavailability are the retryable ones,
with backoff; auth and budget are never retried (`NOT_RETRIED`): the next attempt would fail
the same way.

The harness's own part has one more: `infra_llm_proxy`, the node's proxy could not be started,
reached or could not register the trial (retried like any infra failure, without backoff).
"""

from __future__ import annotations

import re

RATE_LIMIT = "infra_llm_rate_limit"
UNAVAILABLE = "infra_llm_unavailable"
AUTH = "infra_llm_auth"
BUDGET = "infra_llm_budget"
CATEGORIES = (RATE_LIMIT, UNAVAILABLE, AUTH, BUDGET)
RETRYABLE = frozenset({RATE_LIMIT, UNAVAILABLE})
NOT_RETRIED = frozenset({AUTH, BUDGET})
PROXY = "infra_llm_proxy"

_MONEY = re.compile(r"insufficient[_ ]quota|quota|budget|billing|credit balance|credits?\b|payment", re.I)


def classify(status: int, error_text: str = "") -> str | None:
    """The infra category of an upstream HTTP answer, or None (success, or the request's fault).

    `error_text` is (the start of) the error body; only its wording is used, to tell a spent
    budget from a rate limit or an authorization failure.
    """
    if status < 400:
        return None
    money = bool(_MONEY.search(error_text or ""))
    if status == 402 or (money and status in (400, 403, 429)):
        return BUDGET
    if status == 429:
        return RATE_LIMIT
    if status in (401, 403):
        return AUTH
    if status >= 500:
        return UNAVAILABLE
    return None


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a `retry-after` header given in seconds (HTTP dates are not used by LLM
    APIs and give None), or None when absent or malformed."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None
