"""A Prometheus exporter on loopback for scraper tests: good pages, and the bad ones a real
deployment meets (an exporter that hangs, an HTML page, HTTP errors)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PROMETHEUS_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "prometheus"


class Exporter(ThreadingHTTPServer):
    """Serves /metrics (the vLLM v1 fixture), /power (a steady 500 W GPU), /hang (answers
    only at teardown, or after 10 s), /html, /boom (HTTP 500) and 404 otherwise."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.release = threading.Event()  # lets hanging handlers go at teardown
        self.t0 = time.perf_counter()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Exporter

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(
        self, status: int, body: str, content_type: str = "text/plain; version=0.0.4"
    ) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/metrics":
            self._send(200, (PROMETHEUS_FIXTURES / "vllm_v1.txt").read_text())
        elif self.path == "/power":
            # A GPU drawing a steady 500 W: the energy counter (mJ) grows with real time.
            joules = 500.0 * (time.perf_counter() - self.server.t0)
            self._send(
                200,
                "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
                'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-x"} 500\n'
                "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
                f'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{gpu="0",UUID="GPU-x"}} {joules * 1000:.3f}\n',
            )
        elif self.path == "/hang":
            self.server.release.wait(10)
            self._send(200, "")
        elif self.path == "/html":
            self._send(
                200, "<html><head><title>Welcome</title></head><body>hi</body></html>", "text/html"
            )
        elif self.path == "/boom":
            self._send(500, "internal error")
        else:
            self._send(404, "not found")


@contextlib.contextmanager
def running_exporter() -> Iterator[Exporter]:
    """An Exporter serving in a background thread until the block ends."""
    server = Exporter()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
