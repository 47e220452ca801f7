"""A project's slice is matched by identities, names only as a fallback (SPEC §12.1)."""

from __future__ import annotations

from typing import Any

import pytest

from provisioning.slice_match import ProjectSlice, project_on_slice, project_slice
from serenity.slices import Slice

US_EN = Slice(country="US", geo_target_id=2840, language_code="en")
US_PT_BR = Slice(country="US", geo_target_id=2840, language_code="pt-br")
ENGLISH_ID = "2f3a6c1e-0000-0000-0000-00000000e001"
GERMAN_ID = "2f3a6c1e-0000-0000-0000-00000000de01"


def project(*, location: Any = None, country: Any = None, language: Any = None) -> dict:
    ai: dict[str, Any] = {}
    if location is not None:
        ai["location"] = location
    if country is not None:
        ai["country"] = country
    if language is not None:
        ai["language"] = language
    return {"id": "p-1", "name": "US-en", "settings": {"ai": ai}}


def test_a_project_answer_states_its_slice():
    # given a project answer as the contract describes it
    answer = project(
        location={"id": 2840, "name": "United States"},
        country={"code": "us", "name": "United States"},
        language={"id": ENGLISH_ID, "name": "en"},
    )

    # when its slice is read, then every identity and name is there
    assert project_slice(answer) == ProjectSlice(
        location_id=2840, country_code="us", language_id=ENGLISH_ID, language_name="en"
    )
    assert project_slice({"id": "p-2"}) == ProjectSlice(None, None, None, None)


@pytest.mark.parametrize(
    ("language", "language_id", "on_slice"),
    [
        # the catalogue id decides when both sides know it, whatever the name says
        ({"id": ENGLISH_ID, "name": "German"}, ENGLISH_ID, True),
        ({"id": GERMAN_ID, "name": "en"}, ENGLISH_ID, False),
        # the name only when an id is missing: ISO code or display name, any case
        ({"name": "en"}, ENGLISH_ID, True),
        ({"name": "English"}, ENGLISH_ID, True),
        ({"id": ENGLISH_ID, "name": "EN"}, None, True),
        ({"name": "de"}, ENGLISH_ID, False),
        ({}, ENGLISH_ID, False),
    ],
)
def test_the_language_matches_by_catalogue_id_then_by_name(language, language_id, on_slice):
    # given a project in the US with that language
    answer = project(location={"id": 2840}, language=language)

    # when it is matched to the US/en slice, then
    assert project_on_slice(answer, US_EN, language_id=language_id) is on_slice


def test_a_regional_slice_matches_its_base_language_by_name():
    # given a project whose language reads "pt" (no id)
    answer = project(location={"id": 2840}, language={"name": "pt"})

    # when it is matched to the US/pt-br slice, then it is on it
    assert project_on_slice(answer, US_PT_BR, language_id=None) is True


@pytest.mark.parametrize(
    ("location", "country", "on_slice"),
    [
        ({"id": 2840, "name": "Germany"}, {"code": "de"}, True),  # the id wins over the country
        ({"id": 2276}, {"code": "us"}, False),
        (None, {"code": "us"}, True),  # no location id: the country code decides
        ({"name": "United States"}, {"code": "US"}, True),
        (None, {"code": "de"}, False),
        (None, None, False),
    ],
)
def test_the_location_matches_by_id_then_by_country_code(location, country, on_slice):
    # given a project in English with that location
    answer = project(location=location, country=country, language={"id": ENGLISH_ID})

    # when it is matched to the US/en slice, then
    assert project_on_slice(answer, US_EN, language_id=ENGLISH_ID) is on_slice
