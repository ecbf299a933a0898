"""The one TLS context every outbound HTTP client of a process shares.

httpx builds a fresh verifying context for each client it makes, loading a CA bundle each
time: some 25 ms of CPU per client, paid by every CLI command, every preflight check and
every level's metrics scraper, though a context is meant to be made once and reused (it is
safe to share between clients and threads). Clients pass `verify=tls_context()` instead.

What it trusts: the system's CA store (where an operator installs a private CA for internal
deployments; SSL_CERT_FILE and SSL_CERT_DIR replace it, as OpenSSL reads them) and
certifi's bundle (httpx's default, so a slim image without a system store still verifies
public certificates). The load generator, preflight, scrapers, webhooks and the CLI all
trust the same.
"""

from __future__ import annotations

import functools
import ssl

import certifi


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The process's verifying TLS context, made on first use."""
    context = ssl.create_default_context()
    context.load_verify_locations(cafile=certifi.where())
    return context
