"""The Litestar application: routes by domain, one session per request, problem+json errors."""

from __future__ import annotations

import gc
import logging

import httpx
from litestar import Litestar, get
from litestar.datastructures import State
from litestar.di import Provide
from litestar.routes import HTTPRoute
from redis.asyncio import Redis
from sqlalchemy import text

import infercost.db.models  # noqa: F401 - every mapper registered before the first query
from api.auth import provide_caller, provide_settings
from api.db import provide_db_session
from api.domain.audit.controllers import AuditController
from api.domain.audit.services import provide_audit
from api.domain.comparisons.controllers import ComparisonController
from api.domain.datasets.controllers import DatasetController
from api.domain.endpoints.controllers import EndpointController
from api.domain.estimates.controllers import EstimateController, PresetController
from api.domain.exports.controllers import ExportController
from api.domain.hardware.controllers import HardwareController
from api.domain.history.controllers import HistoryController
from api.domain.imports.controllers import ImportController
from api.domain.jobs.controllers import JobController, RunController
from api.domain.prices.controllers import PriceController
from api.domain.reports.controllers import ReportController
from api.domain.schedules.controllers import ScheduleController
from api.domain.shares.controllers import (
    ShareController,
    SharedPageController,
    ShareFormController,
)
from api.domain.signin.controllers import SignInController
from api.domain.signin.docs import doc_page
from api.domain.status.controllers import StatusController
from api.domain.teams.controllers import TeamController
from api.domain.telemetry.controllers import TelemetryController
from api.domain.traffic.controllers import TrafficController
from api.domain.webhooks.controllers import WebhookController
from api.errors import EXCEPTION_HANDLERS
from api.guards import body_deadline, rate_limit, refuse_nul
from api.openapi import docs_handlers, document, openapi_config, problem_responses
from api.pages import SignInRequired, deny_framing, sign_in_redirect
from api.queue import TaskQueue, make_celery
from api.strict import StrictRequest, strict_query
from infercost import __version__
from infercost.access.oidc import OidcVerifier
from infercost.db.engine import engine_for, make_sessionmaker
from infercost.db.scope import unscoped
from infercost.net.outbound import Policy
from infercost.net.redact import install_log_redaction
from infercost.net.tls import tls_context
from infercost.security import Vault
from infercost.settings import Settings

log = logging.getLogger("infercost.api")


@get(
    "/health",
    tags=["health"],
    summary="Liveness and database check",
    security=[{}],
    responses=problem_responses(503),
)
async def health(state: State) -> dict[str, str]:
    """200 when the API can reach Postgres."""
    async with state.engine.connect() as connection:
        await connection.execute(unscoped(text("SELECT 1"), "the health check reads no table"))
    return {"status": "ok", "version": __version__}


def allow_every_method(app: Litestar) -> None:
    """Make OPTIONS list every method of its path in `Allow`. Litestar builds a path's route
    again as each controller adds handlers to it, but the OPTIONS handler made with the first
    route keeps reading that route's methods (only the first handler's): point it at the
    route it now answers for. (405 answers already list the path's methods.)"""
    for route in app.routes:
        if not isinstance(route, HTTPRoute) or "OPTIONS" not in route.route_handler_map:
            continue
        fn = route.route_handler_map["OPTIONS"][0].fn
        if getattr(fn, "__name__", "") != "options_handler":
            continue  # an OPTIONS handler of our own
        for cell in getattr(fn, "__closure__", None) or ():
            if isinstance(cell.cell_contents, HTTPRoute):
                cell.cell_contents = route


def create_app(settings: Settings | None = None) -> Litestar:
    """Build the app; the engine, broker client and vault are made at startup, not import."""
    settings = settings or Settings.from_env()

    async def startup(app: Litestar) -> None:
        engine = engine_for(settings)
        app.state.settings = settings
        app.state.engine = engine
        app.state.sessionmaker = make_sessionmaker(engine)
        app.state.vault = Vault(settings.secret_keys)
        # Where registered URLs may point (INFERCOST_OUTBOUND_ALLOW), read once.
        app.state.outbound = Policy.from_settings(settings)
        # The per-key rate limit counts in the broker's Redis, shared by every replica.
        app.state.rate_limit_redis = (
            Redis.from_url(
                settings.redis_client_url, socket_timeout=1.0, socket_connect_timeout=1.0
            )
            if settings.redis_client_url
            and (settings.rate_limit_per_minute > 0 or settings.auth_failures_per_minute > 0)
            else None
        )
        # Single sign-on: the issuer's keys are fetched on first use and kept (oidc.py).
        if settings.oidc_issuer:
            if not settings.oidc_audience:
                raise RuntimeError(
                    "INFERCOST_OIDC_ISSUER is set without INFERCOST_OIDC_AUDIENCE: set the "
                    "audience (aud) this service's tokens carry"
                )
            app.state.oidc_client = httpx.AsyncClient(timeout=5.0, verify=tls_context())
            app.state.oidc = OidcVerifier(
                settings.oidc_issuer,
                settings.oidc_audience,
                client=app.state.oidc_client,
                ttl_s=settings.oidc_jwks_ttl_s,
            )
        celery = make_celery(settings)
        app.state.celery = celery
        app.state.task_queue = TaskQueue(celery, app.state.sessionmaker)
        # Everything loaded so far (the app, SQLAlchemy, matplotlib for reports) lives as
        # long as the process: move it out of the collector's sight, so a full collection,
        # set off by a big page's many small objects, no longer walks it (it cost 100 ms+).
        gc.freeze()

    async def shutdown(app: Litestar) -> None:
        await app.state.engine.dispose()
        if app.state.get("oidc_client") is not None:
            await app.state.oidc_client.aclose()
        if "celery" in app.state:
            app.state.celery.close()
        if app.state.get("rate_limit_redis") is not None:
            try:
                await app.state.rate_limit_redis.aclose()
            except Exception as exc:  # noqa: BLE001 - closing is best effort, as the engine's is
                # (e.g. a test served the app in another event loop than its startup's).
                log.warning("rate limit's Redis connections not closed cleanly: %r", exc)

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    install_log_redaction()
    app = Litestar(
        route_handlers=[
            health,
            *docs_handlers(),
            TeamController,
            HardwareController,
            PriceController,
            EndpointController,
            HistoryController,
            JobController,
            RunController,
            ExportController,
            TelemetryController,
            EstimateController,
            PresetController,
            DatasetController,
            TrafficController,
            ImportController,
            ComparisonController,
            ReportController,
            StatusController,
            WebhookController,
            ScheduleController,
            AuditController,
            ShareController,
            SharedPageController,
            ShareFormController,
            SignInController,
            doc_page,
        ],
        dependencies={
            "settings": Provide(provide_settings, sync_to_thread=False),
            "db_session": Provide(provide_db_session),
            "caller": Provide(provide_caller),
            "audit": Provide(provide_audit, sync_to_thread=False),
        },
        exception_handlers={**EXCEPTION_HANDLERS, SignInRequired: sign_in_redirect},
        request_class=StrictRequest,
        middleware=[deny_framing, body_deadline, refuse_nul, rate_limit, strict_query],
        on_startup=[startup],
        on_shutdown=[shutdown],
        openapi_config=openapi_config(),
        debug=False,
    )
    document(app)
    allow_every_method(app)
    return app
