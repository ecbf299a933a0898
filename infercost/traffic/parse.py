"""Read a request log as it streams in, or say which line and column is wrong and why.

Formats (docs/traffic.md has the details):

- `azure`: Azure's LLM inference traces, CSV `TIMESTAMP,ContextTokens,GeneratedTokens`, the
  time a naive date and time (taken as UTC) with up to 7 fractional digits.
- `mooncake`: Mooncake's traces, JSON lines `{"timestamp": ms after the trace's start,
  "input_length", "output_length", "hash_ids": [...]}`, one hash a 512-token prompt block.
- `burstgpt`: BurstGPT's CSV, columns found by name: `Timestamp` (seconds after the trace's
  start), `Request tokens`, `Response tokens`, and `Model`, `Session ID` when present.
- `infercost`: a team's own log, CSV with a header or JSON lines: `timestamp` (RFC 3339, or
  seconds since the epoch), `input_tokens`, `output_tokens`, and optional `model`,
  `session_id` and `prefix_hashes` (512-token block hashes, as Mooncake's).

Bytes go in chunk by chunk (gzip or not); each chunk gives back the rows it completed, ready
for COPY, so a large log is never held whole. The read's figures are gathered on the way in
compact arrays and finished by `TrafficReader.finish`.
"""

from __future__ import annotations

import codecs
import csv
import math
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from infercost.limits import MAX_TOKENS
from infercost.traffic.stats import TrafficSummary, summarise

#: Tokens one prefix block covers (Mooncake's hash_ids; the infercost format's prefix_hashes).
BLOCK_TOKENS = 512
#: Numeric timestamps of the infercost format below this many seconds are offsets from the
#: log's start, not epoch times (1e9 s after the epoch is September 2001).
EPOCH_FROM = 1e9
_GZIP_MAGIC = b"\x1f\x8b"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
#: Largest piece of decompressed text made at once, so a gzip bomb is caught early.
_INFLATE_STEP = 1 << 20


class TrafficError(ValueError):
    """A row that cannot be read: `line` (1-based, the header is line 1 in CSV), the
    `column` (or key) where it went wrong when known, and what is wrong there."""

    def __init__(self, line: int, column: str | None, problem: str) -> None:
        where = f"line {line}" + (f", column {column}" if column else "")
        super().__init__(f"{where}: {problem}")
        self.line = line
        self.column = column
        self.problem = problem
        self.where = where


class TooLarge(ValueError):
    """The log (once decompressed) is longer than the allowed number of bytes."""


class Decoder:
    """Bytes in, whole lines of text out: gunzips when the body starts with gzip's magic
    bytes (or `gzip` says it must), decodes UTF-8 across chunk boundaries and counts the
    text's bytes against `max_bytes`."""

    def __init__(self, max_bytes: int, *, gzip: bool | None = None) -> None:
        self.max_bytes = max_bytes
        self.gzip = gzip
        self.inflater: Any = None
        self.text_bytes = 0
        self.lines = 0  # complete lines handed out so far
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._pending = ""
        self._sniffed = False
        self._head = b""

    def _inflate(self, data: bytes) -> Iterator[bytes]:
        while data:
            piece = self.inflater.decompress(data, _INFLATE_STEP)
            yield piece
            data = self.inflater.unconsumed_tail
            if self.inflater.eof:
                # Concatenated gzip members (what `cat a.gz b.gz` makes) are one stream.
                rest = self.inflater.unused_data + data
                if not rest.strip(b"\x00"):
                    return
                self.inflater = zlib.decompressobj(31)
                data = rest

    def _text(self, raw: bytes, *, final: bool = False) -> list[str]:
        self.text_bytes += len(raw)
        if self.text_bytes > self.max_bytes:
            raise TooLarge(f"{self.text_bytes} bytes of text")
        try:
            text = self._utf8.decode(raw, final)
        except UnicodeDecodeError as exc:
            line = self.lines + (self._pending + raw[: exc.start].decode("utf-8", "replace")).count(
                "\n"
            )
            raise TrafficError(line + 1, None, "not UTF-8 text") from None
        parts = (self._pending + text).split("\n")
        self._pending = parts.pop()
        self.lines += len(parts)
        return parts

    def feed(self, chunk: bytes) -> list[str]:
        """The lines this chunk completes (without their line ends)."""
        if not self._sniffed:
            self._head += chunk
            if len(self._head) < 2:
                return []
            chunk, self._head = self._head, b""
            self._sniffed = True
            magic = chunk.startswith(_GZIP_MAGIC)
            if self.gzip and not magic:
                raise TrafficError(1, None, "Content-Encoding says gzip, but the body is not gzip")
            if magic:
                self.inflater = zlib.decompressobj(31)
        if self.inflater is None:
            return self._text(chunk)
        out: list[str] = []
        try:
            for piece in self._inflate(chunk):
                out += self._text(piece)
        except zlib.error:
            raise TrafficError(self.lines + 1, None, "the gzip stream is corrupt") from None
        return out

    def close(self) -> list[str]:
        """The last line, when the file does not end with a line end."""
        if not self._sniffed and self._head:
            self._sniffed = True
            lines = self._text(self._head)
        else:
            lines = []
        if self.inflater is not None and not self.inflater.eof and self.text_bytes:
            raise TrafficError(self.lines + 1, None, "the gzip stream ends early (truncated)")
        lines += self._text(b"", final=True)
        if self._pending:
            lines.append(self._pending)
            self.lines += 1
            self._pending = ""
        return lines


