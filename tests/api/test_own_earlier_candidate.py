"""SPEC §10.2 / §5: a candidate recorded by one of the brand's own earlier attempts wins
outright on every create-or-adopt path: here the sync one, after a cancelled async create."""

from __future__ import annotations

from provisioning.models import ProvisioningAttempt
from serenity.models import Brand
from tests.factories import BrandFactory, ProvisioningAttemptFactory
from tests.support import calls, create_child, family, sim_create_workspace


def test_sync_activate_adopts_the_workspace_of_its_own_cancelled_create(sw_writer, sim):
    # given an async create that was cancelled after making its fresh workspace, and another
    # workspace of the same title made outside the service
    brand = BrandFactory(
        organization=sw_writer.org,
        name="Acme",
        status="active",
        base_url="https://acme.example",
        semrush_sub_workspace_id=None,
    )
    own = sim_create_workspace(sim, "Acme")
    ProvisioningAttemptFactory(
        brand=brand,
        started_by="create-brand",
        status="failed",
        reason="cancelled",
        candidate_workspace_id=own,
        freshly_created=True,
    )
    sim_create_workspace(sim, "Acme")
    setup = len(calls(sim))
    # when a bare activate runs synchronously
    response = sw_writer.post(
        f"/v2/orgs/{sw_writer.org.id}/brands/{brand.id}/serenity/activate", {}
    )
    # then its own earlier candidate is adopted, not 409 ambiguousWorkspace, and nothing created
    assert response.status_code == 200, response.json()
    assert response.json() == {"brandId": str(brand.id), "status": "active", "markets": []}
    assert Brand.objects.get(pk=brand.pk).semrush_sub_workspace_id == own
    made = calls(sim)[setup:]
    assert made[0] == family(sim.parent_id)
    assert create_child(sim.parent_id) not in made
    latest = ProvisioningAttempt.objects.filter(brand=brand).order_by("-created_at").first()
    assert latest is not None and latest.status == "ready"
