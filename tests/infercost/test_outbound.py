"""The outbound policy: what a URL may name at registration, and the addresses a connection
may reach, with and without INFERCOST_OUTBOUND_ALLOW."""

from __future__ import annotations

from typing import Any

import pytest

from infercost.net.outbound import OutboundRefused, Policy, pinned, redact
from infercost.settings import Settings

DEFAULT = Policy.parse([])
LOOPBACK_ALLOWED = Policy.parse(["127.0.0.0/8", "::1"])


def refused(policy: Policy, url: str, field: str = "base_url") -> str:
    with pytest.raises(OutboundRefused) as caught:
        policy.check_url(url, field)
    assert caught.value.status_code == 422
    assert caught.value.detail.startswith(f"{field}: ")
    return caught.value.detail


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://169.254.0.1:8000/v1",
        "http://[fe80::1]/v1",
        "http://[fd00:ec2::254]/latest",
        "http://100.100.100.200/latest/meta-data",
        "http://[::ffff:169.254.169.254]/",  # IPv4-mapped IPv6
        "http://[64:ff9b::a9fe:a9fe]/",  # through a NAT64 gateway
        "http://[2002:a9fe:a9fe::1]/",  # 6to4
        "http://2852039166/",  # 169.254.169.254 as one decimal number
        "http://0xA9FEA9FE/",  # ... in hex
        "http://0251.0376.0251.0376/",  # ... in octal
    ],
)
def test_link_local_and_metadata_addresses_are_refused_even_when_allowlisted(url: str) -> None:
    everything = Policy.parse(["0.0.0.0/0", "::/0", "169.254.0.0/16"])
    for policy in (DEFAULT, everything):
        assert "link-local or cloud metadata" in refused(policy, url)


@pytest.mark.parametrize("host", ["metadata.google.internal", "METADATA.google.internal."])
def test_metadata_host_names_are_refused_even_when_allowlisted(host: str) -> None:
    policy = Policy.parse(["metadata.google.internal"])
    assert "cloud metadata service" in refused(policy, f"http://{host}/computeMetadata/v1/")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/v1",
        "http://127.1.2.3/v1",
        "http://[::1]:8000/v1",
        "http://0.0.0.0:8000/v1",
        "http://localhost:8000/v1",
        "http://api.localhost/v1",
    ],
)
def test_loopback_is_refused_by_default_and_allowed_by_the_allowlist(url: str) -> None:
    detail = refused(DEFAULT, url)
    assert "loopback" in detail and "INFERCOST_OUTBOUND_ALLOW" in detail
    allowed = Policy.parse(["127.0.0.0/8", "::1", "0.0.0.0/8", "localhost", ".localhost"])
    assert allowed.check_url(url, "base_url") == url


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.5:8000/v1",
        "http://172.16.3.4/v1",
        "http://192.168.1.20:8080/v1",
        "http://[fd12:3456::1]:8000/v1",
        "https://api.openai.com/v1",
        "http://8.8.8.8/v1",
        "http://vllm.internal:8000/v1",
    ],
)
def test_private_and_public_addresses_are_allowed_by_default(url: str) -> None:
    assert DEFAULT.check_url(url, "base_url") == url


def test_credentials_in_the_url_are_refused_without_echoing_them() -> None:
    detail = refused(DEFAULT, "http://admin:hunter2@10.0.0.5:8000/v1")
    assert "api_key" in detail
    assert "hunter2" not in detail and "admin" not in detail
    webhook = refused(DEFAULT, "https://bob:s3cret@portal.example.com/hooks", field="url")
    assert "Infercost-Signature" in webhook and "s3cret" not in webhook


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.5/v1\r\nX-Injected: 1",
        "http://10.0.0.5/v1\n",
        "http://10.0.0.5/\x00",
        "http://10.0.0.5/a b",
    ],
)
def test_control_characters_are_refused(url: str) -> None:
    assert "control characters" in refused(DEFAULT, url)


@pytest.mark.parametrize(
    ("url", "hint"),
    [
        ("ftp://10.0.0.5/v1", "http:// or https://"),
        ("file:///etc/passwd", "http:// or https://"),
        ("http:///v1", "no host"),
        ("http://10.0.0.5:0/v1", "port 0"),
        ("http://10.0.0.5:70000/v1", "1 to 65535"),
        ("http://10.0.0.5:http/v1", "1 to 65535"),
    ],
)
def test_malformed_urls_are_refused_with_the_rule(url: str, hint: str) -> None:
    assert hint in refused(DEFAULT, url)


async def test_check_connect_resolves_and_checks_every_address() -> None:
    # With only ::1 allowed the name passes registration, but localhost also resolves to
    # 127.0.0.1 (on every system), which is refused when the connection is made.
    only_v6 = Policy.parse(["::1"])
    assert only_v6.check_url("http://localhost:8/v1", "url") == "http://localhost:8/v1"
    with pytest.raises(OutboundRefused, match=r"localhost resolves to 127\.0\.0\.1 is this"):
        await only_v6.check_connect("http://localhost:8/v1")
    addresses = await Policy.parse(["127.0.0.0/8", "::1"]).check_connect("http://localhost:8/v1")
    assert addresses and set(addresses) <= {"127.0.0.1", "::1"}
    # An allowlisted name reaches what it resolves to, loopback included.
    by_name = await Policy.parse(["localhost"]).check_connect("http://localhost:8/v1")
    assert set(by_name) == set(addresses)
    # A literal is checked without resolving.
    assert await DEFAULT.check_connect("http://10.1.2.3:8000/v1") == ["10.1.2.3"]
    with pytest.raises(OutboundRefused, match="metadata"):
        await LOOPBACK_ALLOWED.check_connect("http://169.254.169.254/")


