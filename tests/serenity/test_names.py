"""The character checks of brand names and request paths (SPEC §10.2) are regexes: they refuse
exactly Unicode's Cc category (and, for names, the bidirectional overrides and isolates)."""

from __future__ import annotations

import sys
import unicodedata

from kernel.request_limits import has_control_character
from serenity.names import BIDI_OVERRIDES, brand_name_refusal


def test_every_code_point_is_refused_exactly_when_it_is_cc_or_a_bidi_override():
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if 0xD800 <= code <= 0xDFFF:
            continue  # surrogates cannot stand alone in a decoded request
        control = unicodedata.category(char) == "Cc"
        assert has_control_character(f"/v2/orgs/{char}") is control, hex(code)
        refused = brand_name_refusal(f"Acme{char}") is not None
        assert refused is (control or char in BIDI_OVERRIDES), hex(code)


def test_ordinary_names_and_paths_pass():
    assert brand_name_refusal("Acme Café 東京") is None
    assert not has_control_character("/v2/orgs/0b5c/brands")
