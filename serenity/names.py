"""Brand names (SPEC §10.2): what a name may contain, and the key two names collide on.

A brand's name becomes the title of its upstream workspace, so it must be one clean line:
trimmed, with no control characters (Unicode Cc) and no bidirectional overrides or isolates
(U+202A to U+202E, U+2066 to U+2069), which would make a title read differently from what it is.
Uniqueness compares the NFKC-normalised, case-folded name, so a full-width or otherwise
compatibility-equivalent look-alike of an existing name is the same name.
"""

from __future__ import annotations

import re
import unicodedata

BIDI_OVERRIDES = frozenset(chr(c) for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A)])
# What `brand_name_refusal` refuses, as a regular expression class: Unicode's Cc category is
# exactly C0, DEL and C1 (Unicode keeps the general categories of control characters stable;
# pinned by tests/serenity/test_names.py), then BIDI_OVERRIDES. The OpenAPI document states it
# as the name's pattern; one search instead of a category lookup per character.
REFUSED_NAME_CHARACTERS = "\\x00-\\x1f\\x7f-\\x9f\\u202a-\\u202e\\u2066-\\u2069"
_REFUSED = re.compile(f"[{REFUSED_NAME_CHARACTERS}]")


def brand_name_refusal(name: str) -> str | None:
    """Why `name` cannot be a brand name, or None when it can."""
    if _REFUSED.search(name):
        return "must not contain control or bidirectional-override characters."
    return None


def brand_name_key(name: str) -> str:
    """The key two brand names collide on: trimmed, NFKC-normalised and case-folded
    (normalised again after folding, as case folding can leave a non-normalised string)."""
    folded = unicodedata.normalize("NFKC", name.strip()).casefold()
    return unicodedata.normalize("NFKC", folded).strip()