@pytest.mark.parametrize(
    "url",
    [
        "http://[64:ff9b::a9fe:a9fe]/",  # NAT64 to 169.254.169.254
        "http://[64:ff9b::7f00:1]:8000/v1",  # NAT64 to 127.0.0.1
        "http://[2002:a9fe:a9fe::1]/",  # 6to4 from 169.254.169.254
        "http://[2002:7f00:1::1]:8000/v1",  # 6to4 from 127.0.0.1
    ],
)
async def test_check_connect_judges_nat64_and_6to4_by_the_ipv4_they_carry(url: str) -> None:
    with pytest.raises(OutboundRefused):
        await DEFAULT.check_connect(url, "base_url")


async def test_check_connect_returns_nat64_and_6to4_addresses_as_given() -> None:
    # The IPv4 address inside is what is judged; the connection still goes where the user
    # said, through the NAT64 gateway or 6to4 relay, not straight to 10.0.0.5 (which, from
    # the service's own network, may be another host entirely).
    assert await DEFAULT.check_connect("http://[64:ff9b::a00:5]:8000/v1") == ["64:ff9b::a00:5"]
    assert await DEFAULT.check_connect("http://[2002:a00:5::1]/v1") == ["2002:a00:5::1"]
    assert pinned("http://[64:ff9b::a00:5]:8000/v1", "64:ff9b::a00:5").url == (
        "http://[64:ff9b::a00:5]:8000/v1"
    )
    # An IPv4-mapped address is the IPv4 host itself, reached as IPv4.
    assert await DEFAULT.check_connect("http://[::ffff:10.0.0.5]/v1") == ["10.0.0.5"]
    # Numeric forms of IPv4 are connected to as the address they stand for.
    assert await DEFAULT.check_connect("http://167772165/v1") == ["10.0.0.5"]


def test_an_allowlisted_name_never_reaches_metadata_addresses() -> None:
    import ipaddress

    policy = Policy.parse(["portal.corp"])
    metadata = ipaddress.ip_address("169.254.169.254")
    assert policy.refusal(metadata, name_allowed=True) is not None
    assert policy.refusal(ipaddress.ip_address("127.0.0.1"), name_allowed=True) is None


def test_domain_entries_allow_names_under_them() -> None:
    policy = Policy.parse([".corp.example"])
    assert policy.name_allowed("portal.corp.example")
    assert policy.name_allowed("corp.example")
    assert not policy.name_allowed("corp.example.evil.com")
    assert not policy.name_allowed("evilcorp.example")


def test_the_allowlist_is_read_from_settings_and_checked() -> None:
    settings = Settings.from_env({"INFERCOST_OUTBOUND_ALLOW": " 127.0.0.0/8 , ::1,gpu-box.lan "})
    policy = Policy.from_settings(settings)
    assert policy.check_url("http://127.0.0.1:9/v1", "base_url") == "http://127.0.0.1:9/v1"
    assert policy.name_allowed("gpu-box.lan")
    with pytest.raises(ValueError, match="INFERCOST_OUTBOUND_ALLOW: 'not a host!'"):
        Policy.parse(["not a host!"])


def test_pinned_requests_keep_the_original_host() -> None:
    https = pinned("https://portal.example.com:8443/hooks?x=1", "203.0.113.7")
    assert https.url == "https://203.0.113.7:8443/hooks?x=1"
    assert https.headers == {"Host": "portal.example.com:8443"}
    assert https.extensions == {"sni_hostname": "portal.example.com"}
    v6 = pinned("http://gpu-box.lan/v1", "fd12::5")
    assert v6.url == "http://[fd12::5]/v1"
    assert v6.headers == {"Host": "gpu-box.lan"}
    assert v6.extensions == {}


def test_redact_drops_stored_credentials() -> None:
    assert redact("http://u:p@10.0.0.5:8000/v1") == "http://10.0.0.5:8000/v1"
    assert redact("http://10.0.0.5:8000/v1") == "http://10.0.0.5:8000/v1"


async def test_the_webhook_courier_posts_only_to_checked_addresses() -> None:
    """A receiver on loopback: refused under the default policy (nothing reaches it), and
    reached through its checked address, with its own Host header, once allowed."""
    import httpx

    from infercost.webhooks.delivery import post
    from tests.asgi import read_body, send_json, serve_in_loop

    seen: list[dict[str, str]] = []

    async def receiver(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await read_body(receive)
        seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await send_json(send, 204, b"")

    async with serve_in_loop(receiver) as url, httpx.AsyncClient() as client:
        port = url.rpartition(":")[2]
        hook = f"http://localhost:{port}/hooks"
        payload = {"id": "d1", "event": "ping"}
        code, error = await post(client, hook, "secret", "ping", payload, policy=DEFAULT)
        assert code is None and error is not None
        assert error.startswith("refused by the outbound policy: url: localhost is this machine")
        assert seen == []
        allowed = Policy.parse(["localhost"])
        code, error = await post(client, hook, "secret", "ping", payload, policy=allowed)
        assert (code, error) == (204, None)
        assert len(seen) == 1 and seen[0]["host"] == f"localhost:{port}"
