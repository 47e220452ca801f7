"""The adaptive rate as an operator sees it (SPEC §13.3): the rate each credential is paced at
now, on `/metrics` and in the admin, lowered by a 429 without Retry-After (the rules themselves,
once per store: tests/provisioning/test_quota.py)."""

from __future__ import annotations

import pytest
import redis
from django.contrib.auth import get_user_model
from django.test import Client

from provisioning import credentials, quota
from serenity.models import Organization
from tests.conftest import TEST_BROKER_URL
from tests.factories import OrganizationFactory


@pytest.fixture(autouse=True)
def no_raise_during_a_test(settings):  # type: ignore[no-untyped-def]
    """No quiet spell ends while a test reads the rate it lowered (a loaded machine)."""
    settings.SEMRUSH_RATE_INCREASE_SPELL_SECONDS = 3600.0
    settings.SEMRUSH_RATE_DECREASE_FACTOR = 0.85


@pytest.fixture
def own_org(db):  # type: ignore[no-untyped-def]
    org = OrganizationFactory(semrush_rate_limit_per_second=4)
    org.set_semrush_credential("adaptive-own-token")
    org.save()
    yield org
    redis.Redis.from_url(TEST_BROKER_URL).delete(credentials.credential_of(org).key)


def _throttled(org: Organization) -> credentials.Credential:
    """Upstream answered a call of `org` 429 without Retry-After."""
    credential = credentials.credential_of(org)
    permits = quota.CredentialPermits(
        key=credential.key, limits=credential.limits, org_id=str(org.id), in_step=False
    )
    permits.pause(None)
    return credential


def test_metrics_show_each_credential_s_current_rate(own_org, anonymous, settings):
    settings.SEMRUSH_RATE_LIMIT_PER_SECOND = 10
    # given the org's own credential (ceiling 4/s) lowered once by a 429 without Retry-After
    credential = _throttled(own_org)
    # when
    text = anonymous.get("/metrics").content.decode()
    # then its rate is 0.85 x 4 (the factor), the service's untouched at 10, and the
    # credential is named by a short hash only
    label = credentials.label(credential)
    assert f'serenity_upstream_rate_per_second{{credential="{label}",source="org"}} 3.4' in text
    assert 'source="service"} 10.0' in text
    assert "adaptive-own-token" not in text


def test_the_admin_org_page_shows_the_credential_s_rate(own_org):
    _throttled(own_org)
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    page = client.get(f"/admin/serenity/organization/{own_org.id}/change/").content.decode()
    assert "Semrush rate now" in page
    assert "3.4 (org credential)" in page
    assert "adaptive-own-token" not in page
