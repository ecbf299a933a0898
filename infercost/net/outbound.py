"""Where the service may connect: one outbound policy for endpoints, metrics URLs and webhooks.

A URL is checked twice. At registration, `Policy.check_url` checks its form (http or https,
a host, a port in range, no credentials, no control characters) and any address written in
it. At connection time, `Policy.check_connect` resolves the host and checks every address;
the caller connects to those addresses (`pinned`), so a name that resolves somewhere else
a moment later (DNS rebinding) cannot reach what registration would have refused.

The default: public and private (RFC 1918, unique-local) addresses are allowed, since
deployments and portals often live on internal networks; loopback and the unspecified
address are refused unless INFERCOST_OUTBOUND_ALLOW names them; link-local addresses and
cloud metadata services are refused whatever the allowlist says.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import SplitResult, urlsplit, urlunsplit

from infercost.errors import InvalidInput
from infercost.settings import Settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Never reachable, whatever INFERCOST_OUTBOUND_ALLOW says: link-local (which holds the
#: AWS, Azure and GCP metadata address 169.254.169.254), AWS's IPv6 metadata address and
#: Alibaba Cloud's metadata address.
ALWAYS_REFUSED: Final[tuple[IPNetwork, ...]] = tuple(
    ipaddress.ip_network(n)
    for n in ("169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128", "100.100.100.200/32")
)
#: Metadata services reached by name.
METADATA_HOSTS: Final = frozenset({"metadata.google.internal", "metadata.goog"})
#: Refused unless allowlisted: this host (loopback, and 0.0.0.0, which Linux routes to it).
LOOPBACK: Final[tuple[IPNetwork, ...]] = tuple(
    ipaddress.ip_network(n) for n in ("127.0.0.0/8", "::1/128", "0.0.0.0/8", "::/128")
)
ALLOW_VARIABLE: Final = "INFERCOST_OUTBOUND_ALLOW"
_CONTROL: Final = re.compile(r"[\x00-\x20\x7f]")
# Forms inet_aton reads as IPv4 although they are not dotted quads (2852039166, 0xA9FEA9FE,
# 0251.0376.0251.0376): the resolver would turn them into addresses, so they are checked too.
_NUMERIC_HOST: Final = re.compile(r"[0-9][0-9a-fA-FxX.]*")
_HOST_NAME: Final = re.compile(
    r"\.?[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*"
)


class OutboundRefused(InvalidInput):
    """A URL the service will not connect to; `field` is the request field that holds it."""


_NAT64: Final = ipaddress.ip_network("64:ff9b::/96")


def _embedded_ipv4(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one carries and routes to, if any (IPv4-mapped, NAT64's
    well-known prefix, 6to4); else the address itself. 64:ff9b::a9fe:a9fe reaches
    169.254.169.254 through a NAT64 gateway, so it is judged as that."""
    if isinstance(address, ipaddress.IPv4Address):
        return address
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    return address


def _literal_address(host: str) -> IPAddress | None:
    """The address a host written as an IP literal stands for: the address to connect to.
    An IPv4-mapped IPv6 address is its IPv4 address (the same host, reached without a
    dual-stack socket); a NAT64 or 6to4 address stays as given, since it is reached through
    its gateway or relay (refusal() judges it by the IPv4 address it carries)."""
    try:
        address: IPAddress = ipaddress.ip_address(host)
    except ValueError:
        if not _NUMERIC_HOST.fullmatch(host):
            return None
        try:
            address = ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _host_of(parts: SplitResult) -> str:
    """The host in lower case, without a trailing dot or IPv6 brackets."""
    return (parts.hostname or "").rstrip(".").lower()


@dataclass(frozen=True, slots=True)
class Pinned:
    """A request aimed at one checked address: send it to `url` with these headers and
    httpx extensions, and the server still sees the original host (Host header, TLS SNI and
    certificate check)."""

    url: str
    headers: dict[str, str]
    extensions: dict[str, str] = field(default_factory=dict)


