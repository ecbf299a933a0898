"""Server-sent events, parsed as the WHATWG HTML standard says (§9.2.5-9.2.6), over bytes.

Every stream infercost reads goes through `SSEParser`: the load generator's reader and the
endpoint check alike (infercost/engines/reader.py). The rules, all of them kept:

- a line ends at CRLF, at LF, or at a CR not followed by LF (a CRLF split between two reads
  is one line end); one leading byte order mark is dropped;
- an empty line dispatches the event; a line starting with `:` is a comment; `field: value`
  loses one leading space of the value; a line without a colon is a field with an empty value;
- `data` appends its value and a newline to the event's data (so an event of several data
  lines is their values joined with newlines), `event` sets its type, `id` sets the last
  event id (unless the value holds a NUL), `retry` sets the reconnection time when it is all
  digits, any other field is ignored;
- an event without data is not dispatched; a dispatched event loses its data's last newline
  and is of type "message" unless `event` named another;
- at the end of the body an event not yet ended by an empty line is discarded.

The data is handed on as bytes (UTF-8 is decoded by whoever reads the JSON in it). The
common event, one `data:` line, costs one find and one slice: complete events are cut from
the buffer at blank lines, and only an event with more than one line is split into lines.
"""

from __future__ import annotations

from typing import Final

#: The type of an event that named none.
MESSAGE: Final = b"message"
_BOM: Final = b"\xef\xbb\xbf"

#: One dispatched event: its type, its data, and how many data lines made it.
Event = tuple[bytes, bytes, int]


class SSEParser:
    """An incremental parser: `feed` each piece of the body as it arrives, in order; each
    call returns the events that piece completed."""

    __slots__ = ("_buf", "_skip_lf", "_started", "ignored", "last_id", "retry_ms")

    def __init__(self) -> None:
        self._buf = b""
        # The last piece ended in CR: a LF starting the next one belongs to that line end.
        self._skip_lf = False
        self._started = False
        self.last_id = b""
        self.retry_ms: int | None = None
        # The fields other than data/event/id/retry seen (name -> last value): ignored by the
        # standard, kept to explain a stream (llama.cpp's old builds wrote `error: {...}`).
        self.ignored: dict[bytes, bytes] | None = None

    def feed(self, chunk: bytes) -> list[Event]:
        """The events `chunk` completes (none when it ends mid-event)."""
        region = self._complete(chunk)
        return self._events(region) if region else []

    def feed_batch(self, chunk: bytes) -> tuple[bytes, int, bytes] | list[Event]:
        """As `feed`, but when every event `chunk` completes is one `data:` line (the usual
        read of a stream): their data as one JSON text (one event's data, or `[d1,d2,...]`
        for several), how many there are and the text they came in, so a reader decodes them
        in one call. A reader that cannot use that (a `[DONE]` in it, data that is no JSON
        value) takes the events from `events_in(that text)`."""
        if self._buf or self._skip_lf or not self._started or not chunk.endswith(b"\n\n"):
            region = self._complete(chunk)
            if not region:
                return []
        elif b"\r" in chunk:
            region = self._complete(chunk)
        else:
            region = chunk  # the usual read: whole events, nothing left over
        if region.startswith(b"data:"):
            lines = region.count(b"\n")
            if lines == 2:
                return region[5:-2], 1, region
            # Every line end accounted for by a blank line before a `data:` line (or the last
            # one): every event is one data line.
            count = region.count(b"\n\ndata:") + 1
            if lines == 2 * count:
                # `data:` between events becomes a comma: one JSON array of their data.
                return b"[" + region[5:-2].replace(b"\n\ndata:", b",") + b"]", count, region
        return self._events(region)

    def events_in(self, region: bytes) -> list[Event]:
        """The events of a text `feed_batch` returned."""
        return self._events(region)

    def _complete(self, chunk: bytes) -> bytes:
        """The part of the body, with `chunk` added, that ends at its last blank line (the
        rest waits for more); line ends made LF, a leading byte order mark dropped."""
        if self._skip_lf or b"\r" in chunk:
            chunk = self._line_ends(chunk)
        buf = self._buf + chunk if self._buf else chunk
        if not self._started:
            if len(buf) < 3 and _BOM.startswith(buf):
                self._buf = buf
                return b""
            self._started = True
            if buf.startswith(_BOM):
                buf = buf[3:]
        end = buf.rfind(b"\n\n")
        if end < 0:
            self._buf = buf
            return b""
        self._buf = buf[end + 2 :]
        return buf[: end + 2] if end + 2 < len(buf) else buf

    def _events(self, region: bytes) -> list[Event]:
        """The events of a region that ends with a blank line."""
        events: list[Event] = []
        for block in region[:-2].split(b"\n\n"):
            if not block:
                continue
            if block[:5] == b"data:" and b"\n" not in block:
                value = block[5:]
                events.append((MESSAGE, value[1:] if value[:1] == b" " else value, 1))
            else:
                self._block(block, events)
        return events

    def _line_ends(self, chunk: bytes) -> bytes:
        """`chunk` with every line ending as LF: CRLF and a lone CR become LF, and a LF that
        completes a CRLF begun at the end of the last piece is dropped."""
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if b"\r" in chunk:
            if chunk[-1:] == b"\r":
                self._skip_lf = True
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        return chunk

    def _block(self, block: bytes, events: list[Event]) -> None:
        """The lines of one event (a blank line ended it), field by field."""
        data: list[bytes] = []
        kind = MESSAGE
        for line in block.split(b"\n"):
            if not line:
                # A blank line inside the block (one led it): dispatch what came before.
                if data:
                    events.append((kind, b"\n".join(data), len(data)))
                data, kind = [], MESSAGE
                continue
            if line[:1] == b":":
                continue  # a comment
            name, colon, value = line.partition(b":")
            if colon and value[:1] == b" ":
                value = value[1:]
            if name == b"data":
                data.append(value)
            elif name == b"event":
                kind = value or MESSAGE
            else:
                self._field(name, value)
        if data:
            events.append((kind, b"\n".join(data), len(data)))

    def _field(self, name: bytes, value: bytes) -> None:
        """A field other than data and event: id, retry, or one the standard ignores."""
        if name == b"id":
            if b"\x00" not in value:
                self.last_id = value
        elif name == b"retry":
            if value.isdigit():
                self.retry_ms = int(value)
        else:
            if self.ignored is None:
                self.ignored = {}
            self.ignored[name] = value

    def pending(self) -> bytes:
        """What arrived after the last complete event: discarded at the end of the body."""
        return self._buf
