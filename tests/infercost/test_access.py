"""Share tokens, session tokens, page links and the settings they read: pure functions held
against what a reader of the docs expects."""

from __future__ import annotations

import uuid

import pytest
from cryptography.fernet import Fernet

from infercost.access.oidc import looks_like_jwt, team_names
from infercost.access.tokens import (
    new_session_token,
    session_csrf,
    session_hash,
    share_hint,
    share_id_of,
    share_token,
    valid_session_csrf,
)
from infercost.reports.links import PageLinks
from infercost.settings import Settings

OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()


def test_a_share_token_names_its_share_and_survives_rotation_only_while_its_key_is_listed() -> None:
    share = uuid.uuid4()
    token = share_token([OLD], share)
    assert token.startswith(f"ics_{share.hex}_") and len(token) == 4 + 32 + 1 + 43
    assert share_id_of([OLD], token) == share
    # Rotated: the new key signs, the old one still verifies while listed.
    assert share_id_of([NEW, OLD], token) == share
    assert share_token([NEW, OLD], share) != token
    # Dropped: every link signed with it stops working.
    assert share_id_of([NEW], token) is None
    # Another share's id with this signature, a changed signature, a truncated token.
    other = f"ics_{uuid.uuid4().hex}_{token.rsplit('_', 1)[1]}"
    assert share_id_of([OLD], other) is None
    flipped = token[:-1] + ("A" if token[-1] != "A" else "B")
    assert share_id_of([OLD], flipped) is None
    assert share_id_of([OLD], token[:-1]) is None
    assert share_id_of([OLD], "ic_123456789012_key") is None
    assert share_hint(share) == f"ics_{share.hex[:8]}\u2026" and share_hint(share) not in token[12:]


def test_session_tokens_are_random_and_stored_as_a_hash() -> None:
    first, digest = new_session_token()
    second, _ = new_session_token()
    assert first != second and first.startswith("icb_") and len(first) > 40
    assert digest == session_hash(first) and len(digest) == 32 and first.encode() not in digest


def test_the_sign_out_token_is_bound_to_its_session() -> None:
    session, other = uuid.uuid4(), uuid.uuid4()
    token = session_csrf([OLD], session)
    assert valid_session_csrf([NEW, OLD], session, token)
    assert not valid_session_csrf([OLD], other, token)
    assert not valid_session_csrf([OLD], session, "")


def test_links_keep_a_share_only_where_it_covers_the_target() -> None:
    base = "https://infercost.example.com"
    job, other = uuid.uuid4(), uuid.uuid4()
    plain = PageLinks(base=base)
    assert plain.report(job) == f"{base}/v1/jobs/{job}/report"
    assert plain.board({"window": "7d"}) == f"{base}/v1/status/page?window=7d"
    assert plain.figures == f"{base}/docs/figures.md"

    board = PageLinks(base=base, share_path="/shared/ics_x", share_kind="status")
    assert board.board({"sort": "-runs"}) == f"{base}/shared/ics_x?sort=-runs"
    assert board.report(job) == f"{base}/signin?next=%2Fv1%2Fjobs%2F{job}%2Freport"

    report = PageLinks(base=base, share_path="/shared/ics_y", share_kind="report",
                       share_jobs=(str(job),))  # fmt: skip
    assert report.report(job) == f"{base}/shared/ics_y"
    assert report.report(other).startswith(f"{base}/signin?next=")
    assert report.board({}).startswith(f"{base}/signin?next=%2Fv1%2Fstatus%2Fpage")


def test_frame_ancestors_and_the_other_page_settings() -> None:
    settings = Settings.from_env(
        {
            "INFERCOST_FRAME_ANCESTORS": "https://portal.example.com, https://*.corp.example/",
            "INFERCOST_PUBLIC_URL": "https://infercost.example.com/",
            "INFERCOST_SESSION_COOKIE_SECURE": "0",
            "INFERCOST_OIDC_ISSUER": "https://login.example.com/realms/x/",
            "INFERCOST_OIDC_AUDIENCE": "infercost",
        }
    )
    assert settings.frame_ancestors == ("https://portal.example.com", "https://*.corp.example")
    assert settings.public_url == "https://infercost.example.com"
    assert settings.session_cookie_secure is False
    assert settings.oidc_issuer == "https://login.example.com/realms/x"
    assert settings.oidc_team_claim == "infercost_team"
    defaults = Settings.from_env({})
    assert defaults.frame_ancestors == () and defaults.session_cookie_secure is True
    assert defaults.oidc_issuer is None and defaults.share_default_ttl_s == 7 * 86400


@pytest.mark.parametrize(
    "value", ["*", "portal.example.com", "https://portal.example.com/path", "'self'", "https://*"]
)
def test_a_frame_ancestor_that_is_not_an_origin_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="INFERCOST_FRAME_ANCESTORS"):
        Settings.from_env({"INFERCOST_FRAME_ANCESTORS": value})


def test_tokens_and_team_claims() -> None:
    assert looks_like_jwt("eyJh.eyJz.c2ln")
    assert not looks_like_jwt("ic_123456789012_abc") and not looks_like_jwt("a..b")
    assert team_names({"t": "ml"}, "t") == ["ml"]
    assert team_names({"t": ["ml", 3, "infra"]}, "t") == ["ml", "infra"]
    assert team_names({"t": 3}, "t") == [] and team_names({}, "t") == []