# -- values ------------------------------------------------------------------------------


def _tokens(value: Any, line: int, column: str) -> int:
    """A token count: a whole number from 0 to MAX_TOKENS (text or JSON number)."""
    if isinstance(value, bool):
        number: Any = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            number = int(text)
        except ValueError:
            try:
                as_float = float(text)
            except ValueError:
                as_float = math.nan
            number = int(as_float) if as_float.is_integer() else None
    else:
        number = None
    if not isinstance(number, int):
        raise TrafficError(line, column, f"{_show(value)} is not a whole number of tokens")
    if not 0 <= number <= MAX_TOKENS:
        raise TrafficError(
            line, column, f"{number} tokens is outside 0 to {MAX_TOKENS:,}: fix the count"
        )
    return number


def _show(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else f"'{value}'"
    return text if len(text) <= 40 else text[:37] + "...'"


def _number(value: Any, line: int, column: str, what: str) -> float:
    if isinstance(value, bool):
        raise TrafficError(line, column, f"{_show(value)} is not {what}")
    if isinstance(value, int | float):
        number = float(value)
    else:
        try:
            number = float(str(value).strip())
        except ValueError:
            raise TrafficError(line, column, f"{_show(value)} is not {what}") from None
    if not math.isfinite(number) or number < 0:
        raise TrafficError(line, column, f"{_show(value)} is not {what}")
    return number


def _datetime_us(value: str, line: int, column: str) -> int:
    """Microseconds since the epoch of an ISO 8601 / RFC 3339 time (naive: UTC)."""
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise TrafficError(
            line,
            column,
            f"{_show(value)} is not a date and time (expected e.g. 2026-11-16 18:15:46.680590 "
            "or 2026-11-16T18:15:46Z)",
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _US


def _text_field(value: Any, line: int, column: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise TrafficError(line, column, f"{_show(value)} is not text")
    text = str(value).strip()
    if not text:
        return None
    if "\x00" in text:
        raise TrafficError(line, column, "contains a NUL character: remove it")
    if len(text) > 256:
        raise TrafficError(line, column, "is longer than 256 characters")
    return text


def _hash_list(value: Any, line: int, column: str) -> list[Any] | None:
    """Block hashes: a JSON list of whole numbers or strings; in CSV, also a list
    separated by spaces or semicolons."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        if text.startswith("["):
            try:
                value = msgspec.json.decode(text)
            except msgspec.DecodeError:
                raise TrafficError(line, column, "is not a JSON list of block hashes") from None
        else:
            value = text.replace(";", " ").split()
    if not isinstance(value, list) or not all(
        (isinstance(h, int) and not isinstance(h, bool)) or (isinstance(h, str) and h)
        for h in value
    ):
        raise TrafficError(line, column, "must be a list of block hashes (whole numbers or text)")
    return value


# -- formats -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Columns:
    """A CSV format: the header names of each field (required or not)."""

    timestamp: str
    input_tokens: str
    output_tokens: str
    model: str | None = None
    session_id: str | None = None
    prefix_hashes: str | None = None


AZURE = Columns("TIMESTAMP", "ContextTokens", "GeneratedTokens")
BURSTGPT = Columns("Timestamp", "Request tokens", "Response tokens", "Model", "Session ID")
INFERCOST = Columns(
    "timestamp", "input_tokens", "output_tokens", "model", "session_id", "prefix_hashes"
)
MOONCAKE_KEYS: tuple[str, ...] = ("timestamp", "input_length", "output_length", "hash_ids")
MOONCAKE = Columns("timestamp", "input_length", "output_length", prefix_hashes="hash_ids")
INFERCOST_KEYS: tuple[str, ...] = (
    "timestamp",
    "input_tokens",
    "output_tokens",
    "model",
    "session_id",
    "prefix_hashes",
)


#: One row as COPY takes it, traffic_id excepted: seq, at_us (from the first row until
#: finish shifts it to t_0), input, output, model, session_id, prefix blocks.
Row = tuple[int, int, int, int, str | None, str | None, list[int] | None]


class TrafficReader:
    """A log of one format, read line by line: `rows(lines)` gives the rows those lines
    hold (raising TrafficError at the first bad one), `finish()` the read."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.line = 0  # the last line read (1-based)
        self.seq = 0
        self.layout: str | None = {"azure": "csv", "burstgpt": "csv", "mooncake": "jsonl"}.get(fmt)
        self.columns: Columns | None = {"azure": AZURE, "burstgpt": BURSTGPT}.get(fmt)
        self.index: dict[str, int] = {}
        self.base_us: int | None = None
        self.absolute: bool | None = None
        self.times = array("q")
        self.inputs = array("q")
        self.outputs = array("q")
        self.models: dict[str | None, int] = {}
        self.session_ids: set[str] = set()
        self.blocks: dict[Any, int] = {}
        self.block_rows = 0
        self.reused_tokens = 0
        self.in_order = True
        self._last_us: int | None = None

    # -- time -----------------------------------------------------------------------------

    def _at_us(self, value: Any, column: str) -> int:
        """The row's time in microseconds: absolute (epoch) or from the log's own zero."""
        line = self.line
        if self.fmt == "azure":
            if not isinstance(value, str):
                raise TrafficError(line, column, f"{_show(value)} is not a date and time")
            at, absolute = _datetime_us(value, line, column), True
        elif self.fmt == "mooncake":
            at = round(_number(value, line, column, "milliseconds after the start") * 1000)
            absolute = False
        elif self.fmt == "burstgpt":
            at = round(_number(value, line, column, "seconds after the start") * 1e6)
            absolute = False
        elif isinstance(value, str) and not _looks_numeric(value):
            at, absolute = _datetime_us(value, line, column), True
        else:
            seconds = _number(value, line, column, "an RFC 3339 time or seconds since the epoch")
            at, absolute = round(seconds * 1e6), seconds >= EPOCH_FROM
        if self.absolute is None:
            self.absolute = absolute
        elif absolute != self.absolute:
            raise TrafficError(
                line,
                column,
                "mixes offsets from the start with times since the epoch: give every "
                "timestamp the same way",
            )
        return at

    # -- one request -------------------------------------------------------------------

    def _add(
        self,
        names: Columns,
        at_raw: Any,
        input_raw: Any,
        output_raw: Any,
        *,
        model_raw: Any = None,
        session_raw: Any = None,
        hashes_raw: Any = None,
    ) -> Row:
        line = self.line
        at = self._at_us(at_raw, names.timestamp)
        n_in = _tokens(input_raw, line, names.input_tokens)
        n_out = _tokens(output_raw, line, names.output_tokens)
        model = _text_field(model_raw, line, names.model or "model")
        session = _text_field(session_raw, line, names.session_id or "session_id")
        hashes = _hash_list(hashes_raw, line, names.prefix_hashes or "prefix_hashes")
        blocks = None if hashes is None else self._blocks(hashes, n_in, names)
        if self.base_us is None:
            self.base_us = at
        if self._last_us is not None and at < self._last_us:
            self.in_order = False
        self._last_us = at
        self.seq += 1
        self.times.append(at - self.base_us)
        self.inputs.append(n_in)
        self.outputs.append(n_out)
        self.models[model] = self.models.get(model, 0) + 1
        if session is not None:
            self.session_ids.add(session)
        return (self.seq, at - self.base_us, n_in, n_out, model, session, blocks)

    def _blocks(self, hashes: list[Any], n_in: int, names: Columns) -> list[int]:
        """The request's blocks renumbered within the log, counting the prompt tokens in
        blocks an earlier request already had (a perfect prefix cache's hits)."""
        most = math.ceil(n_in / BLOCK_TOKENS)
        if len(hashes) > most:
            raise TrafficError(
                self.line,
                names.prefix_hashes or "hash_ids",
                f"{len(hashes)} blocks of {BLOCK_TOKENS} tokens, but {n_in} prompt tokens "
                f"fill at most {most}",
            )
        known = self.blocks
        ids: list[int] = []
        new: dict[Any, int] = {}
        for position, h in enumerate(hashes):
            seen = known.get(h)
            if seen is not None:
                self.reused_tokens += min(BLOCK_TOKENS, n_in - position * BLOCK_TOKENS)
                ids.append(seen)
            else:
                ids.append(new.setdefault(h, len(known) + len(new)))
        known.update(new)
        self.block_rows += 1
        return ids

    # -- layouts -----------------------------------------------------------------------

    def _header(self, record: list[str]) -> None:
        names = [name.strip().lstrip("\ufeff") for name in record]
        if self.fmt == "infercost":
            names = [n.lower() for n in names]
        assert self.columns is not None
        self.index = {name: i for i, name in enumerate(names)}
        needed = (self.columns.timestamp, self.columns.input_tokens, self.columns.output_tokens)
        missing = [n for n in needed if n not in self.index]
        if missing:
            raise TrafficError(
                self.line,
                missing[0],
                f"the header has no column '{missing[0]}'; the {self.fmt} format needs "
                f"{', '.join(needed)} (found: {', '.join(names) or 'nothing'})",
            )

    def _csv_rows(self, lines: list[str]) -> list[Row]:
        out: list[Row] = []
        columns = self.columns
        assert columns is not None
        start = self.line
        reader = csv.reader(line.removesuffix("\r") for line in lines)
        try:
            for record in reader:
                self.line = start + reader.line_num
                if not record or (len(record) == 1 and not record[0].strip()):
                    continue
                if not self.index:
                    self._header(record)
                    continue
                out.append(self._csv_row(record, columns))
        except csv.Error as exc:
            raise TrafficError(start + reader.line_num, None, f"not valid CSV ({exc})") from None
        self.line = start + len(lines)
        return out

    def _csv_row(self, record: list[str], columns: Columns) -> Row:
        index = self.index

        def cell(name: str | None) -> str | None:
            if name is None:
                return None
            i = index.get(name)
            if i is None:
                return None
            if i >= len(record):
                raise TrafficError(
                    self.line,
                    name,
                    f"the row has {len(record)} fields; the header has {len(index)}",
                )
            return record[i]

        return self._add(
            columns,
            cell(columns.timestamp),
            cell(columns.input_tokens),
            cell(columns.output_tokens),
            model_raw=cell(columns.model),
            session_raw=cell(columns.session_id),
            hashes_raw=cell(columns.prefix_hashes),
        )

    def _json_rows(self, lines: list[str]) -> list[Row]:
        out: list[Row] = []
        for text in lines:
            self.line += 1
            if not text.strip():
                continue
            try:
                obj = msgspec.json.decode(text)
            except msgspec.DecodeError:
                raise TrafficError(self.line, None, "not a valid JSON object") from None
            if not isinstance(obj, dict):
                raise TrafficError(self.line, None, "expected a JSON object")
            out.append(self._json_row(obj))
        return out

    def _json_row(self, obj: dict[str, Any]) -> Row:
        mooncake = self.fmt == "mooncake"
        keys = MOONCAKE_KEYS if mooncake else INFERCOST_KEYS
        names = MOONCAKE if mooncake else INFERCOST
        for key in keys[:3]:
            if obj.get(key) is None:
                raise TrafficError(
                    self.line, key, f'no "{key}": each line needs {", ".join(keys[:3])}'
                )
        return self._add(
            names,
            obj[keys[0]],
            obj[keys[1]],
            obj[keys[2]],
            model_raw=None if mooncake else obj.get("model"),
            session_raw=None if mooncake else obj.get("session_id"),
            hashes_raw=obj.get(keys[-1]),
        )

    def rows(self, lines: list[str]) -> list[Row]:
        """The rows `lines` hold (the first non-blank line of a CSV is its header)."""
        if self.layout is None:
            first = next((line for line in lines if line.strip()), None)
            if first is None:
                self.line += len(lines)
                return []
            json_lines = first.lstrip("\ufeff").lstrip().startswith("{")
            self.layout = "jsonl" if json_lines else "csv"
            self.columns = None if json_lines else INFERCOST
        return self._json_rows(lines) if self.layout == "jsonl" else self._csv_rows(lines)

    def finish(self) -> TrafficSummary:
        """The read of everything seen; TrafficError when the log held no request."""
        if self.seq == 0:
            raise TrafficError(max(1, self.line), None, "the log holds no requests")
        return summarise(
            self.times,
            self.inputs,
            self.outputs,
            base_us=self.base_us or 0,
            absolute=bool(self.absolute),
            models=self.models,
            sessions=len(self.session_ids) if self.session_ids else None,
            block_tokens=BLOCK_TOKENS if self.block_rows else None,
            reused_tokens=self.reused_tokens if self.block_rows else None,
            in_order=self.in_order,
        )


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_all(data: bytes, fmt: str, max_bytes: int = 1 << 62) -> tuple[list[Row], TrafficSummary]:
    """A whole log at once (tests, small files): its rows and its read."""
    decoder = Decoder(max_bytes)
    reader = TrafficReader(fmt)
    rows = reader.rows(decoder.feed(data))
    rows += reader.rows(decoder.close())
    return rows, reader.finish()
