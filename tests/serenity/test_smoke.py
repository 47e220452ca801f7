from tests.factories import BrandFactory


def test_brand_list_returns_live_brands_by_name(writer):
    # given
    b = BrandFactory(organization=writer.org, name="Zeta")
    a = BrandFactory(organization=writer.org, name="Alpha")
    BrandFactory(organization=writer.org, name="Gone", status="deleted")
    # when
    response = writer.get(f"/v2/orgs/{writer.org.id}/brands")
    # then
    assert response.status_code == 200
    assert [x["id"] for x in response.json()["brands"]] == [str(a.id), str(b.id)]
    assert response.json()["brands"][0]["semrushProvisioningStatus"] is None
