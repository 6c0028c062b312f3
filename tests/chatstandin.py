"""A local stand-in for an OpenAI-compatible chat endpoint, for tests that drive the real `openai` client:
a threaded HTTP server on 127.0.0.1 whose subclasses decide each answer."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ChatStandIn:
    """POST {url}/chat/completions → `self.answer(body)`, which returns (HTTP status, response bytes). `stop` is
    set on close, so an answer that waits on it (a timeout test) ends with the server."""

    def __init__(self):
        self.stop = threading.Event()
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                if self.path != "/v1/chat/completions":
                    return self.send(404, b'{"error": {"message": "not found"}}')
                self.send(*standin.answer(body))

            def send(self, code: int, data: bytes):
                try:
                    self.send_response(code)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (timeout test)
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def answer(self, body: dict) -> tuple[int, bytes]:
        raise NotImplementedError

    def close(self):
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()
