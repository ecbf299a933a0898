"""The tokens people carry: share links (signed, so the server stores nothing it could leak)
and browser sessions (random, stored as a hash), and the sign-out form's CSRF token."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import uuid
from collections.abc import Sequence

SHARE_SCHEME = "ics"
SESSION_SCHEME = "icb"
_SHARE = re.compile(rf"^{SHARE_SCHEME}_([0-9a-f]{{32}})_([A-Za-z0-9_-]{{43}})$")


def _mac(secret: str, purpose: bytes, message: bytes) -> bytes:
    return hmac.new(secret.encode(), purpose + b"\0" + message, hashlib.sha256).digest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def share_token(secret_keys: Sequence[str], share_id: uuid.UUID) -> str:
    """`ics_<share id>_<HMAC-SHA256 of the id under the first secret key>`: it names its
    share and proves the server made it; the grant itself (page, expiry, revocation) is the
    share's row, read on every use."""
    return f"{SHARE_SCHEME}_{share_id.hex}_{_b64(_mac(secret_keys[0], b'share', share_id.bytes))}"


def share_id_of(secret_keys: Sequence[str], token: str) -> uuid.UUID | None:
    """The share a well-formed token signed by any server key names, else None (so keys
    can rotate: links made under an older key keep working while it is listed)."""
    match = _SHARE.match(token)
    if match is None:
        return None
    share_id = uuid.UUID(hex=match.group(1))
    given = match.group(2)
    for secret in secret_keys:
        if hmac.compare_digest(_b64(_mac(secret, b"share", share_id.bytes)), given):
            return share_id
    return None


def share_hint(share_id: uuid.UUID) -> str:
    """How a listing names a link without giving it away: its first characters."""
    return f"{SHARE_SCHEME}_{share_id.hex[:8]}\u2026"


def new_session_token() -> tuple[str, bytes]:
    """A browser session's cookie value and the hash stored for it."""
    token = f"{SESSION_SCHEME}_{secrets.token_urlsafe(32)}"
    return token, session_hash(token)


def session_hash(token: str) -> bytes:
    """What is stored for a session token (it carries 256 random bits: no key needed)."""
    return hashlib.sha256(token.encode()).digest()


def session_csrf(secret_keys: Sequence[str], session_id: uuid.UUID) -> str:
    """The sign-out form's hidden token, bound to the session it ends."""
    return _b64(_mac(secret_keys[0], b"signout", session_id.bytes))


def valid_session_csrf(secret_keys: Sequence[str], session_id: uuid.UUID, given: str) -> bool:
    """Whether `given` is the sign-out token of this session under any server key."""
    return any(
        hmac.compare_digest(_b64(_mac(s, b"signout", session_id.bytes)), given) for s in secret_keys
    )
