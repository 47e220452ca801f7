"""Symmetric encryption for secrets at rest (the org's Semrush credential).

The key is derived from FIELD_ENCRYPTION_KEY (any non-empty string), so every process given the
same value reads the same secrets. Fernet is authenticated: a tampered value fails to decrypt.
"""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


@lru_cache(maxsize=4)
def _fernet(secret: str) -> Fernet:
    digest = hashlib.sha256(("serenity-field-encryption:" + secret).encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def encrypt_secret(plaintext: str) -> str:
    return _fernet(settings.FIELD_ENCRYPTION_KEY).encrypt(plaintext.encode()).decode()


def decrypt_secret(ciphertext: str) -> str:
    """Raises `ValueError` when the value was not encrypted with the configured key."""
    try:
        return _fernet(settings.FIELD_ENCRYPTION_KEY).decrypt(ciphertext.encode()).decode()
    except InvalidToken as exc:
        raise ValueError("secret cannot be decrypted with FIELD_ENCRYPTION_KEY") from exc
