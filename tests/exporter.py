"""A Prometheus exporter on loopback for scraper tests: good pages, and the bad ones a real
deployment meets (an exporter that hangs, an HTML page, HTTP errors)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PROMETHEUS_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "prometheus"
#: Text the hostile pages carry: it must never reach an error, a stored value or a response.
SECRET = "SECRET-PAGE-TEXT-7f3a"


class Exporter(ThreadingHTTPServer):
    """Serves /metrics (the vLLM v1 fixture), /llamacpp (llama-server's captured page),
    /power (a steady 500 W GPU), /hang (answers only at teardown, or after 10 s), /html,
    /boom (HTTP 500) and 404 otherwise; and hostile pages carrying SECRET: /secret-404 (an
    HTML error page), /redirect-away and /redirect-here (302s), /garbage (200 text/plain
    that is not Prometheus text), /huge (5 MiB without a length), /unknown-only and /noisy
    (a known metric with unknown labels, beside unknown metrics). `paths` lists every request.
    /power reads `clock` (perf_counter, or a test's) once per request."""

    daemon_threads = True

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.release = threading.Event()  # lets hanging handlers go at teardown
        self.clock = clock
        self.t0 = clock()
        self.paths: list[str] = []

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
        self.server.paths.append(self.path)
        if self._hostile():
            return
        if self.path == "/metrics":
            self._send(200, (PROMETHEUS_FIXTURES / "vllm_v1.txt").read_text())
        elif self.path == "/power":
            # A GPU drawing a steady 500 W: the energy counter (mJ) grows with the clock.
            joules = 500.0 * (self.server.clock() - self.server.t0)
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
        elif self.path == "/llamacpp":
            self._send(200, (PROMETHEUS_FIXTURES / "llamacpp.prom").read_text())
        elif self.path == "/boom":
            self._send(500, "internal error")
        else:
            self._send(404, "not found")

    def _hostile(self) -> bool:
        """The pages a hostile or misconfigured metrics URL answers; False for others."""
        path = self.path.split("?", 1)[0]
        if path == "/secret-404":
            self._send(404, f"<html><body><h1>{SECRET}</h1></body></html>", "text/html")
        elif path in ("/redirect-away", "/redirect-here"):
            location = (
                f"http://internal.example:8080/admin?token={SECRET}"
                if path == "/redirect-away"
                else "/redirect-target"
            )
            self.send_response(302)
            self.send_header("Location", location)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(SECRET.encode())
        elif path == "/garbage":
            self._send(200, f"{SECRET} {{{{ this is not a metrics page\n")
        elif path == "/huge":
            # No Content-Length: the body ends when the connection closes (HTTP/1.0).
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            line = f"# {SECRET} padding padding padding padding padding padding padding\n"
            with contextlib.suppress(OSError):
                for _ in range(5 * 1024 * 1024 // len(line) + 1):
                    self.wfile.write(line.encode())
        elif path == "/unknown-only":
            self._send(200, f'# TYPE corp_queue gauge\ncorp_queue{{team="{SECRET}"}} 1\n')
        elif path == "/noisy":
            long_model = "m" * 300
            self._send(
                200,
                "# TYPE vllm:num_requests_running gauge\n"
                f'vllm:num_requests_running{{model_name="{long_model}",pod="{SECRET}"}} 3\n'
                "# TYPE vllm:some_new_gauge gauge\n"
                "vllm:some_new_gauge 1\n"
                f"# TYPE corp_{SECRET.replace('-', '_')} gauge\n"
                f"corp_{SECRET.replace('-', '_')} 1\n",
            )
        else:
            return False
        return True


@contextlib.contextmanager
def running_exporter(clock: Callable[[], float] = time.perf_counter) -> Iterator[Exporter]:
    """An Exporter serving in a background thread until the block ends."""
    server = Exporter(clock)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
