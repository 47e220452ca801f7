"""Brand names (SPEC §10.2, §11.4): what a name may contain, and the key two names collide on.

One rule for every name the service is given — a brand's `name`, its `aliases[]` and a market's
`brandNames[]` — through the API and the admin alike (the model fields carry the validators):

A brand's name becomes the title of its upstream workspace, so it must be one clean line:
trimmed, with no control characters (Unicode Cc), no bidirectional overrides or isolates
(U+202A to U+202E, U+2066 to U+2069), which would make a title read differently from what it is,
and no invisible code points (Unicode's Default_Ignorable_Code_Point: zero-width spaces and
joiners, soft hyphen, variation selectors, tags...), which would make two names that read the
same differ. Uniqueness compares the NFKC-normalised, case-folded name with every run of
whitespace made one space, so a full-width or otherwise compatibility-equivalent look-alike of
an existing name, or the same name with doubled spaces, is the same name.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from django.core.exceptions import ValidationError

BIDI_OVERRIDES = frozenset(chr(c) for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A)])
# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt; stable since Unicode 5.1:
# new ones are assigned only inside these ranges), as regular expression ranges. Those of the
# Basic Multilingual Plane first: the OpenAPI document states them in the name's pattern.
_DEFAULT_IGNORABLE_BMP = (
    "\\u00ad\\u034f\\u061c\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u200b-\\u200f"
    "\\u2060-\\u206f\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufff8"
)
_DEFAULT_IGNORABLE_ASTRAL = "\\U0001bca0-\\U0001bca3\\U0001d173-\\U0001d17a\\U000e0000-\\U000e0fff"
# What `brand_name_refusal` refuses, as a regular expression class: Unicode's Cc category is
# exactly C0, DEL and C1 (Unicode keeps the general categories of control characters stable;
# pinned by tests/serenity/test_names.py), BIDI_OVERRIDES, then the default-ignorable code
# points of the BMP. The OpenAPI document states it as the names' pattern; the astral ones
# only the service's own check names (ECMA-262 has no escape for them that Python also reads,
# and written as characters they make the pattern unusable to schemathesis).
REFUSED_NAME_CHARACTERS = (
    "\\x00-\\x1f\\x7f-\\x9f\\u202a-\\u202e\\u2066-\\u2069" + _DEFAULT_IGNORABLE_BMP
)
_REFUSED = re.compile(f"[{REFUSED_NAME_CHARACTERS}{_DEFAULT_IGNORABLE_ASTRAL}]")
_WHITESPACE_RUN = re.compile(r"\s+")


def brand_name_refusal(name: str) -> str | None:
    """Why `name` cannot be a brand name (or an alias, or one of a market's brand names), or
    None when it can."""
    if _REFUSED.search(name):
        return "must not contain control, bidirectional-override or invisible characters."
    return None


def brand_name_key(name: str) -> str:
    """The key two brand names collide on: NFKC-normalised and case-folded (normalised again
    after folding, as case folding can leave a non-normalised string), every run of whitespace
    one space, trimmed."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())
    return _WHITESPACE_RUN.sub(" ", folded).strip()


def validate_brand_name(value: str) -> None:
    """Django validator of `brand_name_refusal` (the model's `name`: the admin's forms)."""
    refusal = brand_name_refusal(value)
    if refusal is not None:
        raise ValidationError(f"Name {refusal}", code="invalid_brand_name")


def validate_brand_names(value: Iterable[object]) -> None:
    """Django validator of a list of names (the model's `aliases`): strings, each one a name
    `brand_name_refusal` accepts."""
    if not isinstance(value, list):
        raise ValidationError("Must be a list of names.", code="invalid_brand_names")
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            raise ValidationError(
                f"Item {index} must be a non-empty string.", code="invalid_brand_names"
            )
        refusal = brand_name_refusal(item)
        if refusal is not None:
            raise ValidationError(f"Item {index} {refusal}", code="invalid_brand_names")
