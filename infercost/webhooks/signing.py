"""Signing webhook payloads, and checking a signature as a receiver would.

`Infercost-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>`. The
timestamp is inside the signed bytes, so a captured request cannot be replayed later with
a fresh time: receivers refuse signatures older than a tolerance (5 minutes by default).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

SECRET_PREFIX = "whsec_"  # noqa: S105 - a label, not a secret
SIGNATURE_HEADER = "Infercost-Signature"
EVENT_HEADER = "Infercost-Event"
DELIVERY_HEADER = "Infercost-Delivery"
DEFAULT_TOLERANCE_S = 300


def new_secret() -> str:
    """A fresh signing secret, shown to the user once: `whsec_` and 32 random bytes."""
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def _digest(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """The Infercost-Signature header value for `body`, signed now unless told when."""
    t = int(time.time()) if timestamp is None else timestamp
    return f"t={t},v1={_digest(secret, t, body)}"


def verify(
    secret: str,
    header: str,
    body: bytes,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    now: float | None = None,
) -> bool:
    """True when `header` signs exactly `body` with `secret` within `tolerance_s` of now.

    Any `v1=` entry may match (a header may carry several while secrets rotate); a
    malformed header is simply False. Comparison is constant-time.
    """
    timestamp: int | None = None
    candidates: list[str] = []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t" and value.isdigit():
            timestamp = int(value)
        elif key == "v1" and value:
            candidates.append(value)
    if timestamp is None or not candidates:
        return False
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance_s:
        return False
    expected = _digest(secret, timestamp, body)
    # Check every candidate so the time taken does not depend on which one matched.
    matched = False
    for candidate in candidates:
        matched |= hmac.compare_digest(expected.encode(), candidate.encode())
    return matched
