"""`first_line`: any exception's message as one line, for rows, logs and progress lines."""

from __future__ import annotations

from reb_ray.errors import InfraError, first_line


def test_the_first_line_of_the_text_with_blank_space_dropped():
    assert first_line(RuntimeError("\n  the worker died\nTraceback (most recent call last):\n  ...")) == "the worker died"
    assert first_line(InfraError("infra_node", "node gone")) == "node gone"


def test_cut_to_the_limit():
    exc = ValueError("x" * 1000)
    assert first_line(exc) == "x" * 300 and first_line(exc, 500) == "x" * 500


def test_an_error_without_text_is_named_by_its_type():
    assert first_line(TimeoutError()) == "TimeoutError"
    assert first_line(RuntimeError(" \n ")) == "RuntimeError"
