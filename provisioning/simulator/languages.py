"""Upstream's language catalogue, as the simulator serves it (`GET PE/v1/languages`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

# Upstream's catalogue has 38 entries with English display names. These names are exactly the
# ISO 639 names pycountry uses, so that the service can map an ISO code to a catalogue id.
LANGUAGE_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://semrush-simulator.invalid/languages")
_LANGUAGE_CODES = (
    ("English", "en"),
    ("German", "de"),
    ("French", "fr"),
    ("Spanish", "es"),
    ("Italian", "it"),
    ("Portuguese", "pt"),
    ("Dutch", "nl"),
    ("Japanese", "ja"),
    ("Polish", "pl"),
    ("Swedish", "sv"),
    ("Danish", "da"),
    ("Finnish", "fi"),
    ("Norwegian", "no"),
    ("Czech", "cs"),
    ("Turkish", "tr"),
    ("Korean", "ko"),
    ("Chinese", "zh"),
    ("Arabic", "ar"),
    ("Hindi", "hi"),
    ("Russian", "ru"),
)


def language_id(name: str) -> str:
    """The stable catalogue id of a language: uuid5 of its English name."""
    return str(uuid.uuid5(LANGUAGE_NAMESPACE, name))


@dataclass(frozen=True)
class Language:
    id: str
    name: str
    code: str


LANGUAGES: tuple[Language, ...] = tuple(
    Language(id=language_id(name), name=name, code=code) for name, code in _LANGUAGE_CODES
)
_LANGUAGES_BY_ID = {language.id: language for language in LANGUAGES}
