"""JSON Lines read the way reb-ray reads every appended file."""

from reb_ray.jsonl import json_objects


def test_objects_in_order_torn_and_foreign_lines_skipped():
    data = b'{"a": 1}\n{"b": 2, "c": [1, 2]}\n{"torn": \n[1, 2]\n"text"\n\n{"d": "\xff"}\n'
    # a bad byte is replaced, so its object still reads; arrays and strings are no records
    assert json_objects(data) == [{"a": 1}, {"b": 2, "c": [1, 2]}, {"d": "\ufffd"}]
    assert json_objects('{"x": null}') == [{"x": None}]
    assert json_objects(None) == [] and json_objects(b"") == []
