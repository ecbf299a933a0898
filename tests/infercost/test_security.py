"""API keys (keyed hashes with readable prefixes) and credential encryption at rest."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from infercost.security import Vault, key_prefix, mint_api_key, same_token, verify_api_key

OLD = "old-server-secret"
NEW = "new-server-secret"


def test_minted_key_verifies_with_its_secret_only() -> None:
    key = mint_api_key([OLD])
    assert key.token.startswith(f"ic_{key.prefix}_")
    assert verify_api_key([OLD], key.token, key.digest)
    assert not verify_api_key([NEW], key.token, key.digest)
    # the digest belongs to this token: another token, or a changed one, does not verify
    other = mint_api_key([OLD])
    assert not verify_api_key([OLD], other.token, key.digest)
    changed = key.token[:-1] + ("A" if key.token[-1] != "A" else "B")
    assert not verify_api_key([OLD], changed, key.digest)


def test_key_still_verifies_after_rotation_while_old_secret_is_listed() -> None:
    key = mint_api_key([OLD])
    # rotation: the new secret first (it hashes new keys), the old one kept second
    assert verify_api_key([NEW, OLD], key.token, key.digest)
    # once the old secret is dropped the old key stops working
    assert not verify_api_key([NEW], key.token, key.digest)
    # a key minted after rotation is hashed with the new secret
    fresh = mint_api_key([NEW, OLD])
    assert verify_api_key([NEW], fresh.token, fresh.digest)
    assert not verify_api_key([OLD], fresh.token, fresh.digest)


def test_minting_without_secrets_says_what_to_set() -> None:
    with pytest.raises(RuntimeError, match="INFERCOST_SECRET_KEYS"):
        mint_api_key([])


def test_key_prefix_of_minted_keys() -> None:
    # many keys, so some secrets contain '_' and '-' (token_urlsafe) and still parse
    keys = [mint_api_key([OLD]) for _ in range(200)]
    assert any("_" in k.token.split("_", 2)[2] for k in keys)
    for key in keys:
        assert key_prefix(key.token) == key.prefix
        assert len(key.prefix) == 12
    assert len({k.prefix for k in keys}) == 200


@pytest.mark.parametrize(
    "token",
    [
        "",
        "ic",
        "ic_0123456789ab",  # no secret part
        "sk_0123456789ab_secret",  # another scheme
        "IC_0123456789ab_secret",
        "ic_0123456789a_secret",  # prefix one short
        "ic_0123456789abc_secret",  # prefix one long
        "Bearer ic_0123456789ab_secret",
    ],
)
def test_key_prefix_rejects_malformed_keys(token: str) -> None:
    assert key_prefix(token) is None


def test_same_token() -> None:
    assert same_token("admin-token", "admin-token")
    assert not same_token("admin-token", "admin-tokem")
    assert not same_token("admin-token", None)


def test_vault_round_trip() -> None:
    vault = Vault([Fernet.generate_key().decode()])
    ciphertext = vault.encrypt("sk-live-123")
    assert b"sk-live-123" not in ciphertext
    assert vault.decrypt(ciphertext) == "sk-live-123"


def test_vault_decrypts_after_rotation_with_old_key_listed() -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    stored = Vault([old]).encrypt("sk-live-123")
    assert Vault([new, old]).decrypt(stored) == "sk-live-123"


def test_vault_with_the_wrong_key_raises_a_clear_error() -> None:
    stored = Vault([Fernet.generate_key().decode()]).encrypt("sk-live-123")
    wrong = Vault([Fernet.generate_key().decode()])
    with pytest.raises(RuntimeError, match="cannot be decrypted") as info:
        wrong.decrypt(stored)
    message = str(info.value)
    assert "INFERCOST_SECRET_KEYS" in message
    assert "keep the old key" in message
    # the error never shows the secret or the ciphertext
    assert "sk-live-123" not in message
    assert stored.decode() not in message


def test_vault_without_keys_says_what_to_set() -> None:
    with pytest.raises(RuntimeError, match="INFERCOST_SECRET_KEYS"):
        Vault([])


def test_redis_client_url_speaks_redis_py() -> None:
    """`infercost up` sets Celery's socket URL; the API's own Redis client needs unix://."""
    from infercost.settings import Settings

    embedded = Settings(redis_url="redis+socket:///tmp/x/redis.sock")
    assert embedded.redis_client_url == "unix:///tmp/x/redis.sock"
    assert Settings(redis_url="redis://h:6379/0").redis_client_url == "redis://h:6379/0"
    assert Settings().redis_client_url is None
