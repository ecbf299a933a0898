"""Secrets out of every text that came from outside, before it is stored or returned.

An endpoint's credential (its api_key, and any other secret it is given) travels in the
requests infercost sends, and an upstream may send it back: a gateway answering 401 with the
`Authorization` header it got, an error page quoting the request, a redirect whose URL holds
the key. Whatever such text becomes (a request's error, a job's, a check's summary, and from
them the exports, reports, CSV cells and webhook bodies), it passes one `Redactor` first,
built from the endpoint's secrets, which masks each secret in every form it could take:

- as sent (raw, after `Bearer `), JSON-escaped or HTML-escaped;
- URL-encoded, in either case of hex digit, with `+` or `%20` for spaces;
- base64 (standard or URL-safe, padded or not), alone or inside Basic auth's `user:password`
  whatever the user part, and hex;
- cut short: a long enough start of a secret where a text was cut (at its end or before an
  ellipsis), since excerpts are cut to a length;

and masks any `Bearer` or `Basic` credential in the text, whoever's it is. The mask says what
was there (`[redacted]`), so a reader knows the upstream echoed a credential.
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import logging
import re
from collections.abc import Iterable
from typing import Any, Final
from urllib.parse import quote, quote_plus, unquote, unquote_plus

#: What a secret is replaced with.
MASK: Final = "[redacted]"
#: Secrets shorter than this are not masked: masking every "ab" would garble any text, and a
#: key that short protects nothing anyway.
MIN_SECRET_CHARS: Final = 4
#: The shortest start of a secret masked where a text was cut (an excerpt's end).
MIN_PARTIAL_CHARS: Final = 6

#: Runs of characters an encoded secret is made of (base64, URL-safe base64, percent
#: escapes, hex): each is decoded and masked whole when it hides a secret.
_TOKEN: Final = re.compile(r"[A-Za-z0-9+/_.~%=-]{8,}")
#: Any bearer or basic credential, whoever's it is: 12 or more token characters with a digit
#: among them (so prose such as "bearer tokens" or "basic authentication" stays).
_CREDENTIAL: Final = re.compile(
    r"\b(Bearer|Basic)(\s+)(?=[A-Za-z0-9._~+/=-]*\d)[A-Za-z0-9._~+/=-]{12,}", re.IGNORECASE
)
#: Where a text was cut: its end, or an ellipsis (what excerpts end with).
_CUT: Final = r"(?=\u2026|\.\.\.|\s*$)"


def _decoded(token: str) -> Iterable[str]:
    """The texts `token` could be the encoding of (URL escapes, base64, hex)."""
    if "%" in token or "+" in token:
        yield unquote(token)
        yield unquote_plus(token)
    core = token.rstrip("=")
    for alphabet in (None, b"-_"):
        try:
            raw = base64.b64decode(core + "=" * (-len(core) % 4), altchars=alphabet, validate=True)
        except (binascii.Error, ValueError):
            continue
        yield raw.decode("latin-1")
    if len(token) % 2 == 0 and all(c in "0123456789abcdefABCDEF" for c in token):
        yield bytes.fromhex(token).decode("latin-1")


class Redactor:
    """Masks the given secrets (and any bearer or basic credential) in text; an empty one
    still masks credentials. Cheap to build, meant for error paths, not per event."""

    __slots__ = ("_done", "_literal", "_partial", "_secrets")

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        found = sorted(
            {s for s in secrets if s and len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True
        )
        self._secrets: tuple[str, ...] = tuple(found)
        # Texts already masked: a level's failed requests mostly share a few errors.
        self._done: dict[str, str] = {}
        forms: set[str] = set()
        for secret in found:
            forms.update(
                {
                    secret,
                    json.dumps(secret)[1:-1],
                    json.dumps(secret)[1:-1].replace("/", "\\/"),
                    html.escape(secret),
                    quote(secret, safe=""),
                    quote(secret, safe="").lower(),
                    quote_plus(secret, safe=""),
                    base64.b64encode(secret.encode()).decode().rstrip("="),
                    base64.urlsafe_b64encode(secret.encode()).decode().rstrip("="),
                    secret.encode().hex(),
                }
            )
        ordered = sorted((f for f in forms if f), key=len, reverse=True)
        self._literal = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        starts = {
            s[:n] for s in found for n in range(min(len(s) - 1, 64), MIN_PARTIAL_CHARS - 1, -1)
        }
        self._partial = (
            re.compile(
                "(?:" + "|".join(map(re.escape, sorted(starts, key=len, reverse=True))) + ")" + _CUT
            )
            if starts
            else None
        )

    @classmethod
    def for_endpoint(cls, api_key: str | None, *headers: str | None) -> Redactor:
        """The redactor of an endpoint: its key, and the values of any secret headers."""
        return cls((api_key, *headers))

    def __bool__(self) -> bool:
        return True

    def text(self, value: str) -> str:
        """`value` with every form of every secret, and any credential, masked."""
        done = self._done.get(value)
        if done is not None:
            return done
        out = self._mask(value)
        if len(self._done) < 256 and len(value) <= 1024:
            self._done[value] = out
        return out

    def _mask(self, value: str) -> str:
        out = value
        if self._literal is not None:
            out = self._literal.sub(MASK, out)
        if self._secrets:
            out = _TOKEN.sub(self._token, out)
        out = _CREDENTIAL.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", out)
        if self._partial is not None:
            out = self._partial.sub(MASK, out)
        return out

    def _token(self, match: re.Match[str]) -> str:
        token = match.group(0)
        for view in _decoded(token):
            if any(secret in view for secret in self._secrets):
                return MASK
        return token

    def __call__(self, value: str | None) -> str | None:
        """`text`, passing None through."""
        return None if value is None else self.text(value)

    def data(self, value: Any) -> Any:
        """Every string in a JSON-like value (dicts, lists, their keys too) masked."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.data(k): self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        return value

    def raw(self, body: bytes) -> bytes:
        """A body of bytes masked (read as UTF-8, undecodable bytes replaced)."""
        return self.text(body.decode("utf-8", "replace")).encode()


#: Masks credentials only: for text whose endpoint is not known.
CREDENTIALS: Final = Redactor()


class LogRedaction(logging.Filter):
    """Masks any `Bearer` or `Basic` credential in a log record's message and traceback: a
    log line quoting a request's headers, or an exception that did, keeps no key. (An
    endpoint's key in other forms never reaches a log: what is logged of an upstream's answer
    passed its endpoint's redactor first.)"""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return True
        masked = CREDENTIALS.text(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = CREDENTIALS.text(record.exc_text)
        return True


def install_log_redaction(logger: logging.Logger | None = None) -> None:
    """Put LogRedaction on every handler of `logger` (the root logger by default), where
    every record of the process ends; once per handler."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, LogRedaction) for f in handler.filters):
            handler.addFilter(LogRedaction())
