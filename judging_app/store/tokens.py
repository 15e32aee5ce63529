"""Judge tokens: shown once, stored as a salted scrypt hash, compared in constant time.

A token reads ``<token_id>.<secret>``: the public ``token_id`` finds the judge's row, the
``secret`` (``secrets.token_urlsafe(32)``) is checked against ``scrypt(secret, salt)``. The
database never holds a token.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

SCRYPT = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}
TOKEN_PATTERN = re.compile(r"^([A-Za-z0-9]{12})\.([A-Za-z0-9_-]{20,100})$")


@dataclass(frozen=True)
class NewToken:
    token: str  # give to the judge; never stored
    token_id: str
    salt: str  # hex
    digest: str  # hex


def hash_secret(secret: str, salt_hex: str) -> str:
    return hashlib.scrypt(secret.encode("utf-8"), salt=bytes.fromhex(salt_hex), **SCRYPT).hex()


def new_token() -> NewToken:
    token_id = secrets.token_hex(6)  # 12 characters
    secret = secrets.token_urlsafe(32)
    salt = secrets.token_hex(16)
    return NewToken(f"{token_id}.{secret}", token_id, salt, hash_secret(secret, salt))


def split_token(token: str) -> tuple[str, str] | None:
    """``(token_id, secret)``, or None when ``token`` is not shaped like a token."""
    match = TOKEN_PATTERN.match(token.strip()) if isinstance(token, str) else None
    return (match.group(1), match.group(2)) if match else None


def verify(secret: str, salt_hex: str, digest_hex: str) -> bool:
    return hmac.compare_digest(hash_secret(secret, salt_hex), digest_hex)
