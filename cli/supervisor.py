"""The process supervisor behind `infercost up`: children in their own process groups,
signals, readiness waits, and a stop that leaves no process behind."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import click
import httpx
import psutil

from cli.embedded import child_process_kwargs
from infercost.net.tls import tls_context

# Bounds on each phase; a slow machine's cold start (initdb + migrations) fits easily.
READY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 10.0
POLL_S = 0.2
#: How often the children's descendants are looked up while they run: each look reads every
#: process's /proc entry (psutil), about 7% of a core at POLL_S on a busy machine. A child's
#: process group is signalled as a whole while the child lives; the list is for what is left
#: when it has died.
DESCENDANTS_EVERY_S = 5.0


class LauncherError(RuntimeError):
    """`up` cannot go on; the message says what happened and what to do."""


@dataclass
class Child:
    """A supervised child process: the leader of its own process group."""

    name: str
    proc: subprocess.Popen[bytes]
    # Descendants seen so far (e.g. Celery's pool), so a stop can wait for them too.
    seen: dict[int, psutil.Process] = field(default_factory=dict)

    def remember_descendants(self) -> None:
        """Record the child and its current descendants."""
        if self.proc.poll() is not None:  # reaped: its pid may belong to someone else now
            return
        try:
            root = psutil.Process(self.proc.pid)
            for p in [root, *root.children(recursive=True)]:
                self.seen.setdefault(p.pid, p)
        except psutil.NoSuchProcess:
            pass

    def signal_group(self, sig: int) -> None:
        """Send `sig` to the child's process group, or to what is left of it."""
        if self.proc.poll() is None:
            # Not reaped, so the group id cannot have been reused yet.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)
            return
        for p in self.seen.values():  # psutil refuses to signal a reused pid
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                p.send_signal(sig)


def infercost_argv() -> list[str]:
    """How to run this package's command line in a child process.

    The `infercost` script next to the interpreter when installed, else the same entry
    point through `python -c` (the package has no `__main__`).
    """
    script = Path(sys.executable).with_name("infercost")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-c", "from cli import main; main()"]


def exit_text(returncode: int | None) -> str:
    """How a child ended, in words: 'exited with code 2', 'was killed by SIGKILL'."""
    if returncode is not None and returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


class Supervisor:
    """Starts `infercost` subcommands as children, watches them, and stops them all.

    SIGINT and SIGTERM (while `handling_signals`) are noted once; during startup they also
    unwind the step in progress (KeyboardInterrupt), except inside `signals_deferred`.
    """

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.children: list[Child] = []
        self.signal: int | None = None
        self.starting = True
        self._descendants_at = -math.inf  # monotonic time of the last look

    # -- signals

    @contextlib.contextmanager
    def handling_signals(self) -> Iterator[None]:
        """Route SIGINT and SIGTERM here while inside; restore the old handlers after."""
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        first = self.signal is None
        if first:
            self.signal = signum
            click.echo(f"\nup: {signal.Signals(signum).name} received; stopping everything")
        if first and self.starting:
            # Startup blocks in places that do not poll (pg_ctl, migrations); unwind them.
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def signals_deferred(self) -> Iterator[None]:
        """Only note a signal while inside; act on it after.

        For steps that must not be cut in half (initdb, pg_ctl, spawning Redis): an
        exception there could leave a half-made cluster or an unrecorded server.
        """
        starting, self.starting = self.starting, False
        try:
            yield
        finally:
            self.starting = starting
        self.check_stop()

    def check_stop(self) -> None:
        """Unwind (KeyboardInterrupt) once a stop signal came."""
        if self.signal is not None:
            raise KeyboardInterrupt

    # -- children

    def spawn(self, name: str, args: list[str], env: dict[str, str]) -> Child:
        """Start `infercost ARGS` as a supervised child."""
        with self.signals_deferred():  # so that every started child is recorded
            try:
                proc = subprocess.Popen(  # noqa: S603 - our own command line, no shell
                    [*self.argv, *args],
                    env=env,
                    stdin=subprocess.DEVNULL,
                    **child_process_kwargs(),
                )
            except OSError as exc:
                raise LauncherError(f"could not start the {name}: {exc}") from exc
            child = Child(name, proc)
            self.children.append(child)
        return child

    def dead_child(self, besides: Child | None = None) -> Child | None:
        """A child that exited (other than `besides`), noting the others' descendants every
        DESCENDANTS_EVERY_S."""
        now = time.monotonic()
        look = now - self._descendants_at >= DESCENDANTS_EVERY_S
        for child in self.children:
            if child is besides:
                continue
            if child.proc.poll() is not None:
                return child
            if look:
                child.remember_descendants()
        if look:
            self._descendants_at = now
        return None

    def raise_if_dead(self, besides: Child | None = None) -> None:
        """LauncherError when a child died while starting."""
        child = self.dead_child(besides)
        if child is not None:
            raise LauncherError(
                f"the {child.name} {exit_text(child.proc.returncode)} while starting; "
                "see its output above"
            )

    def wait_exit(self, child: Child, timeout_s: float, on_timeout: str) -> int:
        """Wait for a one-off child (migrations) and forget it; its exit code."""
        deadline = time.monotonic() + timeout_s
        while (code := child.proc.poll()) is None:
            self.check_stop()
            self.raise_if_dead(besides=child)
            if time.monotonic() > deadline:
                raise LauncherError(on_timeout)
            time.sleep(POLL_S)
        self.children.remove(child)
        return code

    def wait_http(self, url: str, what: str) -> None:
        """Until `url` answers 200 (LauncherError after READY_TIMEOUT_S)."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        with httpx.Client(timeout=2.0, verify=tls_context()) as client:
            while True:
                self.check_stop()
                self.raise_if_dead()
                try:
                    if client.get(url).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise LauncherError(
                        f"the {what} did not answer {url} within {READY_TIMEOUT_S:.0f} s"
                    )
                time.sleep(POLL_S)

    def watch(self) -> int:
        """Serve until a signal (0) or a child's death (1)."""
        while self.signal is None:
            child = self.dead_child()
            if child is not None:
                click.secho(
                    f"up: the {child.name} {exit_text(child.proc.returncode)} unexpectedly; "
                    "stopping the rest",
                    fg="red",
                    err=True,
                )
                return 1
            time.sleep(POLL_S)
        return 0

    def stop_children(self) -> None:
        """SIGTERM every child's group, wait, then SIGKILL what is left (and its
        descendants)."""
        children, self.children = self.children, []
        for child in children:
            child.remember_descendants()
            child.signal_group(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for child in children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        pending = [p for child in children for p in child.seen.values()]
        _, alive = psutil.wait_procs(pending, timeout=max(0.1, deadline - time.monotonic()))
        stubborn = [c for c in children if c.proc.poll() is None]
        if alive or stubborn:
            names = ", ".join(c.name for c in stubborn) or "child processes"
            click.echo(f"up: {names} did not stop within {STOP_TIMEOUT_S:.0f} s; killing")
            for child in children:
                child.signal_group(signal.SIGKILL)
            for p in alive:
                with contextlib.suppress(psutil.NoSuchProcess):
                    p.kill()
            psutil.wait_procs(alive, timeout=5)
            for child in children:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.proc.wait(timeout=5)
