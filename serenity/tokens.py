"""API token minting and digests."""

from __future__ import annotations

import hashlib
import secrets

TOKEN_PREFIX = "srn_"


def generate_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()
