"""The streaming pattern watch gives re.search(p, whole_output, MULTILINE), chunk by chunk."""

from __future__ import annotations

import random
import re

import pytest

from reb_ray.sandbox.watch import WINDOW_CHARS, PatternWatch


def _watch(data: bytes, patterns: list[str], chunk_sizes) -> dict[str, bool]:
    watch = PatternWatch(patterns)
    pos = 0
    for size in chunk_sizes:
        if pos >= len(data):
            break
        watch.feed(data[pos:pos + size])
        pos += size
    watch.feed(data[pos:])
    return watch.finish()


def _whole(data: bytes, patterns: list[str]) -> dict[str, bool]:
    text = data.decode("utf-8", errors="replace")
    return {p: re.search(p, text, re.MULTILINE) is not None for p in patterns}


def test_a_pattern_after_100_kib_is_found_where_a_head_and_tail_would_miss_it():
    data = b"".join(b"noise line %06d ........................................\n" % i for i in range(4000))
    data += b"Starting training on cpu\n" + b"tail noise\n" * 20000
    assert len(data) > 300 * 1024 and data.index(b"Starting") > 100 * 1024
    assert _watch(data, ["Starting training on cpu"], [4096] * 10**4) == {"Starting training on cpu": True}


def test_a_match_split_across_every_possible_chunk_boundary():
    data = b"x" * 70_000 + b"\nfinal loss: 0.123\n" + b"y" * 10
    for cut in range(70_000, 70_020):
        assert _watch(data, [r"^final loss: \d+\.\d+$"], [cut, 1, 1, 1, 7, 3]) == {r"^final loss: \d+\.\d+$": True}, cut


def test_line_anchors_behave_as_on_the_whole_output():
    # `$` must not match at a chunk end inside a line, nor `^` at a cut inside a line.
    data = b"loss: 12" + b"3 more\n" + b"a" * (3 * WINDOW_CHARS) + b"ok\n"
    for sizes in ([8] + [5] * 10**5, [1] * 200 + [65536] * 10, [len(data)]):
        got = _watch(data, [r"^loss: 12$", r"^ok$", r"^aok$", r"a{5}ok$", r"3 more$"], sizes)
        assert got == _whole(data, list(got)) == {r"^loss: 12$": False, r"^ok$": False, r"^aok$": False,
                                                 r"a{5}ok$": True, r"3 more$": True}, sizes


def test_multiline_matches_and_utf8_split_across_chunks():
    data = ("é" * 40_000 + "\nTraceback (most recent call last):\n  File x\nValueError: bad €\n").encode()
    patterns = [r"Traceback[^\n]*\n(?:  .*\n)+ValueError", "bad €", "é{3}\n"]
    for size in (1, 2, 3, 4097, 65536):
        assert _watch(data, patterns, [size] * 10**6) == dict.fromkeys(patterns, True), size


def test_random_outputs_and_chunkings_agree_with_a_whole_log_search():
    rng = random.Random(7)
    words = ["loss", "step", "done", "error", "\n", " ", "\r", "é", "0", "1", "=", "Starting training"]
    patterns = [r"^step \d", r"done$", r"error\s+\d", r"^$", r"Starting training on", r"loss.*done", r"^\r", r"é\n"]
    for trial in range(40):
        text = "".join(rng.choice(words) for _ in range(rng.randint(1, 60_000)))
        data = text.encode()
        sizes = [rng.choice([1, 7, 500, 4096, 70_000]) for _ in range(len(data))]
        assert _watch(data, patterns, sizes) == _whole(data, patterns), trial


def test_memory_stays_bounded_on_one_endless_line():
    watch = PatternWatch(["never"])
    for _ in range(2000):  # 128 MiB without a newline
        watch.feed(b"a" * 65536)
        assert len(watch._buf) <= 5 * WINDOW_CHARS
    assert watch.finish() == {"never": False}


def test_bad_regex_is_rejected():
    with pytest.raises(re.error):
        PatternWatch(["("])