def pinned(url: str, address: str) -> Pinned:
    """`url` rewritten to connect to `address` (one that check_connect returned)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc_host = f"[{address}]" if ":" in address else address
    netloc = netloc_host if parts.port is None else f"{netloc_host}:{parts.port}"
    original = parts.netloc.rpartition("@")[2]
    extensions = {"sni_hostname": host} if parts.scheme == "https" else {}
    return Pinned(
        urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)),
        {"Host": original},
        extensions,
    )


@dataclass(frozen=True, slots=True)
class Policy:
    """The outbound policy: the defaults above plus the allowlisted networks and names."""

    allow_networks: tuple[IPNetwork, ...] = ()
    allow_names: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> Policy:
        """A policy from INFERCOST_OUTBOUND_ALLOW's entries: CIDRs or addresses, and host
        names (a leading dot, `.corp.example`, also allows every name under it)."""
        networks: list[IPNetwork] = []
        names: set[str] = set()
        for raw in entries:
            entry = raw.strip().lower()
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            if not _HOST_NAME.fullmatch(entry.rstrip(".")):
                raise ValueError(
                    f"{ALLOW_VARIABLE}: {raw!r} is neither a CIDR (10.0.0.0/8, ::1) nor a host "
                    "name (gpu-box.internal, .corp.example)"
                )
            names.add(entry.rstrip("."))
        return cls(tuple(networks), frozenset(names))

    @classmethod
    def from_settings(cls, settings: Settings) -> Policy:
        """The policy of this process (settings.outbound_allow)."""
        return cls.parse(settings.outbound_allow)

    def name_allowed(self, host: str) -> bool:
        """Whether the allowlist names `host` (exactly, or under a `.domain` entry)."""
        return host in self.allow_names or any(
            n.startswith(".") and (host.endswith(n) or host == n[1:]) for n in self.allow_names
        )

    def refusal(self, address: IPAddress, *, name_allowed: bool = False) -> str | None:
        """Why the service must not connect to `address`, or None when it may."""
        address = _embedded_ipv4(address)
        if any(address in net for net in ALWAYS_REFUSED):
            return (
                f"{address} is a link-local or cloud metadata address, which the service never "
                "connects to"
            )
        if name_allowed or any(address in net for net in self.allow_networks):
            return None
        if any(address in net for net in LOOPBACK):
            return (
                f"{address} is this machine (loopback), refused by default: an operator can "
                f"allow it with {ALLOW_VARIABLE} (e.g. 127.0.0.0/8,::1)"
            )
        if address.is_multicast or address.is_reserved:
            return f"{address} is a multicast or reserved address, not a server"
        return None

    def check_url(self, url: str, field: str) -> str:
        """`url` if the service may be told to connect to it, else OutboundRefused naming
        `field` and what to do. Checks the form and any literal address; names are checked
        again, resolved, at connection time (check_connect)."""
        example = (
            "https://portal.example.com/hooks"
            if field == "url"
            else "http://gpu-node.example:8000/v1"
        )
        if _CONTROL.search(url):
            raise OutboundRefused(
                field,
                "not an http(s) URL: it holds spaces or control characters (CR, LF, tab, NUL)",
            )
        try:
            parts = urlsplit(url)
            port = parts.port  # a port that is not a number, or out of range, raises here
        except ValueError:
            raise OutboundRefused(
                field, f"not an http(s) URL (a port is a number from 1 to 65535), e.g. {example}"
            ) from None
        if parts.scheme not in ("http", "https"):
            raise OutboundRefused(
                field, f"not an http(s) URL: give http:// or https://, e.g. {example}"
            )
        if "@" in parts.netloc:
            # Never echo the URL: the text before '@' is a credential.
            advice = (
                "remove them; receivers check the Infercost-Signature header instead"
                if field == "url"
                else "remove them and put the key in api_key, which is stored encrypted"
            )
            raise OutboundRefused(
                field,
                "credentials in a URL (user:password@) would be stored and shown in plain "
                f"text: {advice}",
            )
        host = _host_of(parts)
        if not host:
            raise OutboundRefused(field, f"not an http(s) URL: it names no host, e.g. {example}")
        if port == 0:
            raise OutboundRefused(field, "port 0 is not a port a server listens on (1 to 65535)")
        if ":" not in host:
            try:
                host.encode("idna")
            except UnicodeError:
                raise OutboundRefused(
                    field, f"not an http(s) URL: '{host}' is not a valid host name"
                ) from None
        self._check_host(host, field)
        return url

    def _check_host(self, host: str, field: str) -> None:
        """Refuse a host that is, by its very name or address, out of bounds."""
        if host in METADATA_HOSTS:
            raise OutboundRefused(
                field, f"{host} is a cloud metadata service, which the service never connects to"
            )
        address = _literal_address(host)
        if address is not None:
            why = self.refusal(address)
            if why is not None:
                raise OutboundRefused(field, why)
            return
        if (host == "localhost" or host.endswith(".localhost")) and not self.name_allowed(host):
            # Refused here when no loopback address is allowed; otherwise each address the
            # name resolves to is checked at connection time.
            loopback = [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]
            if all(self.refusal(a) for a in loopback):
                raise OutboundRefused(
                    field,
                    f"{host} is this machine (loopback), refused by default: an operator can "
                    f"allow it with {ALLOW_VARIABLE} (e.g. 127.0.0.0/8,::1)",
                )

    async def check_connect(self, url: str, field: str = "url") -> list[str]:
        """The addresses to connect to for `url`, each checked (OutboundRefused when any is
        refused); connect to these, not to the name again (see `pinned`). A name that does
        not resolve raises socket.gaierror, like a failed connection. An address that carries
        an IPv4 address (NAT64's 64:ff9b::/96, 6to4's 2002::/16) is checked as that IPv4
        address but returned as given: the service connects where it was told, through the
        gateway, never straight to the IPv4 address (which may be another host here)."""
        self.check_url(url, field)
        parts = urlsplit(url)
        host = _host_of(parts)
        literal = _literal_address(host)
        if literal is not None:
            return [str(literal)]
        port = parts.port or (443 if parts.scheme == "https" else 80)
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )
        name_allowed = self.name_allowed(host)
        addresses: list[str] = []
        for info in infos:
            address = ipaddress.ip_address(str(info[4][0]).partition("%")[0])
            why = self.refusal(address, name_allowed=name_allowed)
            if why is not None:
                raise OutboundRefused(field, f"{host} resolves to {why}")
            text = str(address)
            if text not in addresses:
                addresses.append(text)
        return addresses


def redact(url: str) -> str:
    """`url` without any `user:password@` part, for URLs stored before credentials were
    refused: what a response or a log line may show."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
