"""Upstream failures as clients see them (SPEC §4, §7): same status for auth failures with a
generic message, 502 otherwise, and nothing of upstream in any body."""

from __future__ import annotations

from provisioning.models import ProvisioningAttempt
from serenity.models import Market
from tests.conftest import SIM_TOKEN
from tests.factories import BrandFactory
from tests.support import (
    UM,
    assert_error,
    calls_with_status,
    db_counts_but_ended_sync_jobs,
    foreign_ids,
    sim_create_workspace,
    sim_request,
)

EMPTY = {"brands": 0, "markets": 0, "attempts": 0, "jobs": 0, "prompts": 0}


def brands_path(caller) -> str:  # type: ignore[no-untyped-def]
    return f"/v2/orgs/{caller.org.id}/brands"


def markets_path(caller, brand) -> str:  # type: ignore[no-untyped-def]
    return f"/v2/orgs/{caller.org.id}/brands/{brand.id}/serenity/markets"


def test_upstream_refusing_our_token_is_401_upstream_unauthorized(sw_writer, sim):
    # given Semrush no longer accepts the service's credential
    sim.reset(parents=[sim.parent_id], token="another-token")
    # when
    response = sw_writer.post(
        brands_path(sw_writer), {"name": "Acme", "baseUrl": "https://a.example"}
    )
    # then the same status with a generic message; one call, not retried; nothing left behind
    body = assert_error(response, 401, "upstreamUnauthorized", forbidden=foreign_ids(sim))
    assert body == {
        "error": "upstreamUnauthorized",
        "message": "Semrush rejected the organization's credential.",
    }
    # the caller's own token was fine: nothing invites it to authenticate again
    assert "WWW-Authenticate" not in response
    assert calls_with_status(sim) == [("GET", f"{UM}/v1/workspaces/{sim.parent_id}/family", 401)]
    assert db_counts_but_ended_sync_jobs() == EMPTY


def test_upstream_401_after_the_credential_worked_is_503_credential_refused(sw_writer, sim):
    # given a provisioned brand, and the project create answering 401 (the market create's
    # earlier reads are answered 2xx: the credential has worked, SPEC §13.2)
    workspace = sim_create_workspace(sim, "Acme")
    brand = BrandFactory(
        organization=sw_writer.org, name="Acme", semrush_sub_workspace_id=workspace
    )
    sim.add_fault(
        {
            "method": "POST",
            "pathRegex": "/projects$",
            "status": 401,
            "body": {"detail": "Not authenticated"},
        }
    )
    # when
    response = sw_writer.post(
        markets_path(sw_writer, brand), {"market": "US", "languageCode": "en"}
    )
    # then the credential is on hold: the sync request answers 503 credentialRefused, with
    # when it is checked again, and nothing was made
    body = assert_error(
        response, 503, "credentialRefused", forbidden=foreign_ids(sim, own=[workspace])
    )
    assert body == {
        "error": "credentialRefused",
        "message": "Semrush refuses the organization's credential for now; work that needs "
        "it waits.",
    }
    assert response["Retry-After"] == "60"
    assert Market.objects.count() == 0
    assert sim.state()["projects"] == []
    # and the next sync request answers so at once, without calling Semrush
    calls_before = len(sim.requests_log())
    again = sw_writer.post(markets_path(sw_writer, brand), {"market": "DE", "languageCode": "de"})
    assert_error(again, 503, "credentialRefused")
    assert len(sim.requests_log()) == calls_before


def test_upstream_403_on_a_workspace_we_do_not_own_is_403_upstream_forbidden(sw_writer, sim):
    # given the org's parent is not accessible with the credential (unknown upstream)
    sim.reset(parents=[], token=SIM_TOKEN)
    sim.add_token(sim.org_token)
    # when
    response = sw_writer.post(
        brands_path(sw_writer), {"name": "Acme", "baseUrl": "https://a.example"}
    )
    # then
    body = assert_error(response, 403, "upstreamForbidden", forbidden=foreign_ids(sim))
    assert body == {
        "error": "upstreamForbidden",
        "message": "Semrush refused access with the organization's credential.",
    }
    assert db_counts_but_ended_sync_jobs() == EMPTY


def test_403_on_the_brands_own_workspace_means_it_is_gone(sw_writer, sim):
    # given the brand's workspace was deleted outside this service
    workspace = sim_create_workspace(sim, "Acme")
    brand = BrandFactory(
        organization=sw_writer.org, name="Acme", semrush_sub_workspace_id=workspace
    )
    sim_request(sim, "DELETE", f"{UM}/v1/workspaces/{workspace}")
    # when
    response = sw_writer.post(
        markets_path(sw_writer, brand), {"market": "US", "languageCode": "en"}
    )
    # then a 502 that says so, without the id; the attempt records why
    assert_error(response, 502, "subworkspaceGone", forbidden=[workspace, sim.parent_id])
    assert Market.objects.count() == 0
    [attempt] = ProvisioningAttempt.objects.all()
    assert (attempt.status, attempt.reason) == ("failed", "gone")


def test_upstream_server_errors_are_502_with_a_generic_message(sw_writer, sim):
    # given every read of the family fails with an upstream error page
    sim.add_fault(
        {
            "method": "GET",
            "pathRegex": "/family$",
            "status": 503,
            "times": 3,
            "body": "<html>503 Service Unavailable at https://api.semrush.com/x</html>",
        }
    )
    # when
    response = sw_writer.post(
        brands_path(sw_writer), {"name": "Acme", "baseUrl": "https://a.example"}
    )
    # then
    body = assert_error(response, 502, "serenityUpstreamError", forbidden=foreign_ids(sim))
    assert body == {
        "error": "serenityUpstreamError",
        "message": "Semrush could not complete the request.",
    }
    assert "semrush.com" not in response.content.decode()
    assert db_counts_but_ended_sync_jobs() == EMPTY


def test_a_dropped_connection_is_502(sw_writer, sim):
    # given the connection drops on every read of the family
    sim.add_fault({"method": "GET", "pathRegex": "/family$", "status": 0, "times": 3})
    # when
    response = sw_writer.post(
        brands_path(sw_writer), {"name": "Acme", "baseUrl": "https://a.example"}
    )
    # then
    assert_error(response, 502, "serenityUpstreamError", forbidden=foreign_ids(sim))
    assert db_counts_but_ended_sync_jobs() == EMPTY


def test_the_languages_route_with_a_refused_credential_is_401(sw_writer, sim):
    # given
    sim.reset(parents=[sim.parent_id], token="another-token")
    # when
    response = sw_writer.get(f"/v2/orgs/{sw_writer.org.id}/serenity/languages")
    # then
    assert_error(response, 401, "upstreamUnauthorized", forbidden=foreign_ids(sim))
