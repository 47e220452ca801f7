"""Symmetric encryption for secrets at rest (org Semrush credentials, webhook signing secrets).

Keys come from FIELD_ENCRYPTION_KEYS (settings; comma-separated passphrases): the first one
encrypts, every one decrypts, so a key is rotated by putting the new one first, running
`manage.py rotate_credentials`, then dropping the old one. Each passphrase becomes a Fernet key
through HKDF-SHA256 (a real key-derivation function; the passphrase is expected to be a long
random value, like SECRET_KEY, not a word a person chose). Fernet is authenticated: a tampered
value fails to decrypt.

Values written before key rotation existed were encrypted with a key derived by one SHA-256 of
the passphrase. Each passphrase's legacy key still decrypts (never encrypts), so existing rows
keep working; `rotate_credentials` re-encrypts them with the current derivation.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.db.models import QuerySet

# Fixed, public derivation parameters: changing either changes every key.
_HKDF_SALT = b"serenity-field-encryption"
_HKDF_INFO = b"fernet-key-v2"


def derive_fernet_key(passphrase: str) -> bytes:
    """The Fernet key (url-safe base64 of 32 bytes) for one passphrase."""
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=_HKDF_SALT, info=_HKDF_INFO)
    return base64.urlsafe_b64encode(hkdf.derive(passphrase.encode()))


def legacy_fernet_key(passphrase: str) -> bytes:
    """The derivation used before rotation existed; kept to decrypt older rows only."""
    digest = hashlib.sha256(("serenity-field-encryption:" + passphrase).encode()).digest()
    return base64.urlsafe_b64encode(digest)


@lru_cache(maxsize=4)
def _keyring(passphrases: tuple[str, ...]) -> MultiFernet:
    # MultiFernet encrypts with the first key and tries each in order to decrypt: the current
    # derivations of every passphrase first, the legacy ones after.
    current = [Fernet(derive_fernet_key(p)) for p in passphrases]
    legacy = [Fernet(legacy_fernet_key(p)) for p in passphrases]
    return MultiFernet([*current, *legacy])


def _configured_keyring() -> MultiFernet:
    passphrases: Sequence[str] = settings.FIELD_ENCRYPTION_KEYS
    return _keyring(tuple(passphrases))


def encrypt_secret(plaintext: str) -> str:
    return _configured_keyring().encrypt(plaintext.encode()).decode()


def decrypt_secret(ciphertext: str) -> str:
    """Raises `ValueError` when no configured key decrypts the value."""
    try:
        return _configured_keyring().decrypt(ciphertext.encode()).decode()
    except InvalidToken as exc:
        raise ValueError("secret cannot be decrypted with FIELD_ENCRYPTION_KEYS") from exc


def reencrypt_secret(ciphertext: str) -> str:
    """The same secret encrypted with the first key (and the current derivation).
    Raises `ValueError` when no configured key decrypts it."""
    try:
        return _configured_keyring().rotate(ciphertext.encode()).decode()
    except InvalidToken as exc:
        raise ValueError("secret cannot be decrypted with FIELD_ENCRYPTION_KEYS") from exc


@dataclass(frozen=True)
class Reencryption:
    """What `column_reencrypt` did: the values it re-encrypted, and the rows whose value no
    configured key decrypts (left as they are)."""

    rotated: int
    undecryptable: list[str] = field(default_factory=list)


def column_reencrypt(rows: QuerySet, column: str) -> Reencryption:
    """Re-encrypt `column` of every row of `rows` (empty values skipped) with the first key.

    Idempotent. Each row is written with a conditional update on the ciphertext it read, so a
    value changed meanwhile (encrypted with the first key already) is left alone. No plaintext
    is returned or logged."""
    rotated, undecryptable = 0, []
    found = rows.exclude(**{column: ""}).order_by("pk").values_list("pk", column)
    for pk, ciphertext in found.iterator():
        try:
            fresh = reencrypt_secret(ciphertext)
        except ValueError:
            undecryptable.append(str(pk))
            continue
        rotated += rows.filter(pk=pk, **{column: ciphertext}).update(**{column: fresh})
    return Reencryption(rotated=rotated, undecryptable=undecryptable)
