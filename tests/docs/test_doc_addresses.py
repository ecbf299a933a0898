"""Examples name documentation addresses (RFC 5737's 192.0.2.0/24, 198.51.100.0/24,
203.0.113.0/24, or names under .example), never a routable private address: a fuzzer run
against a server on the default outbound policy registers the OpenAPI examples, and the
endpoint check then connects to them. Searched: every docs page, the README and the OpenAPI
document as recorded (tests/api/test_openapi.py holds it equal to the app's)."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Dotted quads not followed by a prefix length (an allowlist's CIDR names no host).
_ADDRESS = re.compile(r"(?<![\d.])(\d{1,3}(?:\.\d{1,3}){3})(?![\d.]|/\d)")
#: Ranges an example must not point at: the private networks (a cloud's metadata address,
#: named in the docs as refused, lies outside them).
_PRIVATE = [ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")]


def private_addresses(text: str) -> list[str]:
    """The private addresses `text` names."""
    found = []
    for match in _ADDRESS.finditer(text):
        try:
            address = ipaddress.ip_address(match.group(1))
        except ValueError:
            continue
        if any(address in net for net in _PRIVATE):
            found.append(match.group(1))
    return found


def test_the_search_finds_what_it_should() -> None:
    assert private_addresses('"base_url": "http://10.0.0.5:8000/v1"') == ["10.0.0.5"]
    assert private_addresses("http://192.168.1.20/v1 and 172.20.0.3") == [
        "192.168.1.20",
        "172.20.0.3",
    ]
    assert private_addresses("http://192.0.2.10:8000/v1, allow 10.0.0.0/8, 127.0.0.1") == []


def test_docs_and_openapi_examples_use_documentation_addresses() -> None:
    pages = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
    pages.append(ROOT / "tests" / "api" / "snapshots" / "openapi.json")
    found = {
        str(page.relative_to(ROOT)): hits
        for page in pages
        if (hits := private_addresses(page.read_text(encoding="utf-8")))
    }
    assert found == {}
