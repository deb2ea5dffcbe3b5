"""Bounded reads of agent-controlled files (report.json) on both providers (issue 11, item 5).

A symlink out of the sandbox, a FIFO, /dev/zero or a huge file must end as a one-line
ValueError at once, never a hang, an unbounded read or a crash of the trial.
"""

from __future__ import annotations

import time

import pytest


def test_read_regular_refuses_what_is_not_a_small_regular_file(make_sandbox):
    sb = make_sandbox()
    d = sb.workdir
    sb.write_bytes(f"{d}/ok.json", b'{"x": 1}')
    assert sb.read_regular(f"{d}/ok.json", 100) == b'{"x": 1}'
    setup = (f"ln -s /etc/shadow {d}/shadow.json && ln -s /dev/zero {d}/zero.json && mkfifo {d}/fifo.json"
             f" && mkdir {d}/dir.json && head -c 3000000 /dev/zero > {d}/big.json")
    assert sb.exec(["sh", "-c", setup]).ok
    for name, why in [("shadow", "not a regular file"), ("zero", "not a regular file"), ("fifo", "not a regular file"),
                      ("dir", "not a regular file"), ("big", "too large")]:
        start = time.monotonic()
        with pytest.raises(ValueError, match=why) as info:
            sb.read_regular(f"{d}/{name}.json", 1 << 20)
        assert "\n" not in str(info.value) and time.monotonic() - start < 10
    with pytest.raises(FileNotFoundError):
        sb.read_regular(f"{d}/nope.json", 100)
