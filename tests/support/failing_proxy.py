"""An HTTP proxy in front of a real server that answers 503 while told to: a registry
overloaded or restarting, as its clients meet it, with the real one behind."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

import httpx

FORWARDED_HEADERS = ("content-type", "accept", "authorization")


class FailingProxy:
    """Forwards every request to ``upstream`` (``http://host:port``), or, while
    ``failing`` is set, answers it 503 with a Confluent-style error body; counts both."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.failing = threading.Event()
        self.forwarded = 0
        self.refused = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                proxy.answer(self)

            do_POST = do_PUT = do_DELETE = do_GET

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("content-length") or 0)
        body = request.rfile.read(length) if length else b""
        if self.failing.is_set():
            self.refused += 1
            status, content_type = 503, "application/json"
            content = b'{"error_code": 50301, "message": "overloaded (a test)"}'
        else:
            self.forwarded += 1
            upstream = httpx.request(
                request.command, self.upstream + request.path, content=body, timeout=30,
                headers={name: value for name, value in request.headers.items()
                         if name.lower() in FORWARDED_HEADERS})
            status, content = upstream.status_code, upstream.content
            content_type = upstream.headers.get("content-type", "application/json")
        request.send_response(status)
        request.send_header("Content-Type", content_type)
        request.send_header("Content-Length", str(len(content)))
        request.end_headers()
        request.wfile.write(content)

    def __enter__(self) -> FailingProxy:
        self.thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.server.shutdown()
        self.server.server_close()
