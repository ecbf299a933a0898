"""`infercost export JOB -o FILE`: save a job's one-file export (GET /v1/jobs/{id}/export),
infercost's own JSON Lines or, with --format llmd, llm-d benchmark reports (version 0.2)."""

from __future__ import annotations

import gzip
import os
import shutil
import tempfile
from pathlib import Path

import click

from cli import resolve
from cli.client import ApiClient, api_options
from cli.output import emit_json, json_option


def _save(client: ApiClient, job: str, output: Path, fmt: str = "jsonl") -> int:
    """Stream the export into `output` through a temporary file beside it, so a transfer
    that breaks off never leaves a half file under the name asked for. A name ending .gz
    keeps the body gzipped (compressed here if the server sent it plain)."""
    compressed = output.suffix == ".gz"
    folder = output.resolve().parent
    handle, temp_name = tempfile.mkstemp(prefix=".infercost-export-", dir=folder)
    temp = Path(temp_name)
    try:
        with os.fdopen(handle, "wb") as sink:
            headers = {"Accept-Encoding": "gzip" if compressed else "identity"}
            written, encoding = client.download(
                f"/v1/jobs/{job}/export?format={fmt}", sink, raw=compressed, headers=headers
            )
        if compressed and encoding != "gzip":
            plain = temp.with_name(temp.name + ".plain")
            temp.rename(plain)
            with plain.open("rb") as src, gzip.open(temp, "wb") as dst:
                shutil.copyfileobj(src, dst)
            plain.unlink()
            written = temp.stat().st_size
        temp.replace(output)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return written


@click.command()
@click.argument("job", type=resolve.JOB)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to save it (default: job-JOB.jsonl, job-JOB.llmd.jsonl); a name ending .gz "
    "saves it gzipped.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "llmd"]),
    default="jsonl",
    show_default=True,
    help="jsonl: the job, its summaries and every sample; llmd: an llm-d benchmark report "
    "(v0.2) per level, one a line.",
)
@json_option
@api_options
def export(job: str, output: Path | None, fmt: str, as_json: bool, client: ApiClient) -> None:
    """Save JOB as one JSON Lines file: the job, each level's summary and every request's
    raw timings (load it with pandas.read_json(FILE, lines=True)), or with --format llmd its
    levels as llm-d benchmark reports."""
    job = resolve.job_id(client, job)
    output = output or Path(f"job-{job}.jsonl" if fmt == "jsonl" else f"job-{job}.llmd.jsonl")
    try:
        written = _save(client, job, output, fmt)
    except OSError as exc:
        raise click.ClickException(f"cannot write {output}: {exc.strerror}") from None
    if as_json:
        emit_json({"job_id": job, "path": str(output), "bytes": written})
    else:
        click.echo(f"saved {output} ({written:,} bytes)")
