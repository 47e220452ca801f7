"""Sync settle polling (SPEC §4.3, §5): fail fast on a terminal status, time out on a stuck one."""

from __future__ import annotations

from provisioning.models import ProvisioningAttempt
from serenity.models import Brand, Market
from tests.factories import BrandFactory
from tests.support import (
    assert_error,
    calls,
    create_child,
    db_counts_but_ended_sync_jobs,
    family,
    foreign_ids,
    languages,
    sim_create_workspace,
    status_read,
)


def brands_path(caller) -> str:  # type: ignore[no-untyped-def]
    return f"/v2/orgs/{caller.org.id}/brands"


def markets_path(caller, brand) -> str:  # type: ignore[no-untyped-def]
    return f"/v2/orgs/{caller.org.id}/brands/{brand.id}/serenity/markets"


def test_market_create_on_a_stuck_workspace_is_504_after_the_configured_reads(
    sw_writer, sim, settings
):
    # given a workspace that never settles, and three reads allowed
    settings.SERENITY_SETTLE_POLL_ATTEMPTS = 3
    sim.configure({"settleOutcome": "stuck"})
    workspace = sim_create_workspace(sim, "Acme", settle=False)
    brand = BrandFactory(
        organization=sw_writer.org, name="Acme", semrush_sub_workspace_id=workspace
    )
    setup = len(calls(sim))
    # when
    response = sw_writer.post(
        markets_path(sw_writer, brand), {"market": "US", "languageCode": "en"}
    )
    # then exactly three status reads, no project call, no market row
    assert_error(response, 504, "subworkspaceCreationTimeout", forbidden=foreign_ids(sim))
    assert calls(sim)[setup:] == [languages()] + [status_read(workspace)] * 3
    assert Market.objects.count() == 0
    [attempt] = ProvisioningAttempt.objects.all()
    assert (attempt.status, attempt.reason) == ("failed", "exhausted")
    # and the brand reads as failed, with the reason
    read = sw_writer.get(f"{brands_path(sw_writer)}/{brand.id}").json()
    assert read["semrushProvisioningStatus"] == "failed"
    assert read["semrushProvisioningError"]["code"] == "exhausted"


def test_market_create_on_a_failed_workspace_is_502_after_one_read(sw_writer, sim):
    # given a workspace whose creation failed upstream
    sim.configure({"settleOutcome": "failed", "settleSeconds": 0})
    workspace = sim_create_workspace(sim, "Acme", settle=False)
    brand = BrandFactory(
        organization=sw_writer.org, name="Acme", semrush_sub_workspace_id=workspace
    )
    setup = len(calls(sim))
    # when
    response = sw_writer.post(
        markets_path(sw_writer, brand), {"market": "US", "languageCode": "en"}
    )
    # then
    assert_error(response, 502, "subworkspaceCreationFailed", forbidden=foreign_ids(sim))
    assert calls(sim)[setup:] == [languages(), status_read(workspace)]
    assert Market.objects.count() == 0
    [attempt] = ProvisioningAttempt.objects.all()
    assert (attempt.status, attempt.reason) == ("failed", "terminal")


def test_brand_create_with_market_on_a_stuck_workspace_is_504_and_leaves_no_row(
    sw_writer, sim, settings
):
    # given
    settings.SERENITY_SETTLE_POLL_ATTEMPTS = 4
    sim.configure({"settleOutcome": "stuck"})
    # when
    response = sw_writer.post(
        brands_path(sw_writer),
        {
            "name": "Acme",
            "baseUrl": "https://acme.example",
            "semrushMarket": {"market": "US", "languageCode": "en"},
        },
    )
    # then four reads of the new workspace, then 504; the brand row is gone
    [workspace] = sim.state()["workspaces"]
    ws = workspace["id"]
    assert_error(response, 504, "subworkspaceCreationTimeout", forbidden=foreign_ids(sim))
    made = calls(sim)
    assert made[:3] == [languages(), family(sim.parent_id), create_child(sim.parent_id)]
    assert made[3:7] == [status_read(ws)] * 4
    assert not [c for c in made if c[0] == "POST" and c[1].endswith("/projects")]
    assert db_counts_but_ended_sync_jobs() == {
        "brands": 0,
        "markets": 0,
        "attempts": 0,
        "jobs": 0,
        "prompts": 0,
    }


def test_brand_create_with_market_on_a_failed_workspace_is_502_after_one_read(sw_writer, sim):
    # given
    sim.configure({"settleOutcome": "failed", "settleSeconds": 0})
    # when
    response = sw_writer.post(
        brands_path(sw_writer),
        {
            "name": "Acme",
            "baseUrl": "https://acme.example",
            "semrushMarket": {"market": "US", "languageCode": "en"},
        },
    )
    # then
    [workspace] = sim.state()["workspaces"]
    assert_error(response, 502, "subworkspaceCreationFailed", forbidden=foreign_ids(sim))
    assert calls(sim)[:4] == [
        languages(),
        family(sim.parent_id),
        create_child(sim.parent_id),
        status_read(workspace["id"]),
    ]
    assert status_read(workspace["id"]) not in calls(sim)[4:]
    assert Brand.objects.count() == 0


def test_activate_c_on_a_stuck_workspace_is_504(sw_writer, sim, settings):
    # given
    settings.SERENITY_SETTLE_POLL_ATTEMPTS = 2
    sim.configure({"settleOutcome": "stuck"})
    workspace = sim_create_workspace(sim, "Acme", settle=False)
    brand = BrandFactory(
        organization=sw_writer.org, name="Acme", semrush_sub_workspace_id=workspace
    )
    setup = len(calls(sim))
    # when
    response = sw_writer.post(
        f"{brands_path(sw_writer)}/{brand.id}/serenity/activate", {"brandDomain": "acme.example"}
    )
    # then
    assert_error(response, 504, "subworkspaceCreationTimeout", forbidden=foreign_ids(sim))
    assert calls(sim)[setup:] == [status_read(workspace)] * 2
    assert Market.objects.count() == 0
    brand.refresh_from_db()
    assert brand.semrush_sub_workspace_id == workspace
