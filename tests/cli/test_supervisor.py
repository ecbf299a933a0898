"""`infercost up`'s supervisor looks up its children's descendants (for a stop after a child
died) once at the start and then every DESCENDANTS_EVERY_S, not at each 0.2 s poll: a look
reads every process's /proc entry, which kept an idle launcher at about 7% of a core on a busy
machine."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest

from cli import supervisor
from cli.supervisor import Supervisor


def _descendants(pid: int, count: int) -> set[int]:
    """The pids of `pid`'s descendants once there are `count` of them (10 s at most)."""
    deadline = time.monotonic() + 10.0
    while True:
        found = {p.pid for p in psutil.Process(pid).children(recursive=True)}
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def test_descendants_are_looked_up_at_once_then_only_now_and_then(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    go = tmp_path / "go"
    os.mkfifo(go)
    # A child with one sleeping descendant, and a second once a line comes through `go`.
    script = f"sleep 60 & read line < {go}; sleep 60 & wait"
    sup = Supervisor(["sh", "-c", script, "sh"])
    child = sup.spawn("shell", [], dict(os.environ))
    try:
        first = _descendants(child.proc.pid, 1)
        assert len(first) == 1
        monkeypatch.setattr(supervisor, "DESCENDANTS_EVERY_S", 3600.0)
        assert sup.dead_child() is None
        assert set(child.seen) == {child.proc.pid, *first}  # the first look is at once

        go.write_text("go\n")
        both = _descendants(child.proc.pid, 2)
        assert len(both) == 2
        assert sup.dead_child() is None
        assert set(child.seen) == {child.proc.pid, *first}  # not looked for again yet

        monkeypatch.setattr(supervisor, "DESCENDANTS_EVERY_S", 0.0)
        assert sup.dead_child() is None
        assert set(child.seen) == {child.proc.pid, *both}
    finally:
        sup.stop_children()
    assert not any(psutil.pid_exists(pid) for pid in child.seen)
