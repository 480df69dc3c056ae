"""A local HTTP server for the download tests: serves files from memory on 127.0.0.1,
answers Range requests (206, Content-Range, If-Range by ETag), and can cut the first
response of each file halfway (a transfer that ends early, as a dropped connection does).

It runs in a daemon thread for the ``with`` block only; each connection times out after a
few seconds, so nothing outlives the test.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass
class Served:
    """What the server holds and saw: files by name, and each request's (name, Range)."""

    files: dict[str, bytes]
    cut_first: bool = False
    ranges: bool = True  # False: ignore Range and always send the whole file
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    base_url: str = ""

    def count(self, name: str) -> int:
        return sum(1 for n, _ in self.requests if n == name)


def _handler(served: Served) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = 5

        def log_message(self, *args: object) -> None:  # keep test output clean
            pass

        def do_GET(self) -> None:
            name = self.path.rsplit("/", 1)[-1]
            rng = self.headers.get("Range")
            served.requests.append((name, rng))
            body = served.files.get(name)
            if body is None:
                self.send_error(404, "no such file")
                return
            etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
            first = served.count(name) == 1
            start = 0
            m = re.match(r"bytes=(\d+)-$", rng or "")
            if_range = self.headers.get("If-Range")
            if served.ranges and m and (if_range is None or if_range == etag):
                start = int(m.group(1))
                if start >= len(body):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(body)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(len(body) - start))
            self.send_header("ETag", etag)
            self.end_headers()
            rest = body[start:]
            if served.cut_first and first:
                self.wfile.write(rest[: len(rest) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(rest)

    return Handler


@contextmanager
def serve(files: dict[str, bytes], **options: bool) -> Iterator[Served]:
    """Serve ``files`` on 127.0.0.1 for the block; yields the :class:`Served` record."""
    served = Served(files, **options)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(served))
    server.daemon_threads = True
    served.base_url = f"http://127.0.0.1:{server.server_address[1]}/data/mdcr/"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def release_bytes(fixture: Path) -> dict[str, bytes]:
    """The four release file names with the fixture's bytes (val = a copy of test)."""
    test_json = (fixture / "mdcr_test.json").read_bytes()
    test_data = (fixture / "mdcr_test_data.jsonl").read_bytes()
    return {
        "mdcr_val.json": test_json,
        "mdcr_test.json": test_json,
        "mdcr_val_data.jsonl": test_data,
        "mdcr_test_data.jsonl": test_data,
    }
