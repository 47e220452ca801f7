"""Activate of a `pending` brand with `brandDomain` runs A then C (SPEC §10.2): flip to
`active`, then the markets as in C; the answer is C's. Sync here; async in tests/chains."""

from __future__ import annotations

from provisioning.models import ProvisioningAttempt
from serenity.models import Brand, Market
from tests.factories import BrandFactory


def activate_path(caller, brand) -> str:  # type: ignore[no-untyped-def]
    return f"/v2/orgs/{caller.org.id}/brands/{brand.id}/serenity/activate"


def test_pending_brand_with_brand_domain_is_activated_then_gets_its_markets(sw_writer, sim):
    # given a pending brand never provisioned
    brand = BrandFactory(
        organization=sw_writer.org,
        name="Acme",
        status="pending",
        base_url="https://acme.example",
        semrush_sub_workspace_id=None,
    )
    # when
    response = sw_writer.post(
        activate_path(sw_writer, brand),
        {
            "brandDomain": "acme.example",
            "markets": [
                {"market": "US", "languageCode": "en"},
                {"market": "DE", "languageCode": "de"},
            ],
        },
    )
    # then C's answer, with both markets created in the new workspace
    assert response.status_code == 200, response.json()
    body = response.json()
    [workspace] = sim.state()["workspaces"]
    projects = {(p["locationId"], p["language"]): p["id"] for p in sim.state()["projects"]}
    assert body == {
        "brandId": str(brand.id),
        "status": "active",
        "baseUrl": "https://acme.example",
        "markets": [
            {
                "market": "US",
                "languageCode": "en",
                "status": 201,
                "body": {
                    "brandId": str(brand.id),
                    "geoTargetId": 2840,
                    "languageCode": "en",
                    "workspaceId": workspace["id"],
                    "projectId": projects[(2840, "en")],
                    "published": True,
                },
            },
            {
                "market": "DE",
                "languageCode": "de",
                "status": 201,
                "body": {
                    "brandId": str(brand.id),
                    "geoTargetId": 2276,
                    "languageCode": "de",
                    "workspaceId": workspace["id"],
                    "projectId": projects[(2276, "de")],
                    "published": True,
                },
            },
        ],
    }
    fresh = Brand.objects.get(pk=brand.pk)
    assert (fresh.status, fresh.semrush_sub_workspace_id) == ("active", workspace["id"])
    assert sorted(
        Market.objects.filter(brand=brand, deleted_at__isnull=True).values_list(
            "geo_target_id", "language_code"
        )
    ) == [(2276, "de"), (2840, "en")]
    [attempt] = ProvisioningAttempt.objects.all()
    assert attempt.status == "ready"


def test_pending_brand_without_brand_domain_stays_branch_a(sw_writer, sim):
    # given
    brand = BrandFactory(
        organization=sw_writer.org,
        name="Acme",
        status="pending",
        base_url="https://acme.example",
        semrush_sub_workspace_id=None,
    )
    # when markets without brandDomain
    response = sw_writer.post(
        activate_path(sw_writer, brand), {"markets": [{"market": "US", "languageCode": "en"}]}
    )
    # then A's answer and no market
    assert response.status_code == 200, response.json()
    assert response.json() == {"brandId": str(brand.id), "status": "active", "markets": []}
    assert Market.objects.count() == 0
