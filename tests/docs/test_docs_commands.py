"""Every `sh` block of README.md and docs/*.md, run as a reader would run it.

A stack is started the way `make run` starts one (`infercost up`: the API, a worker, the
maintenance process and the two demo simulators registered as `sim-fixed` and `sim-gpu`, the
default team's key saved in `.infercost/default-team.key`), in a scratch directory with `.venv`
linked in, on free ports and a database and Celery queue of its own. Each page's `sh` blocks then
run in order in one bash, with `set -eo pipefail`, curl failing on any HTTP error status, and the
variables docs/README.md sets (PATH with .venv/bin, API, KEY, auth). The pages' addresses
(`127.0.0.1:8000` for the API, `:9100` and `:9101` for the simulators) are rewritten to this
stack's ports. A block that cannot run here carries `<!-- docs-test: skip (reason) -->` on the
line above it.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import ARTIFACTS, REDIS, ROOT, _pg_url, _run_sql, free_port

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(\s*)(```+)\s*([\w+-]*)")
SKIP = re.compile(r"^\s*<!--\s*docs-test:\s*skip\s*(?:\((.*)\))?\s*-->\s*$")
# Fence languages that read as shell commands but would not be run: use `sh`, or `console`
# for a transcript of commands with their output.
UNRUN_SHELLS = {"bash", "shell", "zsh"}
PAGE_TIMEOUT_S = 420.0
READY_TIMEOUT_S = 240.0
SCRUBBED_PREFIXES = ("INFERCOST_",)
SCRUBBED = ("DATABASE_URL", "REDIS_URL")


@dataclass(frozen=True)
class Block:
    """One fenced block of a page."""

    page: str
    number: int  # 1-based among the page's fenced blocks
    line: int  # 1-based line of its opening fence
    lang: str
    text: str
    skip_reason: str | None  # the marker's reason; None when there is no marker


def blocks_of(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown page, with the skip marker above each, if any."""
    lines = path.read_text().splitlines()
    name = str(path.relative_to(ROOT))
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, lang = m.group(1), m.group(2), m.group(3)
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(ticks):
            body.append(lines[i].removeprefix(indent))
            i += 1
        i += 1  # the closing fence
        above = start - 1
        while above >= 0 and not lines[above].strip():
            above -= 1
        marker = SKIP.match(lines[above]) if above >= 0 else None
        reason = None if marker is None else (marker.group(1) or "").strip()
        out.append(Block(name, len(out) + 1, start + 1, lang, "\n".join(body), reason))
    return out


def runnable(path: Path) -> list[Block]:
    return [b for b in blocks_of(path) if b.lang == "sh" and b.skip_reason is None]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_markers(page: Path) -> None:
    """Skip markers give a reason and sit above an `sh` block; no shell block hides from the
    runner under another fence name."""
    text = page.read_text()
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("<!--") and "docs-test" in line:
            m = SKIP.match(line)
            assert m is not None, f"{page.name}:{number}: unreadable docs-test marker: {line}"
            assert (m.group(1) or "").strip(), f"{page.name}:{number}: a skip needs a (reason)"
    for block in blocks_of(page):
        assert block.lang not in UNRUN_SHELLS, (
            f"{block.page}:{block.line}: a ```{block.lang} block is not run by this test; "
            "fence commands as ```sh (or mark them skipped with a reason)"
        )
        if block.skip_reason is not None:
            assert block.lang == "sh", (
                f"{block.page}:{block.line}: a docs-test marker above a ```{block.lang} block"
            )


LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    in_fence = False
    found = set()
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and line.startswith("#"):
            found.add(_slug(line.lstrip("#")))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_links(page: Path) -> None:
    """Every relative link names a file that exists, and a heading in it when it has #anchor."""
    for target in LINK.findall(page.read_text()):
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        assert path.exists(), f"{page.name}: link to {target}: no such file"
        if anchor and path.suffix == ".md":
            assert anchor in _anchors(path), f"{page.name}: link to {target}: no such heading"


# ------------------------------------------------------------------------- the stack


@dataclass(frozen=True)
class Stack:
    """A running `infercost up` and the scratch directory the pages run in."""

    work: Path
    env: dict[str, str]
    api: str
    key: str
    sim_port: int
    sim_gpu_port: int


