"""JsonLines: a CLI's JSON events parsed as they stream, a bounded copy kept."""

from __future__ import annotations

import json

from reb_ray.agents.cli_events import JsonLines


def feed(sink: JsonLines, data: bytes, piece: int) -> None:
    for i in range(0, len(data), piece):
        sink.write(data[i:i + piece])
    sink.close()


def test_events_split_anywhere_across_writes_are_folded_in_order_and_kept_whole():
    lines = [json.dumps({"type": "t", "n": i, "text": "é" * i}) for i in range(20)]
    data = ("\n".join(lines) + "\nnot json\n[1, 2]\n\n" + json.dumps({"type": "last"})).encode()  # no final newline
    for piece in (1, 7, len(data)):
        seen = []
        sink = JsonLines(seen.append)
        feed(sink, data, piece)
        assert [e.get("n") for e in seen] == [*range(20), None] and seen[-1] == {"type": "last"}
        assert sink.events == 21 and sink.non_json_lines == 2  # a text line and a JSON array
        assert [json.loads(line) for line in sink.transcript().splitlines()] == seen


def test_the_transcript_keeps_the_first_and_last_lines_and_says_what_it_dropped():
    seen = []
    sink = JsonLines(seen.append, transcript_bytes=400)
    lines = [json.dumps({"type": "t", "n": i}).encode() + b"\n" for i in range(100)]  # 22-23 bytes each
    feed(sink, b"".join(lines), 50)
    kept = [json.loads(line) for line in sink.transcript().splitlines()]
    assert len(seen) == 100  # every event was folded, whatever was kept
    marker = next(e for e in kept if e["type"] == "reb_ray.dropped")
    numbers = [e["n"] for e in kept if e["type"] == "t"]
    assert numbers[0] == 0 and numbers[-1] == 99 and len(numbers) + marker["lines"] == 100
    assert marker["bytes"] == sum(len(lines[n]) for n in range(100) if n not in numbers)
    assert len(sink.transcript()) <= 400 + len(json.dumps(marker)) + 1


def test_an_overlong_line_is_counted_not_kept_and_the_stream_goes_on():
    seen = []
    sink = JsonLines(seen.append, line_bytes=100)
    data = b'{"type": "a"}\n' + json.dumps({"type": "huge", "x": "y" * 500}).encode() + b'\n{"type": "b"}\n'
    feed(sink, data, 64)
    assert [e["type"] for e in seen] == ["a", "b"] and sink.overlong_lines == 1
    assert sink.transcript() == b'{"type": "a"}\n{"type": "b"}\n'


def test_no_json_at_all_is_no_transcript_and_a_failing_fold_loses_nothing_else():
    sink = JsonLines(lambda e: None)
    feed(sink, b"Error: cannot start\n", 5)
    assert sink.transcript() is None and sink.non_json_lines == 1

    def fold(event: dict) -> None:
        if event["n"] == 1:
            raise KeyError("odd event")
        seen.append(event["n"])

    seen: list[int] = []
    sink = JsonLines(fold)
    feed(sink, b'{"n": 0}\n{"n": 1}\n{"n": 2}\n', 4)
    assert seen == [0, 2] and sink.events == 3


def test_arrival_times_line_up_with_the_kept_lines_and_the_marker():
    import time

    sink = JsonLines(lambda e: None, transcript_bytes=400)
    before = time.time()
    for i in range(30):
        sink.write((json.dumps({"type": "t", "n": i, "pad": "x" * 20}) + "\n").encode())
    sink.close()
    *kept, last = [json.loads(x) for x in sink.transcript(with_times=True).splitlines()]
    assert last["type"] == "reb_ray.received_at" and len(last["times"]) == len(kept)
    marker = [i for i, e in enumerate(kept) if e["type"] == "reb_ray.dropped"]
    assert marker and all((t is None) == (i in marker) for i, t in enumerate(last["times"]))
    stamped = [t for t in last["times"] if t is not None]
    # Times are kept to the millisecond: one may round up past the clock read just after.
    assert stamped == sorted(stamped) and before - 0.01 <= stamped[0] <= time.time() + 0.0005
    assert sink.transcript() == sink.transcript(with_times=True).rsplit(b"\n", 2)[0] + b"\n"  # the default: no times
