"""Run the simulator as a child process on a free port: what tests use as a real endpoint."""

from __future__ import annotations

import re
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sim.config import SimConfig

# The child imports only sim (not the whole CLI) and serves until SIGTERM.
_CHILD_CODE = (
    "import sys\n"
    "from sim.config import SimConfig\n"
    "from sim.server import serve\n"
    "serve(SimConfig.from_json(sys.argv[1]))\n"
)
_STARTUP_LINE = re.compile(rb"^sim listening on (http://\S+) \(")


@dataclass(slots=True)
class SimProcess:
    """A running simulator child; `base_url` is `http://host:port` (OpenAI base: `+ /v1`)."""

    config: SimConfig
    base_url: str
    process: subprocess.Popen[bytes]

    @property
    def openai_base_url(self) -> str:
        """The URL an OpenAI client or an endpoint's `base_url` should use."""
        return self.base_url + "/v1"

    @property
    def metrics_url(self) -> str:
        """Where the Prometheus text lives (for an endpoint's `metrics_urls`)."""
        return self.base_url + "/metrics"

    def stop(self, timeout_s: float = 5.0) -> None:
        """SIGTERM (uvicorn shuts down gracefully), then SIGKILL if it lingers."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout_s)
        if self.process.stdout is not None:
            self.process.stdout.close()


def start_sim_process(
    config: SimConfig | None = None, *, startup_timeout_s: float = 20.0
) -> SimProcess:
    """Start `serve(config)` in a child Python and wait for its startup line.

    Pass `SimConfig(port=0, ...)` (the default) to get a free port; the child prints the
    port it bound, so there is no race between picking a port and binding it.
    """
    config = config if config is not None else SimConfig(port=0)
    process = subprocess.Popen(  # noqa: S603 - fixed argv, our own interpreter and code
        [sys.executable, "-c", _CHILD_CODE, config.to_json()],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
    )
    try:
        url = wait_for_startup_line(process, startup_timeout_s)
    except BaseException:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()
        raise
    return SimProcess(config=config, base_url=url, process=process)


def wait_for_startup_line(process: subprocess.Popen[bytes], timeout_s: float = 20.0) -> str:
    """Read the child's stdout up to `sim listening on URL (...)` and return URL.

    Works for any child started with stdout=PIPE, `infercost sim` included.
    """
    if process.stdout is None:
        raise ValueError("start the simulator with stdout=subprocess.PIPE")
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"simulator printed no startup line within {timeout_s} s")
            if selector.select(remaining):
                line = process.stdout.readline()
                if not line:
                    code = process.wait()
                    raise RuntimeError(f"simulator exited with status {code} before starting")
                match = _STARTUP_LINE.match(line)
                if match is not None:
                    return match.group(1).decode()


@contextmanager
def sim_process(
    config: SimConfig | None = None, *, startup_timeout_s: float = 20.0
) -> Iterator[SimProcess]:
    """`with sim_process(SimConfig(port=0, ttft_ms=50)) as sim:` ... stopped on exit."""
    sim = start_sim_process(config, startup_timeout_s=startup_timeout_s)
    try:
        yield sim
    finally:
        sim.stop()
