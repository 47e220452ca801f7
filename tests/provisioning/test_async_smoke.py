"""First end-to-end checks of the async chain with a real worker process."""

from tests.conftest import poll_job


def test_async_bare_brand_create_completes(sw_writer, sim, worker):
    # when
    response = sw_writer.post(
        f"/v2/orgs/{sw_writer.org.id}/brands",
        {"name": "Acme", "baseUrl": "https://acme.example", "async": True},
    )
    # then
    assert response.status_code == 202, response.json()
    body = response.json()
    assert body["jobStatus"] == "IN_PROGRESS"
    assert body["semrushProvisioningStatus"] == "pending"
    assert response["Location"].endswith(f"/serenity/jobs/{body['jobId']}")
    final = poll_job(sw_writer, response["Location"])
    assert final["status"] == "COMPLETED", final
    assert final["result"] == {
        "status": 200,
        "body": {"brandId": body["id"], "provisioningStatus": "ready"},
        "outcome": "succeeded",
    }
    brand = sw_writer.get(f"/v2/orgs/{sw_writer.org.id}/brands/{body['id']}").json()
    assert brand["semrushProvisioningStatus"] == "ready"
    assert brand["semrushSubWorkspaceId"] == sim.state()["workspaces"][0]["id"]


def test_async_brand_create_with_market_runs_the_chain(sw_writer, sim, worker):
    response = sw_writer.post(
        f"/v2/orgs/{sw_writer.org.id}/brands",
        {
            "name": "Acme",
            "baseUrl": "https://acme.example",
            "async": True,
            "semrushMarket": {"market": "US", "languageCode": "en"},
        },
    )
    assert response.status_code == 202, response.json()
    final = poll_job(sw_writer, response["Location"])
    assert final["status"] == "COMPLETED", final
    assert final["result"]["status"] == 201
    assert final["result"]["outcome"] == "succeeded"
    assert [s["step"] for s in final["steps"]][-1] == "createMarket"
    assert len(sim.state()["projects"]) == 1
