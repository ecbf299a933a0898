"""Schemathesis against the live API's own OpenAPI document: every operation, every check,
the stateful phase included, with a team key; 0 server errors and 0 schema violations.

It runs the `st` command line (schemathesis 4) as a subprocess against the session's API
server (real Postgres and Redis), so what is tested is the document a client downloads and
the server that answers it. Bounded by examples per operation, not by time, so a loaded box
runs the same cases, only slower.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import ARTIFACTS, Api, TeamClient

pytestmark = pytest.mark.integration

# Examples per operation and phase: enough to reach each operation's 4xx branches (bad
# bodies, unknown ids, limits out of range) while the whole run stays a few minutes.
MAX_EXAMPLES = 15
SEED = 20261203
#: No check is left out. Per operation, the 422s positive_data_acceptance must tolerate
#: (rules JSON Schema cannot state there) are listed, each with its reason, in this file.
CONFIG = Path(__file__).with_name("schemathesis.toml")


def _st() -> str:
    """The `st` executable beside this interpreter (the venv's)."""
    here = Path(sys.executable).parent / "st"
    return str(here) if here.exists() else (shutil.which("st") or "st")


async def test_schemathesis_finds_nothing(api_server: Api, team: TeamClient) -> None:
    # Something for the examples to read and the stateful phase to link from.
    await team.create_endpoint(base_url="http://127.0.0.1:9/v1")
    # A folder per test process: two suites on one checkout never read each other's reports.
    out = ARTIFACTS / "schemathesis" / f"pid-{os.getpid()}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    command = [
        _st(),
        "--config-file",
        str(CONFIG),
        "run",
        f"{api_server.url}/schema/openapi.json",
        "--url",
        api_server.url,
        "--header",
        f"Authorization: Bearer {team.key}",
        "--checks",
        "all",
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        str(SEED),
        # One worker: with two, hypothesis's lambda descriptions (ast.parse) raced in
        # threads on Python 3.11 and two operations ended in schemathesis's own SystemError.
        "--workers",
        "1",
        "--request-timeout",
        "30",
        "--generation-database",
        "none",
        "--no-color",
        "--report",
        "junit,ndjson",
        "--report-dir",
        str(out),
    ]
    # In a thread: the API under test shares nothing with this loop, but the fixtures do.
    done = await asyncio.to_thread(
        subprocess.run, command, check=False, capture_output=True, text=True, timeout=1200, cwd=out
    )
    (out / "output.txt").write_text(done.stdout + done.stderr)
    assert done.returncode in (0, 1), f"schemathesis did not run:\n{done.stdout[-4000:]}"
    findings = _findings(out)
    # Exit 0 with nothing tested would prove nothing: every operation must have been tried.
    assert _operations_tested(out) >= 40, done.stdout[-3000:]
    # Nothing tolerated: no server error, no response the document does not describe, no
    # value of the wrong type accepted, no valid request refused beyond schemathesis.toml.
    assert not findings, f"schemathesis found (see {out / 'output.txt'}):\n" + "\n".join(
        f"{op}: {text}" for op, text in findings
    )


def _findings(out: Path) -> list[tuple[str, str]]:
    """(operation, failure text) for each failure in the JUnit report."""
    found: list[tuple[str, str]] = []
    for report in out.glob("junit-*.xml"):
        for case in ET.parse(report).getroot().iter("testcase"):
            for failure in case:
                if failure.tag in ("failure", "error"):
                    for part in re.split(r"\n(?=\d+\. Test Case ID)", failure.text or ""):
                        if part.strip():
                            found.append((str(case.get("name")), part.strip()))
    return found


def _operations_tested(out: Path) -> int:
    """How many operations the JUnit report has a test case for."""
    return sum(
        1 for report in out.glob("junit-*.xml") for _ in ET.parse(report).getroot().iter("testcase")
    )
