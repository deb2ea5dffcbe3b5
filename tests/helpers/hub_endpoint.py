"""A tiny scripted Hugging Face Hub endpoint (HF_ENDPOINT) for tests: the Hub cannot be
reached here, so this serves the four routes `huggingface_hub.snapshot_download` uses, for
any repo id, with the same files: revision info, the recursive tree, and HEAD/GET resolve."""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import threading
from urllib.parse import unquote, urlparse

COMMIT = "c0ffee" + "0" * 34
FILES = {"config.json": b'{"hidden_size": 8}', "weights/tiny.bin": b"\x00\x01" * 8}


class _Handler(http.server.BaseHTTPRequestHandler):
    requests: list[str] = []

    def log_message(self, *args) -> None:
        self.requests.append(f"{self.command} {self.path}")

    def _send(self, code: int, body: bytes, headers: dict[str, str], head: bool) -> None:
        self.send_response(code)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _route(self, head: bool) -> None:
        path = unquote(urlparse(self.path).path)
        as_json = {"Content-Type": "application/json"}
        if m := re.fullmatch(r"/api/(models|datasets)/(.+?)/revision/[^/]+", path):
            info = {"id": m[2], "sha": COMMIT, "siblings": [{"rfilename": f} for f in FILES]}
            return self._send(200, json.dumps(info).encode(), as_json, head)
        if re.fullmatch(r"/api/(models|datasets)/.+?/tree/[^/]+(/.*)?", path):
            tree = [{"type": "file", "path": f, "size": len(b), "oid": hashlib.sha1(b).hexdigest()} for f, b in FILES.items()]
            return self._send(200, json.dumps(tree).encode(), as_json, head)
        if (m := re.fullmatch(r"/(?:datasets/)?.+?/resolve/[^/]+/(.+)", path)) and m[1] in FILES:
            body = FILES[m[1]]
            return self._send(200, body, {"X-Repo-Commit": COMMIT, "ETag": f'"{hashlib.sha1(body).hexdigest()}"'}, head)
        self._send(404, b"{}", {"X-Error-Code": "EntryNotFound"}, head)

    def do_GET(self) -> None:
        self._route(head=False)

    def do_HEAD(self) -> None:
        self._route(head=True)


class HubEndpoint:
    """Context manager: serves on 127.0.0.1; `url` is the HF_ENDPOINT value, `requests` the log."""

    def __enter__(self) -> HubEndpoint:
        handler = type("Handler", (_Handler,), {"requests": []})
        self.requests = handler.requests
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
