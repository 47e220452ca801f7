"""`GET /v2/orgs/{orgId}/serenity/languages`: the upstream catalogue, cached (SPEC §4)."""

from __future__ import annotations

from provisioning.simulator.server import LANGUAGES
from serenity.models import Role
from tests.conftest import make_caller
from tests.support import assert_clean, assert_error, calls, foreign_ids, languages


def languages_path(caller) -> str:  # type: ignore[no-untyped-def]
    return f"/v2/orgs/{caller.org.id}/serenity/languages"


def test_languages_are_the_catalogue_as_iso_codes_and_cached(serenity_org, sim):
    # given a reader (a read route)
    caller = make_caller(serenity_org, Role.READER)
    # when
    first = caller.get(languages_path(caller))
    second = caller.get(languages_path(caller))
    # then `{items: [{id, code}]}` in catalogue order, and one upstream read for both answers
    assert first.status_code == 200, first.json()
    assert first.json() == {"items": [{"id": lang.id, "code": lang.code} for lang in LANGUAGES]}
    assert second.json() == first.json()
    assert calls(sim) == [languages()]
    assert_clean(first, forbidden=foreign_ids(sim))


def test_languages_failing_upstream_is_502_and_not_cached(sw_writer, sim):
    # given the catalogue read fails on every try
    sim.add_fault(
        {
            "method": "GET",
            "pathRegex": "/languages$",
            "status": 503,
            "times": 3,
            "body": {"message": "service unavailable"},
        }
    )
    # when
    response = sw_writer.get(languages_path(sw_writer))
    # then
    assert_error(response, 502, "serenityUpstreamError", forbidden=foreign_ids(sim))
    assert calls(sim) == [languages()] * 3
    # and the next call asks again
    assert sw_writer.get(languages_path(sw_writer)).status_code == 200
