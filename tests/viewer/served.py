"""The viewer served for real on a free port of 127.0.0.1, in a thread of the test process,
and fetched over HTTP with urllib."""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from aiohttp import web

from reb_ray.viewer.server import SUMMARY_KEY, make_app


class Served:
    """`make_app(output_dir, early_summary)` listening on 127.0.0.1:<free port> until `close`."""

    def __init__(self, output_dir: Path, early_summary=None) -> None:
        self.app = make_app(output_dir, early_summary)
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        def main() -> None:
            asyncio.set_event_loop(self.loop)
            self.runner = web.AppRunner(self.app)
            self.loop.run_until_complete(self.runner.setup())
            site = web.TCPSite(self.runner, "127.0.0.1", 0)
            self.loop.run_until_complete(site.start())
            self.port = self.runner.addresses[0][1]
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=main, daemon=True)
        self.thread.start()
        assert ready.wait(30), "the viewer did not start"
        self.base = f"http://127.0.0.1:{self.port}"

    def get(self, path: str) -> tuple[int, dict, bytes]:
        """(status, headers, body) of GET `path`."""
        try:
            with urllib.request.urlopen(self.base + path, timeout=60) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read()

    def text(self, path: str) -> str:
        status, _, body = self.get(path)
        assert status == 200, (path, status, body[:500])
        return body.decode()

    def wait_summary(self, timeout_s: float = 120) -> None:
        """Until the child process computing the paper's table has finished (and was started)."""
        deadline = time.monotonic() + timeout_s
        self.get("/")
        while self.app[SUMMARY_KEY].running is not None or self.app[SUMMARY_KEY].snapshot is None:
            assert time.monotonic() < deadline, "the summary did not finish"
            time.sleep(0.2)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
