"""One file per job: the job, its runs' summaries and every raw sample, as JSON Lines.

Each line is one object with a `kind` ("job", "run" or "sample"); the README's "Exporting
a job" section lists every field and its unit. Samples are read in keyset pages of a
bounded size and written out page by page, so a job of a million requests is never held in
memory, and the body can be gzipped on the fly when the client accepts it.
"""

from __future__ import annotations

import re
import uuid
import zlib
from collections.abc import AsyncIterator, Sequence

import msgspec
from litestar.response.streaming import ASGIStreamingResponse
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from api.domain.endpoints.schemas import EndpointRead
from api.domain.endpoints.services import EndpointService
from api.domain.jobs.schemas import JobRead
from api.domain.runs.schemas import RunSummary, Sample
from infercost.errors import NotFound
from infercost.jobs.repository import JobRepository

NDJSON_MEDIA_TYPE = "application/x-ndjson"
#: The `format` of the job line: a reader can tell which layout of lines follows.
EXPORT_FORMAT = "infercost-export/1"
#: Samples read (and written out) per keyset page: bounds the memory one export holds.
SAMPLE_PAGE = 2000
#: A q-value: 0 to 1 with at most three decimals (RFC 9110, 12.4.2).
_QVALUE = re.compile(r"0(\.[0-9]{0,3})?|1(\.0{0,3})?")


class SampleLine(Sample, kw_only=True, tag_field="kind", tag="sample"):
    """One request's raw timings (GET /v1/runs/{id}/requests) with the run it belongs to."""

    run_id: uuid.UUID


_encoder = msgspec.json.Encoder()


def _line(kind: str, value: msgspec.Struct, **extra: object) -> bytes:
    """`value` as one JSON line with `kind` (and `extra`) first."""
    fields = msgspec.to_builtins(value)
    assert isinstance(fields, dict)
    return _encoder.encode({"kind": kind, **extra, **fields}) + b"\n"


async def job_endpoint(endpoints: EndpointService, endpoint_id: uuid.UUID) -> EndpointRead:
    """The endpoint a job measured, as GET /v1/endpoints/{id} shows it (no secret; the URL
    redacted), even if it was deleted since: an archive says what was measured."""
    endpoint = await endpoints.repo.get_kept(endpoints.team_id, endpoint_id)
    if endpoint is None:
        raise NotFound(f"no endpoint {endpoint_id} in your team")
    return await endpoints.to_read(endpoint)


def head_lines(job: JobRead, endpoint: EndpointRead) -> bytes:
    """The job line (the job as GET /v1/jobs/{id} reads it, without its runs, and its
    endpoint); run lines follow it, each with its samples."""
    without_runs = msgspec.structs.replace(job, runs=[])
    fields = msgspec.to_builtins(without_runs)
    assert isinstance(fields, dict)
    del fields["runs"]
    head = {"kind": "job", "format": EXPORT_FORMAT, **fields}
    head["endpoint"] = msgspec.to_builtins(endpoint)
    return _encoder.encode(head) + b"\n"


async def export_lines(
    sessionmaker: async_sessionmaker[AsyncSession], job: JobRead, endpoint: EndpointRead
) -> AsyncIterator[bytes]:
    """The export's body, a chunk per keyset page of samples: the job line, then each run's
    summary line followed by its samples in seq order.

    The response outlives the request's session, so samples are read over a session of
    their own; the caller has checked the team's access and read the job and its runs.
    """
    yield head_lines(job, endpoint)
    runs: Sequence[RunSummary] = job.runs
    async with sessionmaker() as session:
        repo = JobRepository(session)
        for index, run in enumerate(runs):
            yield _line("run", run, level_index=index)
            after = -1
            while True:
                page = await repo.samples_page(
                    run.id, after_seq=after, limit=SAMPLE_PAGE, warmup=None
                )
                if page:
                    yield _encoder.encode_lines(
                        [msgspec.convert(s, SampleLine, from_attributes=True) for s in page]
                    )
                if len(page) < SAMPLE_PAGE:
                    break
                after = page[-1].seq
                # Pages are separate queries: release what this one read before the next.
                session.expunge_all()


async def gzipped(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """`chunks` compressed as one gzip stream, chunk by chunk."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 31: a gzip header and trailer
    async for chunk in chunks:
        out = compressor.compress(chunk)
        if out:
            yield out
    yield compressor.flush()


def _quality(params: list[str]) -> float | None:
    """The q-value among a coding's parameters (1 when absent), None when malformed."""
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            value = value.strip()
            if not _QVALUE.fullmatch(value):
                return None
            return float(value)
    return 1.0


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether an Accept-Encoding header (RFC 9110, 12.5.3) allows gzip: gzip (or x-gzip)
    by name with a q above 0, else `*` with a q above 0. `gzip;q=0` refuses it even when
    `*` is listed; a malformed q-value counts as a refusal of that coding."""
    named: float | None = None
    wildcard: float | None = None
    for part in accept_encoding.split(","):
        coding, *params = part.split(";")
        coding = coding.strip().lower()
        if coding not in ("gzip", "x-gzip", "*"):
            continue
        q = _quality(params)
        quality = 0.0 if q is None else q
        if coding == "*":
            wildcard = quality if wildcard is None else max(wildcard, quality)
        else:
            named = quality if named is None else max(named, quality)
    if named is not None:
        return named > 0
    return wildcard is not None and wildcard > 0


def export_response(
    sessionmaker: async_sessionmaker[AsyncSession],
    job: JobRead,
    endpoint: EndpointRead,
    *,
    gzip: bool,
) -> ASGIStreamingResponse:
    """The export as a streamed download named job-{id}.jsonl, gzipped when `gzip`."""
    headers = {
        "Content-Disposition": f'attachment; filename="job-{job.id}.jsonl"',
        "Vary": "Accept-Encoding",
    }
    body = export_lines(sessionmaker, job, endpoint)
    if gzip:
        headers["Content-Encoding"] = "gzip"
        body = gzipped(body)
    return ASGIStreamingResponse(iterator=body, media_type=NDJSON_MEDIA_TYPE, headers=headers)
