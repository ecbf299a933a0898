"""What `infercost up` prints once everything answers: where things are, the team key on
first start, and a first job to submit."""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Sequence
from pathlib import Path

from cli.demo import SIM_ENDPOINT, DemoEndpoint, Seeded


def shell_path(path: Path) -> str:
    """`path` as short as it can be written in a shell command run from here."""
    with contextlib.suppress(ValueError):
        return shlex.quote(str(path.relative_to(Path.cwd())))
    return shlex.quote(str(path))


def banner_lines(
    *,
    api_url: str,
    key_file: Path,
    seeded: Seeded,
    token_source: str,
    demos: Sequence[DemoEndpoint],
    ready_s: float,
    migrated_s: float,
) -> list[str]:
    """The banner, line by line."""
    key_arg = f'"Authorization: Bearer $(cat {shell_path(key_file)})"'
    lines = [
        "",
        f"infercost is running (ready in {ready_s:.1f} s; database ready and migrated "
        f"after {migrated_s:.1f} s)",
        f"  API          {api_url}",
        f"  docs         {api_url}/schema",
    ]
    if seeded.team_key is not None:
        lines.append(f"  team key     {seeded.team_key}")
        lines.append(f"               (saved in {key_file})")
    lines.append(f"  admin token  in {token_source}")
    ids = seeded.endpoint_ids
    for demo in demos:
        if demo.name in ids:
            lines.append(
                f"  demo         endpoint '{demo.name}' (id {ids[demo.name]}), "
                f"simulator at {demo.base_url}"
            )
    endpoint_id = ids.get(SIM_ENDPOINT)
    # The CLI finds the API at 127.0.0.1:8000 unless told (INFERCOST_URL or --url).
    url_option = "" if api_url == "http://127.0.0.1:8000" else f" --url {api_url}"
    if endpoint_id is not None:
        lines += [
            "",
            "A first job with the CLI, in another terminal in this directory:",
            "  export PATH=$PWD/.venv/bin:$PATH",
            f"  infercost jobs submit --endpoint {SIM_ENDPOINT} --levels 1,8 --input-tokens 128 "
            f"--output-tokens 64 --requests 50 --warmup 4 --watch{url_option}",
            "Or over HTTP:",
            f"  curl -s -X POST {api_url}/v1/jobs -H {key_arg} \\",
            "    -H 'Content-Type: application/json' \\",
            f'    -d \'{{"endpoint_id": "{endpoint_id}", '
            '"workload": {"input_tokens": {"mean": 128}, "output_tokens": {"mean": 64}}, '
            '"load": {"mode": "concurrency", "levels": [1, 8], "requests_per_level": 50, '
            '"warmup_requests": 4}}\'',
            "Read it back (the id is in the response):",
            f"  curl -s {api_url}/v1/jobs/<job id> -H {key_arg}",
        ]
    lines += ["", "Press Ctrl-C to stop everything.", ""]
    return lines
