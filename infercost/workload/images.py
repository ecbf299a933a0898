"""Images for chat requests with image parts (workload.features "image"), made here, not
fetched: PNG files of the stated size whose first row of pixels differs by request, so no
two requests send the same image (an engine's cache of processed images never answers), and
whose other rows repeat it (the file stays a few kilobytes).

Making one is cheap enough to do as a request is built (tens of microseconds at 512 x 512):
the compressed rows after the first are made once per size and reused; only the first row
and the checksums are computed per image (a full flush between them makes the rest of the
compressed stream independent of the first row).
"""

from __future__ import annotations

import base64
import struct
import zlib
from functools import cache
from typing import Any, Final

_SIGNATURE: Final = b"\x89PNG\r\n\x1a\n"
#: PNG row filters: none (the first row as is), up (each later row: the same as above).
_FILTER_NONE, _FILTER_UP = b"\x00", b"\x02"
_PATTERN: Final = bytes(range(256)) * 2


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


@cache
def _rest(width: int, height: int) -> tuple[bytes, int, int]:
    """The compressed rows 2..height (after a full flush), the raw rows' length, and their
    Adler-32 from 1 (combined with the first row's below)."""
    rest = (_FILTER_UP + bytes(width * 3)) * (height - 1)
    compressor = zlib.compressobj(1)
    compressor.compress(b"\x00")
    compressor.flush(zlib.Z_FULL_FLUSH)
    tail = compressor.compress(rest) + compressor.flush()
    return tail[:-4], len(rest), zlib.adler32(rest)


def _adler_combine(first: int, second: int, second_length: int) -> int:
    """Adler-32 of two byte strings one after the other, from each one's (as zlib does)."""
    base = 65521
    rem = second_length % base
    a1, b1 = first & 0xFFFF, first >> 16
    a2, b2 = second & 0xFFFF, second >> 16
    a = (a1 + a2 - 1) % base
    b = (b1 + b2 + rem * (a1 - 1)) % base  # b2 includes its own count of 1s from a2's start
    return (b << 16) | a


def png(width: int, height: int, seq: int) -> bytes:
    """A width x height RGB PNG whose first row begins with `seq` (48 bits in its first two
    pixels, so every request's differs) and goes on in a pattern shifted by it."""
    offset = seq % 256
    pattern = (_PATTERN[offset : offset + 256] * (width * 3 // 256 + 1))[: width * 3 - 6]
    row = (seq % (1 << 48)).to_bytes(6, "big") + pattern
    first = _FILTER_NONE + row
    compressor = zlib.compressobj(1)
    head = compressor.compress(first) + compressor.flush(zlib.Z_FULL_FLUSH)
    tail, rest_length, rest_adler = _rest(width, height)
    adler = _adler_combine(zlib.adler32(first), rest_adler, rest_length)
    data = head + tail + struct.pack(">I", adler)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return _SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", data) + _chunk(b"IEND", b"")


def image_part(width: int, height: int, seq: int) -> dict[str, Any]:
    """An OpenAI chat content part carrying that PNG as a data URL."""
    url = "data:image/png;base64," + base64.b64encode(png(width, height, seq)).decode()
    return {"type": "image_url", "image_url": {"url": url}}
