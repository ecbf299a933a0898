"""The one TLS context every outbound HTTP client of a process shares.

httpx builds a fresh verifying context for each client it makes, loading the CA bundle each
time: some 25 ms of CPU per client, paid by every CLI command, every preflight check and
every level's metrics scraper, though a context is meant to be made once and reused (it is
safe to share between clients and threads). Clients pass `verify=tls_context()` instead.
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The process's verifying TLS context, as httpx would build it (its CA bundle, or the
    one SSL_CERT_FILE / SSL_CERT_DIR name), made on first use."""
    return httpx.create_ssl_context()
