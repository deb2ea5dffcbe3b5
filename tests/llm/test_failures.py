"""LLM-side failures and their infra categories (issue 10, item 7)."""

from __future__ import annotations

import pytest

from reb_ray.llm.failures import AUTH, BUDGET, RATE_LIMIT, RETRYABLE, UNAVAILABLE, classify, parse_retry_after


@pytest.mark.parametrize(("status", "text", "category"), [
    (200, "", None),
    (429, '{"error":{"type":"rate_limit_error","message":"slow down"}}', RATE_LIMIT),
    (429, '{"error":{"code":"insufficient_quota","message":"You exceeded your current quota"}}', BUDGET),
    (402, "", BUDGET),
    (403, "monthly budget exceeded", BUDGET),
    (403, '{"error":{"type":"permission_error","message":"not allowed"}}', AUTH),
    (401, "invalid x-api-key", AUTH),
    (400, "Your credit balance is too low to access the Anthropic API", BUDGET),
    (400, "messages: field required", None),
    (404, "model not found", None),
    (500, "", UNAVAILABLE),
    (503, "", UNAVAILABLE),
    (529, '{"type":"error","error":{"type":"overloaded_error"}}', UNAVAILABLE),
])
def test_classify(status, text, category):
    assert classify(status, text) == category


def test_only_rate_limits_and_unavailability_are_retryable():
    assert RETRYABLE == {RATE_LIMIT, UNAVAILABLE}


def test_retry_after():
    assert parse_retry_after("2") == 2.0 and parse_retry_after(" 0.5 ") == 0.5
    assert parse_retry_after(None) is None and parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") is None
    assert parse_retry_after("-3") is None
