"""The character checks of brand names and request paths (SPEC §10.2, §11.4) are regexes: they
refuse exactly Unicode's Cc category (and, for names, the bidirectional overrides and isolates
and the default-ignorable code points); the name key collapses runs of whitespace."""

from __future__ import annotations

import sys
import unicodedata

import pytest

from kernel.request_limits import has_control_character
from serenity.names import BIDI_OVERRIDES, brand_name_key, brand_name_refusal

# Unicode's Default_Ignorable_Code_Point as DerivedCoreProperties.txt derives it: Cf, variation
# selectors and Other_Default_Ignorable_Code_Point, minus white space, the interlinear
# annotation characters, the prepended concatenation marks and the Egyptian format controls.
_OTHER_DEFAULT_IGNORABLE = [
    (0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x2065, 0x2065), (0x3164, 0x3164),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0xE0000, 0xE0000), (0xE0002, 0xE001F),
    (0xE0080, 0xE00FF), (0xE01F0, 0xE0FFF),
]  # fmt: skip
_VARIATION_SELECTORS = [(0x180B, 0x180D), (0x180F, 0x180F), (0xFE00, 0xFE0F), (0xE0100, 0xE01EF)]
_NOT_IGNORABLE_FORMAT = [
    (0x0600, 0x0605), (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2),
    (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0xFFF9, 0xFFFB), (0x13430, 0x1343F),
]  # fmt: skip


def _within(code: int, ranges: list[tuple[int, int]]) -> bool:
    return any(low <= code <= high for low, high in ranges)


def _default_ignorable(code: int) -> bool:
    if _within(code, _OTHER_DEFAULT_IGNORABLE) or _within(code, _VARIATION_SELECTORS):
        return True
    return unicodedata.category(chr(code)) == "Cf" and not _within(code, _NOT_IGNORABLE_FORMAT)


def test_every_code_point_is_refused_exactly_when_it_is_cc_bidi_or_default_ignorable():
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if 0xD800 <= code <= 0xDFFF:
            continue  # surrogates cannot stand alone in a decoded request
        control = unicodedata.category(char) == "Cc"
        assert has_control_character(f"/v2/orgs/{char}") is control, hex(code)
        refused = brand_name_refusal(f"Acme{char}") is not None
        expected = control or char in BIDI_OVERRIDES or _default_ignorable(code)
        assert refused is expected, hex(code)


@pytest.mark.parametrize(
    ("name", "same_as"),
    [
        ("Acme  Inc", "Acme Inc"),
        ("Acme \u3000Inc", "acme inc"),
        (" Acme\u00a0\u2003Inc ", "ACME INC"),
        ("\uff21cme   Inc", "Acme Inc"),
    ],
)
def test_the_key_collapses_runs_of_whitespace(name, same_as):
    assert brand_name_key(name) == brand_name_key(same_as)


def test_the_key_keeps_single_spaces_apart():
    assert brand_name_key("Acme Inc") != brand_name_key("AcmeInc")


def test_ordinary_names_and_paths_pass():
    assert brand_name_refusal("Acme Café 東京") is None
    assert not has_control_character("/v2/orgs/0b5c/brands")
