"""One typed settings object, read from the environment once (docs/operations.md, Configuration)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {raw!r}") from None


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = (env.get(name) or "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name} must be 1 or 0 (true or false), got {raw!r}")


def _origins(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    """Origins (scheme://host[:port], `*.` allowed before the host) separated by commas or
    spaces; anything else is refused, so a typo never widens who may frame the pages."""
    found = []
    for raw in env.get(name, "").replace(",", " ").split():
        origin = raw.rstrip("/")
        scheme, sep, host = origin.partition("://")
        if (
            scheme not in ("http", "https")
            or not sep
            or not host
            or "/" in host
            or "*" in host.removeprefix("*.")
        ):
            raise ValueError(
                f"{name}: '{raw}' is not an origin; list origins such as "
                "https://portal.example.com, separated by commas"
            )
        found.append(origin)
    return tuple(found)


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the api, the workers and the CLI need to know about their environment."""

    data_dir: Path = Path(".infercost")
    database_url: str | None = None
    redis_url: str | None = None
    admin_token: str | None = None
    secret_keys: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    port: int = 8000
    # Upper bound on one level's concurrency, and the size of each worker's HTTP pool.
    max_concurrency: int = 1024
    # Celery queue used for benchmark jobs; tests give each run its own.
    queue: str = "benchmarks"
    # Largest dataset upload accepted (POST /v1/datasets), in bytes.
    max_dataset_bytes: int = 64 * 1024 * 1024
    # Largest request log accepted (POST /v1/traffic), in bytes of text (after gunzip):
    # request logs run far longer than prompt sets (a day of a busy gateway is gigabytes).
    max_traffic_bytes: int = 256 * 1024 * 1024
    # Webhook retries: the first after this many seconds, then doubling, up to this many
    # attempts in all (infercost/webhooks/delivery.py).
    webhook_backoff_s: float = 10.0
    webhook_max_attempts: int = 6
    # Failures (README, "What survives a failure"): a running job whose heartbeat is older
    # than abandoned_after_s lost its worker and is failed; a queued job no worker claimed
    # within requeue_after_s (then backing off) is handed to the broker again; a level's
    # store is retried on lost connections for up to store_retry_s (below abandoned_after_s,
    # so a retrying runner is not given up). The maintenance process looks every
    # maintenance_every_s.
    abandoned_after_s: float = 90.0
    requeue_after_s: float = 60.0
    store_retry_s: float = 60.0
    maintenance_every_s: float = 5.0
    # Retention: the maintenance process deletes the raw request and telemetry samples of runs
    # that finished more than sample_retention_days ago (summaries stay; the run says
    # samples_pruned_at), looking every retention_every_s. 0: keep samples forever.
    sample_retention_days: float = 0.0
    retention_every_s: float = 3600.0
    # Every database connection: a statement running longer, or a transaction left idle
    # longer, is ended by the server, so nothing holds locks forever; 0 turns one off.
    db_statement_timeout_s: float = 120.0
    db_idle_in_transaction_timeout_s: float = 120.0
    # Migrations wait at most this long for a table lock instead of queueing every query
    # behind them.
    migration_lock_timeout_s: float = 10.0
    # Where the service may connect beyond its default outbound policy (infercost/net/outbound.py):
    # CIDRs and host names, e.g. ("127.0.0.0/8", "::1") for a simulator on this machine.
    outbound_allow: tuple[str, ...] = ()
    # Per-team caps (README, "Security and operations"); each error names its variable.
    max_active_jobs: int = 20
    max_requests_per_job: int = 1_000_000
    max_job_duration_s: float = 86_400.0
    max_metrics_urls: int = 8
    max_webhooks: int = 20
    # What a team keeps (infercost/teams/caps.py): live endpoints, datasets, schedules and
    # traffic logs, and each endpoint's tags (how many; the longest name or value).
    max_endpoints: int = 200
    max_datasets: int = 100
    max_schedules: int = 50
    max_traffic_logs: int = 50
    max_tags: int = 32
    max_tag_chars: int = 256
    # Requests per minute one API key may make, counted in Redis across replicas; 0: no limit.
    rate_limit_per_minute: int = 600
    # The share of a level's events that pauses of the load generator may have exposed to
    # lateness before the level is judged client-bound (client_paused): 1% keeps a p99 honest.
    # A host that shares its CPU (a CI runner, a laptop) may raise it; each run records the
    # limit it was judged by (client.pause_exposure_limit).
    pause_exposure_limit: float = 0.01
    # Failed authentications (401, 403) one client address may have per minute, whatever
    # tokens it presents; past it every request from the address is 429 until the minute
    # ends. 0: no limit.
    auth_failures_per_minute: int = 30
    # Seconds a request's body may take to arrive, from its headers; after it, 408 and the
    # connection closed, so slow clients cannot hold connections open. 0: no limit.
    body_timeout_s: float = 120.0
    # Whether registering an endpoint (or changing where it points) runs the preflight check
    # at once (a few seconds at most); POST /v1/endpoints/{id}/check runs it either way.
    preflight_on_register: bool = True
    # Pages for people (docs/operations.md, "Sign-in, share links, embedding and SSO").
    # The address people reach the API at, for links in pages and share URLs
    # (https://infercost.example.com); unset: the address each request came in on.
    public_url: str | None = None
    # Origins allowed to frame the HTML pages (a portal); none: no page may be framed.
    frame_ancestors: tuple[str, ...] = ()
    # How long a browser stays signed in after signing in with a team key.
    session_ttl_s: float = 12 * 3600.0
    # Whether the session cookie is Secure (__Host- prefixed): browsers keep it over https
    # and on loopback only, so a plain-http deployment on another address turns it off.
    session_cookie_secure: bool = True
    # The longest a share link may live, and how long one lives when the request says not.
    share_max_ttl_s: float = 90 * 86400.0
    share_default_ttl_s: float = 7 * 86400.0
    # Single sign-on: bearer tokens (JWT) from this OpenID Connect issuer, for this audience,
    # whose `oidc_team_claim` names a team (by name or id). Unset issuer: SSO is off.
    oidc_issuer: str | None = None
    oidc_audience: str | None = None
    oidc_team_claim: str = "infercost_team"
    # How long the issuer's discovery document and signing keys are kept before refetching
    # (a token signed by a key not in the cached set refetches at once, at most every 30 s).
    oidc_jwks_ttl_s: float = 3600.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read the configuration variables of docs/operations.md from `env`."""
        env = os.environ if env is None else env
        keys = tuple(
            k.strip() for k in env.get("INFERCOST_SECRET_KEYS", "").split(",") if k.strip()
        )
        return cls(
            data_dir=Path(env.get("INFERCOST_DATA_DIR") or ".infercost"),
            database_url=env.get("DATABASE_URL") or None,
            redis_url=env.get("REDIS_URL") or None,
            admin_token=env.get("INFERCOST_ADMIN_TOKEN") or None,
            secret_keys=keys,
            host=env.get("INFERCOST_HOST") or "127.0.0.1",
            port=_int(env, "INFERCOST_PORT", 8000),
            max_concurrency=_int(env, "INFERCOST_MAX_CONCURRENCY", 1024),
            queue=env.get("INFERCOST_QUEUE") or "benchmarks",
            max_dataset_bytes=_int(env, "INFERCOST_MAX_DATASET_BYTES", 64 * 1024 * 1024),
            max_traffic_bytes=_int(env, "INFERCOST_MAX_TRAFFIC_BYTES", 256 * 1024 * 1024),
            webhook_backoff_s=_float(env, "INFERCOST_WEBHOOK_BACKOFF_S", 10.0),
            webhook_max_attempts=max(1, _int(env, "INFERCOST_WEBHOOK_MAX_ATTEMPTS", 6)),
            abandoned_after_s=_float(env, "INFERCOST_ABANDONED_AFTER_S", 90.0),
            requeue_after_s=_float(env, "INFERCOST_REQUEUE_AFTER_S", 60.0),
            store_retry_s=_float(env, "INFERCOST_STORE_RETRY_S", 60.0),
            maintenance_every_s=_float(env, "INFERCOST_MAINTENANCE_EVERY_S", 5.0),
            sample_retention_days=max(0.0, _float(env, "INFERCOST_SAMPLE_RETENTION_DAYS", 0.0)),
            retention_every_s=_float(env, "INFERCOST_RETENTION_EVERY_S", 3600.0),
            db_statement_timeout_s=_float(env, "INFERCOST_DB_STATEMENT_TIMEOUT_S", 120.0),
            db_idle_in_transaction_timeout_s=_float(
                env, "INFERCOST_DB_IDLE_IN_TRANSACTION_TIMEOUT_S", 120.0
            ),
            migration_lock_timeout_s=_float(env, "INFERCOST_MIGRATION_LOCK_TIMEOUT_S", 10.0),
            outbound_allow=tuple(
                a.strip() for a in env.get("INFERCOST_OUTBOUND_ALLOW", "").split(",") if a.strip()
            ),
            max_active_jobs=_int(env, "INFERCOST_MAX_ACTIVE_JOBS", 20),
            max_requests_per_job=_int(env, "INFERCOST_MAX_REQUESTS_PER_JOB", 1_000_000),
            max_job_duration_s=_float(env, "INFERCOST_MAX_JOB_DURATION_S", 86_400.0),
            max_metrics_urls=_int(env, "INFERCOST_MAX_METRICS_URLS", 8),
            max_webhooks=_int(env, "INFERCOST_MAX_WEBHOOKS", 20),
            max_endpoints=_int(env, "INFERCOST_MAX_ENDPOINTS", 200),
            max_datasets=_int(env, "INFERCOST_MAX_DATASETS", 100),
            max_schedules=_int(env, "INFERCOST_MAX_SCHEDULES", 50),
            max_traffic_logs=_int(env, "INFERCOST_MAX_TRAFFIC_LOGS", 50),
            max_tags=_int(env, "INFERCOST_MAX_TAGS", 32),
            max_tag_chars=_int(env, "INFERCOST_MAX_TAG_CHARS", 256),
            rate_limit_per_minute=_int(env, "INFERCOST_RATE_LIMIT_PER_MINUTE", 600),
            pause_exposure_limit=_float(env, "INFERCOST_PAUSE_EXPOSURE_LIMIT", 0.01),
            auth_failures_per_minute=_int(env, "INFERCOST_AUTH_FAILURES_PER_MINUTE", 30),
            body_timeout_s=_float(env, "INFERCOST_BODY_TIMEOUT_S", 120.0),
            preflight_on_register=env.get("INFERCOST_PREFLIGHT_ON_REGISTER", "1").strip().lower()
            not in ("0", "false", "no", "off"),
            public_url=(env.get("INFERCOST_PUBLIC_URL") or "").rstrip("/") or None,
            frame_ancestors=_origins(env, "INFERCOST_FRAME_ANCESTORS"),
            session_ttl_s=_float(env, "INFERCOST_SESSION_TTL_S", 12 * 3600.0),
            session_cookie_secure=_flag(env, "INFERCOST_SESSION_COOKIE_SECURE", True),
            share_max_ttl_s=_float(env, "INFERCOST_SHARE_MAX_TTL_S", 90 * 86400.0),
            share_default_ttl_s=_float(env, "INFERCOST_SHARE_DEFAULT_TTL_S", 7 * 86400.0),
            oidc_issuer=(env.get("INFERCOST_OIDC_ISSUER") or "").rstrip("/") or None,
            oidc_audience=env.get("INFERCOST_OIDC_AUDIENCE") or None,
            oidc_team_claim=env.get("INFERCOST_OIDC_TEAM_CLAIM") or "infercost_team",
            oidc_jwks_ttl_s=_float(env, "INFERCOST_OIDC_JWKS_TTL_S", 3600.0),
        )

    def require_database_url(self) -> str:
        """The database URL, or a message saying how to provide one."""
        if not self.database_url:
            raise RuntimeError(
                "DATABASE_URL is not set: point it at Postgres "
                "(postgresql+asyncpg://user@host/db) or start everything with `infercost up`"
            )
        return self.database_url

    @property
    def redis_client_url(self) -> str | None:
        """REDIS_URL spelled for redis-py: Celery's `redis+socket:///path` (what `infercost up`
        sets for its embedded Redis) is redis-py's `unix:///path`; other URLs are the same."""
        url = self.redis_url
        if url and url.startswith("redis+socket://"):
            return "unix://" + url.removeprefix("redis+socket://")
        return url

    def require_redis_url(self) -> str:
        """The broker URL, or a message saying how to provide one."""
        if not self.redis_url:
            raise RuntimeError(
                "REDIS_URL is not set: point it at Redis (redis://host:6379/0) "
                "or start everything with `infercost up`"
            )
        return self.redis_url
