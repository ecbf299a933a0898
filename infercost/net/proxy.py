"""The proxy settings of the environment (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY), read
once, with the same rules httpx applies to them.

The load client (workers/loadgen/transport.py) hands the rules to httpx as mounts and asks
`ProxyRules.proxy_for` which requests go through a proxy and which straight to a slot's own
connection, so both agree on every URL. The rules, as httpx (and curl, for NO_PROXY) keep
them: HTTP_PROXY serves http:// URLs, HTTPS_PROXY https:// ones, ALL_PROXY both; a proxy
given without a scheme is an http:// one; NO_PROXY=`*` turns every proxy off; a NO_PROXY
entry with a scheme is taken as a URL pattern, an address or `localhost` matches that host
exactly, and a name matches itself and every name under it (`example.com` also matches
`api.example.com`, never `myexample.com`). Among patterns that match a URL the most specific
wins: one with a port, then the longest host, then one with a scheme.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit
from urllib.request import getproxies_environment


@dataclass(frozen=True, slots=True)
class _Pattern:
    """A mount pattern: `scheme://host:port`, `all` for any scheme, a host `*name` for the
    name and every name under it, no host for any."""

    text: str
    scheme: str
    host: str
    port: int | None

    @classmethod
    def parse(cls, text: str) -> _Pattern:
        scheme, _, rest = text.partition("://")
        netloc = rest.split("/", 1)[0]
        host, port = netloc, None
        if netloc.startswith("["):
            host, _, tail = netloc[1:].partition("]")
            if tail.startswith(":") and tail[1:].isdigit():
                port = int(tail[1:])
        elif netloc.count(":") == 1:
            name, _, digits = netloc.partition(":")
            if digits.isdigit():
                host, port = name, int(digits)
        return cls(text, "" if scheme == "all" else scheme.lower(), host.lower(), port)

    def matches(self, scheme: str, host: str, port: int | None) -> bool:
        if self.scheme and self.scheme != scheme:
            return False
        if self.host and self.host != "*":
            if self.host.startswith("*."):
                if not host.endswith(self.host[1:]):
                    return False
            elif self.host.startswith("*"):
                name = self.host[1:]
                if host != name and not host.endswith("." + name):
                    return False
            elif host != self.host:
                return False
        return self.port is None or self.port == port

    @property
    def rank(self) -> tuple[bool, int, bool]:
        """Most specific first (sorted descending)."""
        return (self.port is not None, len(self.host), bool(self.scheme))


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text.split("/", maxsplit=1)[0])
    except ValueError:
        return False
    return True


def _proxies_in(environ: Mapping[str, str]) -> dict[str, str]:
    """scheme -> value of each `<scheme>_proxy` variable (the lower-case one wins), as urllib
    reads them from the process's environment."""
    found: dict[str, str] = {}
    for key, value in environ.items():
        name = key.lower()
        if name.endswith("_proxy") and value and (key.islower() or name[:-6] not in found):
            found[name[:-6]] = value
    return found


def _no_proxy_pattern(entry: str) -> str:
    """The mount pattern of one NO_PROXY entry."""
    if "://" in entry:
        return entry
    if _is_address(entry) and ":" in entry:
        return f"all://[{entry}]"
    if _is_address(entry) or entry.lower() == "localhost":
        return f"all://{entry}"
    return f"all://*{entry}"


@dataclass(frozen=True, slots=True)
class ProxyRules:
    """Mount patterns -> proxy URL, or None where NO_PROXY sends a request straight."""

    mounts: tuple[tuple[str, str | None], ...] = ()

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> ProxyRules:
        """The rules the *_PROXY variables say (urllib reads them, lower case first)."""
        found = getproxies_environment() if environ is None else _proxies_in(environ)
        mounts: dict[str, str | None] = {}
        for scheme in ("http", "https", "all"):
            proxy = found.get(scheme)
            if proxy:
                mounts[f"{scheme}://"] = proxy if "://" in proxy else f"http://{proxy}"
        for entry in (part.strip() for part in found.get("no", "").split(",")):
            if entry == "*":
                return cls()
            if entry:
                mounts[_no_proxy_pattern(entry)] = None
        return cls(tuple(mounts.items()))

    def proxy_for(self, url: str) -> str | None:
        """The proxy a request to `url` goes through, or None when it goes straight."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        host = (parts.hostname or "").lower()
        port = parts.port
        candidates = sorted(
            ((_Pattern.parse(text), proxy) for text, proxy in self.mounts),
            key=lambda item: item[0].rank,
            reverse=True,
        )
        for pattern, proxy in candidates:
            if pattern.matches(scheme, host, port):
                return proxy
        return None
