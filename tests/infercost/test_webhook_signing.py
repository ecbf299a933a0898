"""Webhook signatures: what a receiver checks verifies, and anything altered does not."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from infercost.webhooks.delivery import backoff_s, encode
from infercost.webhooks.signing import SECRET_PREFIX, new_secret, sign, verify

SECRET = "whsec_test-secret"
BODY = encode({"id": "d1", "event": "job.finished", "data": {"job": {"status": "succeeded"}}})
NOW = 1_800_000_000


def test_signature_is_the_documented_hmac() -> None:
    header = sign(SECRET, BODY, timestamp=NOW)
    expected = hmac.new(SECRET.encode(), f"{NOW}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert header == f"t={NOW},v1={expected}"


def test_good_signature_verifies() -> None:
    header = sign(SECRET, BODY, timestamp=NOW)
    assert verify(SECRET, header, BODY, now=NOW)
    assert verify(SECRET, header, BODY, now=NOW + 299)
    # Signed now by default, so a fresh signature verifies against the real clock.
    assert verify(SECRET, sign(SECRET, BODY), BODY)


def test_tampered_body_fails() -> None:
    header = sign(SECRET, BODY, timestamp=NOW)
    payload = json.loads(BODY)
    payload["data"]["job"]["status"] = "failed"
    assert not verify(SECRET, header, encode(payload), now=NOW)
    assert not verify(SECRET, header, BODY + b" ", now=NOW)


def test_wrong_secret_fails() -> None:
    header = sign(SECRET, BODY, timestamp=NOW)
    assert not verify("whsec_another", header, BODY, now=NOW)


def test_stale_or_future_timestamp_fails() -> None:
    header = sign(SECRET, BODY, timestamp=NOW)
    assert not verify(SECRET, header, BODY, now=NOW + 301)
    assert not verify(SECRET, header, BODY, now=NOW - 301)
    assert verify(SECRET, header, BODY, tolerance_s=600, now=NOW + 500)


def test_changed_timestamp_fails() -> None:
    # The timestamp is signed too: moving it forward to look fresh breaks the signature.
    digest = sign(SECRET, BODY, timestamp=NOW).split("v1=")[1]
    assert not verify(SECRET, f"t={NOW + 100},v1={digest}", BODY, now=NOW + 100)


@pytest.mark.parametrize(
    "header",
    ["", "garbage", f"t={NOW}", "v1=abc", "t=soon,v1=abc", f"t={NOW},v1=", f"t={NOW},v1=é"],
)
def test_malformed_header_fails(header: str) -> None:
    assert not verify(SECRET, header, BODY, now=NOW)


def test_any_listed_signature_may_match() -> None:
    good = sign(SECRET, BODY, timestamp=NOW).split("v1=")[1]
    assert verify(SECRET, f"t={NOW},v1={'0' * 64},v1={good}", BODY, now=NOW)


def test_new_secrets_are_random_and_prefixed() -> None:
    first, second = new_secret(), new_secret()
    assert first.startswith(SECRET_PREFIX) and second.startswith(SECRET_PREFIX)
    assert first != second and len(first) >= len(SECRET_PREFIX) + 43


def test_backoff_doubles_until_the_last_attempt() -> None:
    assert [backoff_s(n, 10.0, 6) for n in range(1, 7)] == [10.0, 20.0, 40.0, 80.0, 160.0, None]
    assert backoff_s(1, 1.0, 1) is None


def test_encoding_is_stable() -> None:
    # Retries send the same bytes whatever order the stored payload's keys come back in.
    assert encode({"b": 1, "a": [1, 2]}) == encode({"a": [1, 2], "b": 1}) == b'{"a":[1,2],"b":1}'
