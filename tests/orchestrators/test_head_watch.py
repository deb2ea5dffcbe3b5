"""The head watch's rule on real sockets (no Ray): a listening port keeps it quiet, a closed one
is reported once, after `lost_after_s` of failures and not before; one answer in between starts
the count again."""

from __future__ import annotations

import socket
import threading
import time

from reb_ray.orchestrators.head_watch import HeadWatch, Watched


def _listener() -> socket.socket:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    return server


def test_a_closed_port_is_reported_once_after_the_grace_and_a_live_one_never():
    live, dying = _listener(), _listener()
    targets = [Watched("the live one", "127.0.0.1", live.getsockname()[1]),
               Watched("the head's GCS", "127.0.0.1", dying.getsockname()[1])]
    calls: list[tuple[float, str]] = []
    fired = threading.Event()

    def on_lost(what: str) -> None:
        calls.append((time.monotonic(), what))
        fired.set()

    watch = HeadWatch(targets, on_lost, interval_s=0.05, lost_after_s=0.5).start()
    try:
        time.sleep(0.4)
        assert calls == []  # both answer
        closed_at = time.monotonic()
        dying.close()
        assert fired.wait(5), "a closed port was never reported"
        time.sleep(0.3)  # nothing more after the one call
    finally:
        watch.stop()
        live.close()
    assert len(calls) == 1
    at, what = calls[0]
    assert 0.5 <= at - closed_at < 2.0, at - closed_at
    assert what.startswith(f"the head's GCS at 127.0.0.1:{targets[1].port} is gone (") and " for 0." in what, what
    assert watch.lost == what


def test_one_answer_between_failures_restarts_the_count():
    server = _listener()
    port = server.getsockname()[1]
    calls: list[str] = []
    watch = HeadWatch([Watched("the head's raylet", "127.0.0.1", port)], calls.append, interval_s=0.05,
                      lost_after_s=0.6)
    watch.start()
    try:
        for _ in range(2):  # down 0.35 s, up 0.2 s: never 0.6 s down in a row
            server.close()
            time.sleep(0.35)
            server = socket.socket()
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("127.0.0.1", port))
            server.listen(64)
            time.sleep(0.2)
        assert calls == []
        server.close()
        deadline = time.monotonic() + 5
        while not calls and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        watch.stop()
        server.close()
    assert len(calls) == 1 and calls[0].startswith("the head's raylet at "), calls
