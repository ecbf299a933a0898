"""GET /v1/runs/{id}?definitions=vllm|guidellm|aiperf: a run's TPOT, ITL and throughput
recomputed from its stored raw samples as that tool defines them (infercost/figures/peers.py),
so a user can hold infercost's figures against ones they already have."""

from __future__ import annotations

import uuid
from typing import Annotated

import msgspec
import numpy as np
from litestar.params import QueryParameter
from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncSession

from api.auth import CurrentCaller
from api.db import DbSession
from api.domain.runs.schemas import Definitions, Distribution
from infercost.db.scope import readable_sql
from infercost.errors import InvalidInput
from infercost.figures.peers import READS_CHUNK_TIMES, TOOLS, Samples, Tool, recompute

DefinitionsParam = Annotated[
    str | None,
    QueryParameter(
        description="add a `definitions` block: TPOT, ITL and throughput recomputed from the "
        "run's raw samples as that tool defines them, with how they differ from infercost's",
        schema_extra={"enum": list(TOOLS)},
    ),
]

#: Each request_samples row the definitions read, as one fixed-size record of its
#: columns' binary forms (float8send and the like: big-endian, no length), NULLs replaced
#: as Samples wants them (NaN, 0): a run's records are concatenated in the database and
#: arrive as one bytes value, which becomes NumPy columns at once, without a Python object
#: per request (a run may hold a hundred thousand).
_RECORD: tuple[tuple[str, str, str], ...] = (
    ("t_sched", "float8send(t_sched)", ">f8"),
    ("t_send", "float8send(t_send)", ">f8"),
    ("e2e_ms", "float8send(coalesce(e2e_ms, 'NaN'))", ">f8"),
    ("n_out", "int4send(n_out)", ">i4"),
    ("first_ms", "float8send(coalesce(chunk_times_ms[1], 'NaN'))", ">f8"),
    (
        "last_ms",
        "float8send(coalesce(chunk_times_ms[cardinality(chunk_times_ms)], 'NaN'))",
        ">f8",
    ),
    ("chunk_counts", "int4send(coalesce(cardinality(chunk_times_ms), 0))", ">i4"),
    ("first_chunk_tokens", "int4send(coalesce(chunk_tokens[1], 0))", ">i4"),
    ("succeeded", "boolsend(error_class IS NULL)", "?"),
    ("warmup", "boolsend(warmup)", "?"),
)
_RECORD_DTYPE = np.dtype([(name, value) for name, _, value in _RECORD])

#: PostgreSQL's binary form of a one-dimensional array (array_send) is a 20-byte header
#: (12 bytes for an empty one), then per element its length (int4; -1 for NULL) and its
#: value (float8 here), big-endian. Every request's chunk times are its array_send less
#: the header, concatenated in the same pass (so in the same order) as the records.
_ARRAY_HEADER = 20
_CHUNK_TIME = np.dtype([("length", ">i4"), ("value", ">f8")])


def _samples_sql(chunk_times: bool) -> TextClause:
    """One pass over the run's rows: their count, records and, with `chunk_times`, every
    chunk time. Both aggregates are fed the same rows in the same order by the one scan
    (their order across requests is otherwise free: every figure is per request or over
    all of them). PostgreSQL caps one value at 1 GB: about 89 million chunk times (12
    bytes each) in a run, some 19.9 million requests (records of 54 bytes)."""
    record = " || ".join(expr for _, expr, _ in _RECORD)
    columns = f"count(*), string_agg({record}, ''::bytea)"
    if chunk_times:
        columns += (
            f", string_agg(substring(array_send(chunk_times_ms) FROM {_ARRAY_HEADER + 1}),"
            " ''::bytea)"
        )
    # Built from the constants above only; the run and team ids are bound parameters. The
    # samples are read only when the run is the team's (scoped here, not by call order).
    return text(
        f"SELECT {columns} FROM request_samples WHERE run_id ="  # noqa: S608
        " (SELECT id FROM runs WHERE id = :run_id AND team_id = :team_id)"
    )


_SAMPLES_SQL = {chunk_times: _samples_sql(chunk_times) for chunk_times in (False, True)}


def _native(values: np.ndarray) -> np.ndarray:
    return values.astype(values.dtype.newbyteorder("="))


def parse_tool(value: str) -> Tool:
    """The tool a `definitions` query names, or a 422 that lists the valid names."""
    for tool in TOOLS:
        if value == tool:
            return tool
    raise InvalidInput(
        "definitions",
        f"'{value}' is not one of: {', '.join(TOOLS)} (the tools whose "
        "definitions infercost can apply)",
    )


class DefinitionsService:
    """Reads a run's raw samples and recomputes its figures under a tool's definitions.

    Reads are scoped to the team: another team's run has no samples here.
    """

    def __init__(self, session: AsyncSession, team_id: uuid.UUID) -> None:
        self.session = session
        self.team_id = team_id

    async def samples(self, run_id: uuid.UUID, *, chunk_times: bool = True) -> Samples:
        """Every sample of the run as columns, read in one query (no ORM objects, no row
        objects); with `chunk_times`, every chunk time too, which only the definitions in
        READS_CHUNK_TIMES need."""
        query = readable_sql(_SAMPLES_SQL[chunk_times], self.team_id)
        row = (await self.session.execute(query, {"run_id": run_id})).one()
        records = np.frombuffer(row[1] or b"", dtype=_RECORD_DTYPE)
        if records.size != row[0]:
            # A NULL in a record (a column stored NULL that is not replaced) drops it.
            raise ValueError(f"run {run_id}: {row[0] - records.size} samples could not be read")
        flat = None
        if chunk_times:
            elements = np.frombuffer(row[2] or b"", dtype=_CHUNK_TIME)
            if (elements["length"] != _CHUNK_TIME["value"].itemsize).any():
                # A NULL element (length -1, no value) would shift every value after it.
                raise ValueError(f"run {run_id}: a stored chunk time is NULL")
            flat = _native(elements["value"])
        return Samples(
            t_sched=_native(records["t_sched"]),
            t_send=_native(records["t_send"]),
            e2e_ms=_native(records["e2e_ms"]),
            n_out=records["n_out"].astype(np.int64),
            first_ms=_native(records["first_ms"]),
            last_ms=_native(records["last_ms"]),
            chunk_counts=records["chunk_counts"].astype(np.int64),
            first_chunk_tokens=records["first_chunk_tokens"].astype(np.int64),
            succeeded=records["succeeded"].copy(),
            warmup=records["warmup"].copy(),
            chunk_times_ms=flat,
        )

    async def block(self, run_id: uuid.UUID, tool: Tool) -> Definitions:
        """The run summary's `definitions` block for `tool`."""
        samples = await self.samples(run_id, chunk_times=tool in READS_CHUNK_TIMES)
        figures = recompute(tool, samples)
        return Definitions(
            tool=figures.tool,
            tpot_ms=msgspec.convert(figures.tpot_ms, Distribution),
            itl_ms=msgspec.convert(figures.itl_ms, Distribution),
            output_tokens_per_s=figures.output_tokens_per_s,
            requests_per_s=figures.requests_per_s,
            duration_s=figures.duration_s,
            metric_names=figures.metric_names,
            reported_stats=list(figures.reported_stats),
            differences=list(figures.differences),
            sources=list(figures.sources),
        )


def provide_definitions_service(db_session: DbSession, caller: CurrentCaller) -> DefinitionsService:
    """The service over the request's session, for the caller's team."""
    return DefinitionsService(db_session, caller.team_id)
