"""Bearer tokens from an OpenID Connect issuer (single sign-on for portals that have it).

The issuer's discovery document names its key set (jwks_uri); both are fetched with the
service's async HTTP client and kept for `ttl_s`, so a token costs no request to the issuer.
A token signed by a key not in the kept set (the issuer rotated) fetches the set again at
once, at most every REFETCH_MIN_S, so a flood of forged key ids cannot hammer the issuer.
Signatures, expiry, audience and issuer are checked by PyJWT; only asymmetric algorithms are
accepted, so a key set can never be mistaken for a shared secret."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import httpx
import jwt

#: Signature algorithms accepted: public-key ones only ("none" and HMAC never).
ALGORITHMS: Final = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "EdDSA",
)
#: The soonest a key set is fetched again for an unknown key id.
REFETCH_MIN_S: Final = 30.0
#: Clock skew forgiven on exp, nbf and iat.
LEEWAY_S: Final = 30.0


class TokenRejected(Exception):
    """The token is not one this service accepts; `detail` says why, for a person."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class IssuerUnavailable(Exception):
    """The issuer's discovery document or key set could not be fetched."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def looks_like_jwt(token: str) -> bool:
    """Three base64url parts separated by dots: a compact JWS."""
    return token.count(".") == 2 and all(token.split("."))


@dataclass
class _Keys:
    jwks_uri: str
    keys: dict[str, jwt.PyJWK]
    fetched_at: float


class OidcVerifier:
    """Checks tokens of one issuer for one audience; one per API process."""

    def __init__(
        self, issuer: str, audience: str, *, client: httpx.AsyncClient, ttl_s: float
    ) -> None:
        self.issuer = issuer
        self.audience = audience
        self.client = client
        self.ttl_s = ttl_s
        self._keys: _Keys | None = None
        self._lock = asyncio.Lock()

    async def _get_json(self, url: str, what: str) -> dict[str, Any]:
        try:
            response = await self.client.get(url, headers={"Accept": "application/json"})
        except httpx.HTTPError as exc:
            raise IssuerUnavailable(
                f"the single sign-on issuer's {what} at {url} could not be fetched "
                f"({type(exc).__name__}): check INFERCOST_OIDC_ISSUER and that this host "
                "reaches it"
            ) from None
        if response.status_code != 200:
            raise IssuerUnavailable(
                f"the single sign-on issuer's {what} at {url} answered HTTP "
                f"{response.status_code}: check INFERCOST_OIDC_ISSUER"
            )
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise IssuerUnavailable(f"the single sign-on issuer's {what} at {url} is not JSON")
        return body

    async def _fetch(self) -> _Keys:
        discovery_url = f"{self.issuer}/.well-known/openid-configuration"
        discovery = await self._get_json(discovery_url, "discovery document")
        if discovery.get("issuer", "").rstrip("/") != self.issuer:
            raise IssuerUnavailable(
                f"the discovery document at {discovery_url} names issuer "
                f"{discovery.get('issuer')!r}, not {self.issuer!r}: INFERCOST_OIDC_ISSUER "
                "must be the issuer exactly as it writes itself"
            )
        jwks_uri = discovery.get("jwks_uri")
        if not isinstance(jwks_uri, str) or not jwks_uri.startswith(("https://", "http://")):
            raise IssuerUnavailable(f"the discovery document at {discovery_url} has no jwks_uri")
        document = await self._get_json(jwks_uri, "key set")
        keys: dict[str, jwt.PyJWK] = {}
        for entry in document.get("keys") or []:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK(entry)
            except (jwt.PyJWKError, jwt.InvalidKeyError):
                continue  # a key of a type PyJWT cannot use: the others still serve
            keys[str(entry.get("kid", ""))] = key
        return _Keys(jwks_uri=jwks_uri, keys=keys, fetched_at=time.monotonic())

    async def _key(self, kid: str) -> tuple[jwt.PyJWK | None, str]:
        """The issuer's key with this id (refetching a stale set, or once for an unknown
        id), and where the set came from."""
        async with self._lock:
            now = time.monotonic()
            kept = self._keys
            if (
                kept is None
                or now - kept.fetched_at > self.ttl_s
                or (kid not in kept.keys and now - kept.fetched_at > REFETCH_MIN_S)
            ):
                self._keys = kept = await self._fetch()
        key = kept.keys.get(kid)
        if key is None and not kid and len(kept.keys) == 1:
            key = next(iter(kept.keys.values()))  # a token without kid, an issuer of one key
        return key, kept.jwks_uri

    async def claims(self, token: str) -> dict[str, Any]:
        """The token's claims once its signature, issuer, audience and times hold, else
        TokenRejected saying which did not (IssuerUnavailable when the keys cannot be had)."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError:
            raise TokenRejected(
                "the bearer token is neither an API key nor a well-formed JWT"
            ) from None
        algorithm = header.get("alg")
        if algorithm not in ALGORITHMS:
            raise TokenRejected(
                f"the token is signed with {algorithm!r}; this service accepts "
                f"{', '.join(ALGORITHMS)} from its single sign-on issuer"
            )
        key, jwks_uri = await self._key(str(header.get("kid", "")))
        if key is None:
            raise TokenRejected(
                f"the token is signed by a key (kid {header.get('kid')!r}) that the issuer "
                f"{self.issuer} does not publish at {jwks_uri}: get a token from that issuer"
            )
        try:
            return jwt.decode(
                token,
                key=key,
                algorithms=[algorithm],
                audience=self.audience,
                issuer=self.issuer,
                leeway=LEEWAY_S,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            expired = _expiry(token)
            raise TokenRejected(
                f"the token expired{expired}: get a fresh one from {self.issuer}"
            ) from None
        except jwt.InvalidAudienceError:
            raise TokenRejected(
                f"the token is not meant for this service: its audience (aud) must include "
                f"{self.audience!r} (INFERCOST_OIDC_AUDIENCE)"
            ) from None
        except jwt.InvalidIssuerError:
            raise TokenRejected(
                f"the token was issued by another issuer than {self.issuer} (INFERCOST_OIDC_ISSUER)"
            ) from None
        except jwt.InvalidSignatureError:
            raise TokenRejected(
                f"the token's signature does not verify with the issuer's key "
                f"{header.get('kid')!r} published at {jwks_uri}: it was altered or signed "
                "by another key"
            ) from None
        except jwt.MissingRequiredClaimError as exc:
            raise TokenRejected(
                f"the token has no {exc.claim!r} claim, which is required"
            ) from None
        except jwt.ImmatureSignatureError:
            raise TokenRejected(
                "the token is not valid yet (nbf or iat is in the future)"
            ) from None
        except jwt.InvalidTokenError as exc:
            raise TokenRejected(f"the token is not valid: {exc}") from None


def _expiry(token: str) -> str:
    """' at <time>' from the token's exp, read without verifying (for the message only)."""
    try:
        exp = jwt.decode(token, options={"verify_signature": False}).get("exp")
        if exp is None:
            return ""
        return f" at {datetime.fromtimestamp(float(exp), UTC):%Y-%m-%d %H:%M:%S} UTC"
    except (jwt.InvalidTokenError, TypeError, ValueError, OverflowError):
        return ""


def team_names(claims: dict[str, Any], claim: str) -> list[str]:
    """The team name(s) or id(s) the configured claim carries: a string, or a list of them."""
    value = claims.get(claim)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []
