"""First end-to-end checks of the sync flows against the simulator."""

from tests.conftest import upstream_calls


def brands_path(caller):
    return f"/v2/orgs/{caller.org.id}/brands"


def test_bare_brand_create_makes_one_child_and_reads_it_until_ready(sw_writer, sim):
    # when
    response = sw_writer.post(
        brands_path(sw_writer), {"name": "Acme", "baseUrl": "https://acme.example"}
    )
    # then
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["semrushProvisioningStatus"] == "ready"
    assert body["semrushSubWorkspaceId"] == sim.state()["workspaces"][0]["id"]
    calls = upstream_calls(sim)
    assert [c for c in calls if c[0] == "POST"] == [
        ("POST", f"/enterprise/users/api/v2/workspaces/{sim.parent_id}/child")
    ]
    # promoted once ready, as a chain promotes it (SPEC §12.3)
    workspace = body["semrushSubWorkspaceId"]
    assert [c for c in calls if c[1].endswith("/status")]
    assert {c[1] for c in calls if c[1].endswith("/status")} == {
        f"/enterprise/users/api/v1/workspaces/{workspace}/status"
    }


def test_brand_create_with_market_settles_and_publishes(sw_writer, sim):
    response = sw_writer.post(
        brands_path(sw_writer),
        {
            "name": "Acme",
            "baseUrl": "https://www.acme.example/",
            "semrushMarket": {"market": "us", "languageCode": "EN"},
        },
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["market"]["market"] == "US"
    assert body["market"]["geoTargetId"] == 2840
    assert body["market"]["status"] == "live"
    state = sim.state()
    assert len(state["projects"]) == 1
    assert state["projects"][0]["locationId"] == 2840
    assert state["projects"][0]["primaryUrl"] == "https://www.acme.example/"


def test_market_create_then_activate_then_deactivate(sw_writer, sim):
    brand = sw_writer.post(
        brands_path(sw_writer), {"name": "Acme", "baseUrl": "https://acme.example"}
    ).json()
    b = f"{brands_path(sw_writer)}/{brand['id']}/serenity"
    created = sw_writer.post(f"{b}/markets", {"market": "DE", "languageCode": "de"})
    assert created.status_code == 201, created.json()
    assert created.json()["geoTargetId"] == 2276
    again = sw_writer.post(f"{b}/markets", {"market": "DE", "languageCode": "de"})
    assert again.status_code == 409 and again.json()["error"] == "sliceExists"
    listed = sw_writer.get(f"{b}/markets").json()["items"]
    assert [m["market"] for m in listed] == ["DE"]
    act = sw_writer.post(
        f"{b}/activate",
        {
            "brandDomain": "acme.example",
            "markets": [
                {"market": "US", "languageCode": "en"},
                {"market": "DE", "languageCode": "de"},
            ],
        },
    )
    assert act.status_code == 200, act.json()
    assert [m["status"] for m in act.json()["markets"]] == [201, 409]
    deact = sw_writer.post(f"{b}/deactivate")
    assert deact.status_code == 200, deact.json()
    assert deact.json() == {"brandId": brand["id"], "status": "pending"}
    assert sim.state()["projects"] == []
    assert sw_writer.get(f"{b}/markets").json()["items"] == []
