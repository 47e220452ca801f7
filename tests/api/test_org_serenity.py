"""`GET O/serenity` (SPEC §13.2): the org's Serenity switch and the state of the Semrush
credential its calls use, never the credential; readers may read it."""

from __future__ import annotations

import pytest
import redis
from django.test import override_settings
from django.utils import timezone

from provisioning import credentials, quota
from provisioning.models import UpstreamCredential
from serenity.models import Role
from tests.conftest import TEST_BROKER_URL, make_caller
from tests.factories import OrganizationFactory


def path(org_id: object) -> str:
    return f"/v2/orgs/{org_id}/serenity"


@pytest.fixture
def limiter_keys():  # type: ignore[no-untyped-def]
    keys: list[str] = []
    yield keys
    if keys:
        redis.Redis.from_url(TEST_BROKER_URL).delete(*keys)


@override_settings(SEMRUSH_RATE_LIMIT_PER_SECOND=10)
def test_a_reader_sees_the_service_credential_ok_at_its_configured_rate(reader):
    response = reader.get(path(reader.org.id))
    assert response.status_code == 200
    assert response.json() == {
        "serenityEnabled": reader.org.serenity_enabled,
        "credential": {
            "source": "service",
            "status": "ok",
            "refusedAt": None,
            "checkedAt": None,
            "ratePerSecond": 10.0,
        },
    }


def test_an_org_s_own_credential_refused_and_slowed_shows_so_never_the_token(
    db, limiter_keys, settings
):
    settings.SEMRUSH_RATE_INCREASE_SPELL_SECONDS = 3600.0  # no raise while the test reads it
    settings.SEMRUSH_RATE_DECREASE_FACTOR = 0.85
    # given an org with its own credential (ceiling 4/s) that Semrush accepted, then refused,
    # and that upstream slowed down once (a 429 without Retry-After)
    org = OrganizationFactory(serenity_enabled=True, semrush_rate_limit_per_second=4)
    org.set_semrush_credential("own-secret-token-123")
    org.save()
    credential = credentials.credential_of(org)
    limiter_keys.append(credential.key)
    refused_at = timezone.now()
    UpstreamCredential.objects.create(
        key=credential.key, accepted_at=refused_at, refused_at=refused_at, checked_at=refused_at
    )
    quota.CredentialPermits(
        key=credential.key, limits=credential.limits, org_id=str(org.id), in_step=False
    ).pause(None)
    reader = make_caller(org, Role.READER)
    # when
    response = reader.get(path(org.id))
    # then
    assert response.status_code == 200
    stamp = refused_at.isoformat().replace("+00:00", "Z")
    assert response.json() == {
        "serenityEnabled": True,
        "credential": {
            "source": "org",
            "status": "refused",
            "refusedAt": stamp,
            "checkedAt": stamp,
            "ratePerSecond": 3.4,
        },
    }
    assert "own-secret-token-123" not in response.content.decode()


def test_another_org_s_state_is_refused(reader):
    other = OrganizationFactory()
    response = reader.get(path(other.id))
    assert response.status_code == 403
    assert response.json()["error"] == "forbidden"


def test_the_route_is_documented(anonymous):
    schema = anonymous.get("/api/schema/?format=json").json()
    operation = schema["paths"]["/v2/orgs/{orgId}/serenity"]["get"]
    assert operation["operationId"] == "serenityGet"
    body = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/SerenityState"}
    credential = schema["components"]["schemas"]["CredentialState"]
    assert set(credential["properties"]) == {
        "source",
        "status",
        "refusedAt",
        "checkedAt",
        "ratePerSecond",
    }
