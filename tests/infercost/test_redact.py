"""The redaction step (infercost/net/redact.py): each planted form of a key, written out by
hand here, is masked; text without the key is left as it was."""

from __future__ import annotations

import base64
import logging
from urllib.parse import quote

import pytest

from infercost.engines.diagnosis import http_diagnosis, server_message
from infercost.net.redact import MASK, LogRedaction, Redactor

KEY = "sk-live-4f9Qz/7Tb+Kp2Vw8Xr1Ym3"


def _forms() -> dict[str, str]:
    basic = base64.b64encode(f"alice:{KEY}".encode()).decode()
    return {
        "raw": f"key {KEY} was sent",
        "bearer": f"Authorization: Bearer {KEY}",
        "url-encoded": f"GET /v1/models?api_key={quote(KEY, safe='')}",
        "url-encoded lower": f"api_key={quote(KEY, safe='').lower()}",
        "json-escaped": '{"seen": "' + KEY.replace("/", "\\/") + '"}',
        "base64": f"token {base64.b64encode(KEY.encode()).decode()}",
        "basic": f"Authorization: Basic {basic}",
        "basic without scheme": f"credentials={basic};",
        "urlsafe base64": base64.urlsafe_b64encode(KEY.encode()).decode().rstrip("="),
        "hex": KEY.encode().hex(),
        "cut with an ellipsis": f"(HTTP 401: the key {KEY[:14]}\u2026): set the api_key",
        "cut at the end": f"the server said: Bearer-less {KEY[:11]}",
    }


@pytest.mark.parametrize("form", list(_forms()))
def test_every_form_of_the_key_is_masked(form: str) -> None:
    text = _forms()[form]
    out = Redactor([KEY]).text(text)
    assert KEY not in out
    assert KEY[:10] not in out
    assert MASK in out
    for encoded in (quote(KEY, safe=""), base64.b64encode(KEY.encode()).decode()[:20]):
        assert encoded not in out


def test_text_without_secrets_is_unchanged() -> None:
    text = "the server refused the credentials (HTTP 401: invalid api key): set the api_key"
    assert Redactor([KEY]).text(text) == text
    assert Redactor([KEY]).data({"a": [text, 3, None]}) == {"a": [text, 3, None]}


def test_any_bearer_credential_is_masked_even_unknown() -> None:
    out = Redactor().text("upstream saw Authorization: Bearer abcdef123456 and Basic Zm9vOmJhcg==")
    assert out == f"upstream saw Authorization: Bearer {MASK} and Basic {MASK}"


def test_prose_about_credentials_is_left_alone() -> None:
    text = "send bearer tokens from the issuer; basic authentication is refused"
    assert Redactor().text(text) == text


def test_short_keys_do_not_garble_text() -> None:
    assert Redactor(["ab"]).text("a cab abstains") == "a cab abstains"


def test_an_openai_error_is_quoted_and_a_page_described() -> None:
    openai = b'{"error": {"message": "Incorrect API key provided", "type": "invalid_request"}}'
    assert server_message(openai) == "Incorrect API key provided"
    page = b"<!DOCTYPE html><html><body>internal admin console, db=10.1.2.3</body></html>"
    said = server_message(page, content_type="text/html; charset=utf-8")
    assert said == f"an HTML page of {len(page)} bytes, not quoted"
    assert "admin" not in http_diagnosis(502, page, content_type="text/html").reason
    text = b"secret internal stack trace " * 100
    assert (
        server_message(text, content_type="text/plain") == "a text/plain body of 2.7 kB, not quoted"
    )


def test_a_long_openai_message_is_capped() -> None:
    said = server_message(b'{"error": {"message": "' + b"x" * 5000 + b'"}}')
    assert len(said) == 200
    assert said.endswith("\u2026")


def test_a_refused_field_is_still_named_from_a_plain_text_refusal() -> None:
    body = b"Failed to deserialize the JSON body into the target type: unknown field `ignore_eos`"
    reason = http_diagnosis(422, body, content_type="text/plain").reason
    assert "'ignore_eos'" in reason
    assert "Failed to deserialize" not in reason


def test_log_records_lose_credentials(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("infercost.test.redact")
    caplog.handler.addFilter(LogRedaction())
    with caplog.at_level(logging.INFO, logger="infercost.test.redact"):
        logger.info("upstream said %s", f"Authorization: Bearer {KEY}")
        try:
            raise RuntimeError(f"echoed Basic {base64.b64encode(KEY.encode()).decode()}")
        except RuntimeError:
            logger.exception("failed")
    assert KEY not in caplog.text
    assert base64.b64encode(KEY.encode()).decode()[:16] not in caplog.text
    assert f"Bearer {MASK}" in caplog.text and f"Basic {MASK}" in caplog.text
