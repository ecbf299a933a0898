"""API keys (keyed hashes with readable prefixes), admin token checks, credential encryption."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

KEY_SCHEME = "ic"


@dataclass(frozen=True, slots=True)
class NewKey:
    """A freshly minted key: `token` is shown once, `prefix` and `digest` are stored."""

    token: str
    prefix: str
    digest: bytes


def _hmac(secret: str, token: str) -> bytes:
    return hmac.new(secret.encode(), token.encode(), hashlib.sha256).digest()


def mint_api_key(secret_keys: Sequence[str]) -> NewKey:
    """A new bearer key `ic_<prefix>_<secret>`, hashed with the first server secret."""
    prefix = secrets.token_hex(6)
    token = f"{KEY_SCHEME}_{prefix}_{secrets.token_urlsafe(32)}"
    return NewKey(token=token, prefix=prefix, digest=_hmac(_first(secret_keys), token))


def key_prefix(token: str) -> str | None:
    """The readable prefix of a well-formed key, else None."""
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_SCHEME or len(parts[1]) != 12:
        return None
    return parts[1]


def verify_api_key(secret_keys: Sequence[str], token: str, digest: bytes) -> bool:
    """True when `token` hashes to `digest` under any server secret (so secrets can rotate)."""
    return any(hmac.compare_digest(_hmac(s, token), digest) for s in secret_keys)


def same_token(given: str, expected: str | None) -> bool:
    """Constant-time comparison for the admin token."""
    return expected is not None and hmac.compare_digest(given.encode(), expected.encode())


def _first(secret_keys: Sequence[str]) -> str:
    if not secret_keys:
        raise RuntimeError(
            "INFERCOST_SECRET_KEYS is not set: generate a key with `python -c "
            "'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'`"
        )
    return secret_keys[0]


class CredentialError(RuntimeError):
    """A stored credential cannot be read with the configured keys."""


class Vault:
    """Encrypts endpoint credentials at rest with the first key; decrypts with any of them."""

    def __init__(self, secret_keys: Sequence[str]) -> None:
        _first(secret_keys)
        self._fernet = MultiFernet([Fernet(k.encode()) for k in secret_keys])

    def encrypt(self, plaintext: str) -> bytes:
        """Ciphertext for storage."""
        return self._fernet.encrypt(plaintext.encode())

    def decrypt(self, ciphertext: bytes) -> str:
        """The stored secret, or a clear error if no configured key can open it."""
        try:
            return self._fernet.decrypt(ciphertext).decode()
        except InvalidToken:
            raise CredentialError(
                "a stored credential cannot be decrypted with INFERCOST_SECRET_KEYS: "
                "keep the old key in the list when rotating"
            ) from None
