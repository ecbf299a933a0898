"""Guards in front of every route: JSON nesting depth, NUL bytes in the URL, a deadline for
the request's body, the per-key rate limit and the per-address limit on refused
credentials, shared by every API replica through Redis."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import time
from typing import Any, Final
from urllib.parse import unquote_to_bytes

from litestar import Request
from litestar.datastructures import State
from litestar.enums import ScopeType
from litestar.exceptions import ClientException, HTTPException, TooManyRequestsException
from litestar.types import ASGIApp, Message, Receive, ReceiveMessage, Scope, Send
from redis.asyncio import Redis
from redis.exceptions import RedisError

from infercost.limits import MAX_JSON_DEPTH, too_deep

log = logging.getLogger("infercost.api")

#: The rate limit's window: a fixed minute, counted per key in Redis.
WINDOW_S: Final = 60
#: Paths never counted: liveness probes and the docs.
_UNCOUNTED: Final = ("/health", "/schema", "/docs")


class GuardedRequest(Request[Any, Any, State]):
    """A request whose JSON body is refused (400) when it nests deeper than MAX_JSON_DEPTH,
    before the decoder recurses into it."""

    async def json(self) -> Any:
        """The decoded body, once its depth is known to be within bounds."""
        if too_deep(await self.body()):
            raise ClientException(
                f"the JSON body is nested more than {MAX_JSON_DEPTH} levels deep (arrays and "
                "objects inside one another): flatten it"
            )
        return await super().json()


def refuse_nul(app: ASGIApp) -> ASGIApp:
    """Middleware: a NUL byte in the path or query string answers 400 at once. No stored
    text may hold one (Postgres refuses it), so a filter holding one can match nothing."""

    async def guard(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == ScopeType.HTTP:
            raw = bytes(scope.get("query_string", b""))
            path = scope.get("raw_path") or scope["path"].encode()
            if b"\x00" in unquote_to_bytes(raw) or b"\x00" in unquote_to_bytes(path):
                raise ClientException(
                    "the URL holds a NUL character (%00), which no value here can contain: "
                    "remove it"
                )
        await app(scope, receive, send)

    return guard


def body_deadline(app: ASGIApp) -> ASGIApp:
    """Middleware: the request's body must have arrived `settings.body_timeout_s` after its
    headers; a read of it past that answers 408 (problem+json) and closes the connection, so
    a client trickling its body cannot hold a connection, and what it holds, open."""

    async def guard(scope: Scope, receive: Receive, send: Send) -> None:
        state = scope["litestar_app"].state if scope["type"] == ScopeType.HTTP else None
        settings = getattr(state, "settings", None)
        limit: float = settings.body_timeout_s if settings is not None else 0.0
        if limit <= 0:
            await app(scope, receive, send)
            return
        deadline = asyncio.get_running_loop().time() + limit
        whole = False

        async def timed() -> ReceiveMessage:
            nonlocal whole
            if whole:
                return await receive()  # after the body: waiting for a disconnect is no read
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise HTTPException(
                    status_code=408,
                    detail=f"the request's body did not arrive within {limit:g} s of its headers "
                    "(INFERCOST_BODY_TIMEOUT_S): send it at once, or ask an admin to raise the "
                    "limit for large uploads on slow links",
                    headers={"Connection": "close"},
                ) from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                whole = True
            return message

        await app(scope, timed, send)

    return guard


def _rate_key(scope: Scope) -> str:
    """Whom a request is counted against: its bearer token (hashed, so a key's text never
    reaches Redis; an unknown token gets a bucket of its own), else its client address."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            return "key:" + hashlib.sha256(value).hexdigest()[:32]
    return f"addr:{_address(scope)}"


def _address(scope: Scope) -> str:
    """The client's address (behind a proxy, what uvicorn's proxy headers make it)."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


#: Responses that mean the credentials were refused: counted against the client's address.
_AUTH_FAILED: Final = frozenset({401, 403})


def _too_many(message: str, limit: int, now: float, window: int) -> TooManyRequestsException:
    retry_after = max(1, math.ceil((window + 1) * WINDOW_S - now))
    return TooManyRequestsException(
        f"{message}: retry in {retry_after} s",
        headers={
            "Retry-After": str(retry_after),
            "RateLimit-Limit": str(limit),
            "RateLimit-Remaining": "0",
            "RateLimit-Reset": str(retry_after),
        },
    )


def rate_limit(app: ASGIApp) -> ASGIApp:
    """Middleware: at most `settings.rate_limit_per_minute` requests per key per minute, and
    at most `settings.auth_failures_per_minute` refused credentials per client address
    (whatever tokens it presents, so made-up tokens cannot each get a bucket of their own),
    counted in Redis (app.state.rate_limit_redis), so every API replica shares the counts;
    over either, 429 with Retry-After. Redis unreachable: requests pass (logged), since the
    limit protects the service and must not take it down."""

    async def guard(scope: Scope, receive: Receive, send: Send) -> None:
        state = scope["litestar_app"].state if scope["type"] == ScopeType.HTTP else None
        redis: Redis | None = getattr(state, "rate_limit_redis", None)
        path: str = scope.get("path", "")
        if redis is None or state is None or path.startswith(_UNCOUNTED):
            await app(scope, receive, send)
            return
        limit: int = state.settings.rate_limit_per_minute
        failures_cap: int = state.settings.auth_failures_per_minute
        now = time.time()
        window = int(now // WINDOW_S)
        key = f"infercost:ratelimit:{_rate_key(scope)}:{window}"
        failures_key = f"infercost:authfail:{_address(scope)}:{window}"
        try:
            async with redis.pipeline(transaction=True) as pipe:
                pipe.incr(key)
                pipe.expire(key, WINDOW_S * 2)
                pipe.get(failures_key)
                count, _, failures = await pipe.execute()
        except (RedisError, OSError) as exc:
            log.warning("rate limit not checked (Redis: %s)", type(exc).__name__)
            await app(scope, receive, send)
            return
        if failures_cap > 0 and int(failures or 0) >= failures_cap:
            raise _too_many(
                f"more than {failures_cap} requests from your address were refused their "
                "credentials this minute (INFERCOST_AUTH_FAILURES_PER_MINUTE); check the key "
                "you send",
                failures_cap,
                now,
                window,
            )
        if limit > 0 and int(count) > limit:
            raise _too_many(
                f"this API key made more than {limit} requests this minute "
                "(INFERCOST_RATE_LIMIT_PER_MINUTE)",
                limit,
                now,
                window,
            )
        if failures_cap <= 0:
            await app(scope, receive, send)
            return
        status: list[int] = []

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        try:
            await app(scope, receive, watch)
        except Exception as exc:
            # Refusals raised as errors become responses outside this middleware.
            if getattr(exc, "status_code", None) in _AUTH_FAILED:
                await _count_failure(redis, failures_key)
            raise
        if status and status[0] in _AUTH_FAILED:
            await _count_failure(redis, failures_key)

    return guard


async def _count_failure(redis: Redis, key: str) -> None:
    """One more refused credential from an address this minute."""
    try:
        async with redis.pipeline(transaction=True) as pipe:
            pipe.incr(key)
            pipe.expire(key, WINDOW_S * 2)
            await pipe.execute()
    except (RedisError, OSError) as exc:
        log.warning("a failed authentication not counted (Redis: %s)", type(exc).__name__)