def _wait_ready(proc: subprocess.Popen[bytes], log: Path, key_file: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"infercost up exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        if key_file.exists() and "infercost is running" in log.read_text(errors="replace"):
            return
        time.sleep(0.5)
    pytest.fail(
        f"infercost up was not ready in {READY_TIMEOUT_S:.0f} s:\n{log.read_text()[-4000:]}"
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)  # up stops its children, then its services
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """`infercost up` in a scratch directory, on its own database, queue and ports."""
    work = tmp_path_factory.mktemp("docs")
    venv = Path(sys.prefix)
    (work / ".venv").symlink_to(venv)
    (work / "bench").symlink_to(ROOT / "bench")  # the pages run from the repository's root
    (work / "docs").symlink_to(ROOT / "docs")  # and import its examples (docs/examples/)
    database = f"infercost_docs_{uuid.uuid4().hex[:10]}"
    _run_sql(f'CREATE DATABASE "{database}"')
    api_port, sim_port, sim_gpu_port = free_port(), free_port(), free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in SCRUBBED and not k.startswith(SCRUBBED_PREFIXES)
    }
    env.update(
        DATABASE_URL=_pg_url(database, "postgresql+asyncpg"),
        REDIS_URL=REDIS,
        INFERCOST_QUEUE=f"docs-{uuid.uuid4().hex[:8]}",
        INFERCOST_DATA_DIR=str(work / ".infercost"),
        INFERCOST_PORT=str(api_port),
        # The pages poll jobs while they run; the limit itself is tested elsewhere.
        INFERCOST_RATE_LIMIT_PER_MINUTE="100000",
        # On a machine shared by the suite's other sessions, the load generator's pauses
        # would leave the pages' evidence out as client_paused (tests/conftest.py says why).
        INFERCOST_PAUSE_EXPOSURE_LIMIT="0.5",
        PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = ARTIFACTS / "docs-up.log"
    argv = [str(venv / "bin" / "infercost"), "up", "--port", str(api_port)]
    argv += ["--sim-port", str(sim_port), "--sim-gpu-port", str(sim_gpu_port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        key_file = work / ".infercost" / "default-team.key"
        _wait_ready(proc, log, key_file)
        yield Stack(
            work=work,
            env=env,
            api=f"http://127.0.0.1:{api_port}",
            key=key_file.read_text().strip(),
            sim_port=sim_port,
            sim_gpu_port=sim_gpu_port,
        )
    finally:
        _stop(proc)
        _run_sql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def _localise(text: str, stack: Stack) -> str:
    """The page's addresses, pointed at this stack."""
    text = text.replace("http://127.0.0.1:8000", stack.api)
    text = text.replace("127.0.0.1:9100", f"127.0.0.1:{stack.sim_port}")
    return text.replace("127.0.0.1:9101", f"127.0.0.1:{stack.sim_gpu_port}")


def _cancel_unfinished(stack: Stack) -> None:
    """Cancel what a page left queued or running, so the next page's jobs do not wait."""
    headers = {"Authorization": f"Bearer {stack.key}"}
    with httpx.Client(base_url=stack.api, headers=headers, timeout=30.0) as client:
        for status in ("queued", "running"):
            page = client.get("/v1/jobs", params={"status": status, "limit": 500}).json()
            for job in page.get("items", []):
                client.post(f"/v1/jobs/{job['id']}/cancel")


PRELUDE = """set -eo pipefail
__docs_block=0
trap 'echo "docs-test: block $__docs_block: exit $? from: $BASH_COMMAND" >&2' ERR
curl() { command curl --fail-with-body "$@"; }
export API=@API@ KEY=@KEY@
auth="Authorization: Bearer $KEY"
"""


@pytest.mark.integration
@pytest.mark.parametrize(
    "page",
    [p for p in PAGES if runnable(p)],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_page_commands(page: Path, stack: Stack) -> None:
    """The page's `sh` blocks, in order, in one bash: each command must succeed."""
    blocks = runnable(page)
    script = PRELUDE.replace("@API@", stack.api).replace("@KEY@", stack.key)
    for block in blocks:
        script += f"\n__docs_block={block.number}\n{_localise(block.text, stack)}\n"
    try:
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=stack.work,
            env=stack.env,
            capture_output=True,
            text=True,
            timeout=PAGE_TIMEOUT_S,
            check=False,
        )
        output, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        parts = [
            p.decode(errors="replace") if isinstance(p, bytes) else p or ""
            for p in (exc.stdout, exc.stderr)
        ]
        output = f"{''.join(parts)}\n(timed out after {PAGE_TIMEOUT_S:.0f} s)"
        code = -1
    finally:
        _cancel_unfinished(stack)
    log_name = str(page.relative_to(ROOT).with_suffix("")).replace("/", "-")
    (ARTIFACTS / f"docs-page-{log_name}.log").write_text(output)
    if code != 0:
        failed = re.findall(r"docs-test: block (\d+):", output)
        number = int(failed[-1]) if failed else None
        failing = next((b for b in blocks if b.number == number), None)
        where = (
            f"block {number} (line {failing.line}):\n{failing.text}"
            if failing
            else "(block unknown)"
        )
        pytest.fail(
            f"{page.relative_to(ROOT)}: exit {code} in {where}\n--- output (last 6000 "
            f"characters) ---\n{output[-6000:]}"
        )
