"""SPEC §4's request checks, in order, on the brand routes (and the selector that applies them).

401 authenticationRequired → 400 invalidRequest → 404 notFound (org) → 403 forbidden →
404 brandNotFound → 404 serenityNotActive (B/serenity/* only) → the route's own rules.
"""

from __future__ import annotations

import uuid

import pytest
from rest_framework.test import APIClient

from serenity.exceptions import (
    BrandNotFoundError,
    NotAMemberError,
    OrganizationNotFoundError,
    SerenityNotActiveError,
)
from serenity.models import Role
from serenity.selectors import caller_scope_resolve
from serenity.services import api_token_create, api_token_revoke, user_ensure
from tests.factories import BrandFactory, OrganizationFactory

UNAUTHENTICATED = {
    "error": "authenticationRequired",
    "message": "Authentication credentials were not provided or are invalid.",
}
ORG_ID_NOT_UUID = {
    "error": "invalidRequest",
    "message": "orgId must be a UUID.",
    "details": {"field": "orgId"},
}
BRAND_ID_NOT_UUID = {
    "error": "invalidRequest",
    "message": "brandId must be a UUID.",
    "details": {"field": "brandId"},
}
ORG_NOT_FOUND = {"error": "notFound", "message": "Organization not found."}
FORBIDDEN = {"error": "forbidden", "message": "You are not allowed to act on this organization."}
BRAND_NOT_FOUND = {"error": "brandNotFound", "message": "Brand not found."}
NOT_FOUND = {"error": "notFound", "message": "Not found."}


def _iso(value) -> str:  # type: ignore[no-untyped-def]
    return value.isoformat().replace("+00:00", "Z")


def _brand_body(brand) -> dict:  # type: ignore[no-untyped-def,type-arg]
    return {
        "id": str(brand.id),
        "organizationId": str(brand.organization_id),
        "name": brand.name,
        "status": brand.status,
        "baseUrl": brand.base_url,
        "urls": [],
        "aliases": [],
        "serenityEnabled": None,
        "semrushSubWorkspaceId": None,
        "semrushProvisioningStatus": None,
        "semrushProvisioningError": None,
        "drift": None,
        "createdAt": _iso(brand.created_at),
        "updatedAt": _iso(brand.updated_at),
    }


def _client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def _assert_unauthenticated(response) -> None:  # type: ignore[no-untyped-def]
    assert response.status_code == 401
    assert response.json() == UNAUTHENTICATED
    assert response["WWW-Authenticate"] == "Bearer"


# --- 401 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", "/{brand}"])
def test_no_authorization_header_is_401(anonymous, org, suffix):
    # given
    brand = BrandFactory(organization=org)
    # when
    response = anonymous.get(f"/v2/orgs/{org.id}/brands" + suffix.format(brand=brand.id))
    # then
    _assert_unauthenticated(response)


@pytest.mark.parametrize("suffix", ["", "/{brand}"])
def test_unknown_token_is_401(org, writer, suffix):
    # given
    brand = BrandFactory(organization=org)
    client = _client("srn_not-a-real-token")
    # when
    response = client.get(f"/v2/orgs/{org.id}/brands" + suffix.format(brand=brand.id))
    # then
    _assert_unauthenticated(response)


@pytest.mark.parametrize(
    "header", ["Token abc", "Bearer", "Bearer  ", "Bearer a b", "Basic dXNlcjpwYXNz"]
)
def test_malformed_authorization_header_is_401(org, header):
    # given
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    # when
    response = client.get(f"/v2/orgs/{org.id}/brands")
    # then
    _assert_unauthenticated(response)


@pytest.mark.parametrize("suffix", ["", "/{brand}"])
def test_revoked_token_is_401(writer, suffix):
    # given a token that worked, then was revoked
    brand = BrandFactory(organization=writer.org)
    path = f"/v2/orgs/{writer.org.id}/brands" + suffix.format(brand=brand.id)
    assert writer.get(path).status_code == 200
    token, raw = api_token_create(user=writer.user)
    assert api_token_revoke(token_id=token.pk) is True
    # when
    response = _client(raw).get(path)
    # then
    _assert_unauthenticated(response)


def test_token_of_inactive_user_is_401(writer):
    # given
    writer.user.is_active = False
    writer.user.save(update_fields=["is_active"])
    # when
    response = writer.get(f"/v2/orgs/{writer.org.id}/brands")
    # then
    _assert_unauthenticated(response)


def test_bad_token_and_bad_uuid_is_401_not_400(org):
    # given
    client = _client("srn_wrong")
    # when
    responses = [
        client.get("/v2/orgs/not-a-uuid/brands"),
        client.get(f"/v2/orgs/{org.id}/brands/not-a-uuid"),
    ]
    # then
    for response in responses:
        _assert_unauthenticated(response)


def test_no_token_and_unknown_org_is_401_not_404(anonymous):
    # when
    response = anonymous.get(f"/v2/orgs/{uuid.uuid4()}/brands")
    # then
    _assert_unauthenticated(response)


# --- 400 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("org_id", ["not-a-uuid", "123", "00000000-0000-0000-0000-00000000000g"])
def test_org_id_not_a_uuid_is_400(writer, org_id):
    # when
    responses = [
        writer.get(f"/v2/orgs/{org_id}/brands"),
        writer.get(f"/v2/orgs/{org_id}/brands/{uuid.uuid4()}"),
    ]
    # then
    for response in responses:
        assert response.status_code == 400
        assert response.json() == ORG_ID_NOT_UUID


def test_brand_id_not_a_uuid_is_400(writer):
    # when
    response = writer.get(f"/v2/orgs/{writer.org.id}/brands/brand-1")
    # then
    assert response.status_code == 400
    assert response.json() == BRAND_ID_NOT_UUID


def test_bad_brand_id_under_unknown_org_is_400_before_404(writer):
    # when
    response = writer.get(f"/v2/orgs/{uuid.uuid4()}/brands/brand-1")
    # then
    assert response.status_code == 400
    assert response.json() == BRAND_ID_NOT_UUID


def test_bad_brand_id_of_non_member_is_400_before_403(writer):
    # given an org the caller is not a member of
    other = OrganizationFactory()
    # when
    response = writer.get(f"/v2/orgs/{other.id}/brands/brand-1")
    # then
    assert response.status_code == 400
    assert response.json() == BRAND_ID_NOT_UUID


# --- 404 org -----------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", f"/{uuid.uuid4()}"])
def test_unknown_org_is_404_not_found(writer, suffix):
    # when
    response = writer.get(f"/v2/orgs/{uuid.uuid4()}/brands" + suffix)
    # then
    assert response.status_code == 404
    assert response.json() == ORG_NOT_FOUND


def test_unknown_org_is_404_even_for_staff(db):
    # given
    staff = user_ensure(username="ops", staff=True)
    _, raw = api_token_create(user=staff)
    # when
    response = _client(raw).get(f"/v2/orgs/{uuid.uuid4()}/brands")
    # then
    assert response.status_code == 404
    assert response.json() == ORG_NOT_FOUND


# --- 403 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", "/{brand}"])
def test_non_member_is_403(writer, suffix):
    # given a brand in an org the caller does not belong to
    other = OrganizationFactory()
    brand = BrandFactory(organization=other)
    # when
    response = writer.get(f"/v2/orgs/{other.id}/brands" + suffix.format(brand=brand.id))
    # then
    assert response.status_code == 403
    assert response.json() == FORBIDDEN


def test_non_member_and_unknown_brand_is_403_before_brand_not_found(writer):
    # given
    other = OrganizationFactory()
    # when
    response = writer.get(f"/v2/orgs/{other.id}/brands/{uuid.uuid4()}")
    # then
    assert response.status_code == 403
    assert response.json() == FORBIDDEN


def test_reader_may_read(reader):
    # given
    brand = BrandFactory(organization=reader.org, name="Acme")
    # when
    listed = reader.get(f"/v2/orgs/{reader.org.id}/brands")
    read = reader.get(f"/v2/orgs/{reader.org.id}/brands/{brand.id}")
    # then
    assert listed.status_code == 200
    assert listed.json() == {"brands": [_brand_body(brand)], "nextCursor": None}
    assert read.status_code == 200
    assert read.json() == _brand_body(brand)


def test_reader_on_a_mutating_route_is_403(reader):
    # given: DELETE on the brand list is a mutating method; the role check comes before the 405
    # when
    response = reader.delete(f"/v2/orgs/{reader.org.id}/brands")
    # then
    assert response.status_code == 403
    assert response.json() == {
        "error": "forbidden",
        "message": "Your role does not allow changes in this organization.",
    }


def test_reader_patching_a_brand_is_403_and_changes_nothing(reader):
    # given
    brand = BrandFactory(organization=reader.org, base_url="https://before.example")
    # when
    response = reader.patch(
        f"/v2/orgs/{reader.org.id}/brands/{brand.id}", {"baseUrl": "https://after.example"}
    )
    # then
    assert response.status_code == 403
    assert response.json() == {
        "error": "forbidden",
        "message": "Your role does not allow changes in this organization.",
    }
    brand.refresh_from_db()
    assert brand.base_url == "https://before.example"


def test_reader_patching_a_foreign_brand_is_403_before_brand_not_found(reader):
    # given
    foreign = BrandFactory(organization=OrganizationFactory())
    # when
    response = reader.patch(f"/v2/orgs/{reader.org.id}/brands/{foreign.id}", {"urls": []})
    # then
    assert response.status_code == 403


def test_selector_refuses_a_reader_on_a_write(reader):
    # when / then
    with pytest.raises(NotAMemberError) as excinfo:
        caller_scope_resolve(user=reader.user, org_id=str(reader.org.id), write=True)
    assert excinfo.value.code == "forbidden"
    assert excinfo.value.http_status == 403


def test_selector_lets_a_writer_write(writer):
    # when
    scope = caller_scope_resolve(user=writer.user, org_id=str(writer.org.id), write=True)
    # then
    assert scope.organization == writer.org
    assert scope.role == Role.WRITER
    assert scope.brand is None


# --- 404 brandNotFound -------------------------------------------------------------------------


def test_brand_of_another_org_is_404_brand_not_found(writer):
    # given a brand that exists, in an org the caller does not belong to
    foreign = BrandFactory(organization=OrganizationFactory())
    # when
    response = writer.get(f"/v2/orgs/{writer.org.id}/brands/{foreign.id}")
    # then
    assert response.status_code == 404
    assert response.json() == BRAND_NOT_FOUND


def test_unknown_brand_is_404_brand_not_found(writer):
    # when
    response = writer.get(f"/v2/orgs/{writer.org.id}/brands/{uuid.uuid4()}")
    # then
    assert response.status_code == 404
    assert response.json() == BRAND_NOT_FOUND


def test_deleted_brand_is_readable_on_the_brand_route(writer):
    # given
    brand = BrandFactory(organization=writer.org, status="deleted")
    # when
    response = writer.get(f"/v2/orgs/{writer.org.id}/brands/{brand.id}")
    # then
    assert response.status_code == 200
    assert response.json() == _brand_body(brand)


# --- staff -------------------------------------------------------------------------------------


def test_staff_token_acts_on_every_org(db):
    # given two orgs the staff user is not a member of
    staff = user_ensure(username="ops", staff=True)
    _, raw = api_token_create(user=staff)
    first = BrandFactory(organization=OrganizationFactory(), name="One")
    second = BrandFactory(organization=OrganizationFactory(), name="Two")
    client = _client(raw)
    # when
    responses = [
        client.get(f"/v2/orgs/{first.organization_id}/brands"),
        client.get(f"/v2/orgs/{second.organization_id}/brands/{second.id}"),
    ]
    # then
    assert [r.status_code for r in responses] == [200, 200]
    assert responses[0].json() == {"brands": [_brand_body(first)], "nextCursor": None}
    assert responses[1].json() == _brand_body(second)
    # and staff write on any org
    scope = caller_scope_resolve(user=staff, org_id=str(first.organization_id), write=True)
    assert scope.role == Role.WRITER


# --- 404 serenityNotActive (selector: the B/serenity/* routes are built on it) ------------------


@pytest.mark.parametrize(
    ("org_flag", "override", "active"),
    [
        (True, None, True),
        (False, None, False),
        (True, True, True),
        (False, True, True),
        (True, False, False),
        (False, False, False),
    ],
)
def test_serenity_active_is_the_brand_override_else_the_org_flag(
    writer, org_flag, override, active
):
    # given
    writer.org.serenity_enabled = org_flag
    writer.org.save(update_fields=["serenity_enabled"])
    brand = BrandFactory(organization=writer.org, serenity_enabled=override)

    def resolve():  # type: ignore[no-untyped-def]
        return caller_scope_resolve(
            user=writer.user,
            org_id=str(writer.org.id),
            brand_id=str(brand.id),
            write=False,
            serenity_route=True,
            require_serenity_active=True,
        )

    # when / then
    if active:
        assert resolve().brand == brand
    else:
        with pytest.raises(SerenityNotActiveError) as excinfo:
            resolve()
        assert excinfo.value.code == "serenityNotActive"
        assert excinfo.value.http_status == 404


def test_serenity_route_answers_serenity_not_active_over_http(writer):
    # given Serenity off for the org, on for one brand by override
    writer.org.serenity_enabled = False
    writer.org.save(update_fields=["serenity_enabled"])
    off = BrandFactory(organization=writer.org)
    on = BrandFactory(organization=writer.org, serenity_enabled=True)
    gone = BrandFactory(organization=writer.org, status="deleted", serenity_enabled=True)
    base = f"/v2/orgs/{writer.org.id}/brands"
    # when
    refused = writer.get(f"{base}/{off.id}/serenity/markets")
    allowed = writer.get(f"{base}/{on.id}/serenity/markets")
    deleted = writer.get(f"{base}/{gone.id}/serenity/markets")
    # then
    assert refused.status_code == 404
    assert refused.json() == {
        "error": "serenityNotActive",
        "message": "Serenity is not active for this brand.",
    }
    assert allowed.status_code == 200
    assert allowed.json() == {"items": [], "nextCursor": None}
    assert deleted.status_code == 404
    assert deleted.json() == BRAND_NOT_FOUND


def test_non_member_on_a_serenity_off_brand_is_403_before_serenity_not_active(writer):
    # given
    other = OrganizationFactory(serenity_enabled=False)
    brand = BrandFactory(organization=other)
    # when
    response = writer.get(f"/v2/orgs/{other.id}/brands/{brand.id}/serenity/markets")
    # then
    assert response.status_code == 403
    assert response.json() == FORBIDDEN


def test_serenity_check_is_skipped_where_the_route_does_not_require_it(writer):
    # given Serenity off for the brand (e.g. job polling, cancel, deactivate)
    brand = BrandFactory(organization=writer.org, serenity_enabled=False)
    # when
    scope = caller_scope_resolve(
        user=writer.user,
        org_id=str(writer.org.id),
        brand_id=str(brand.id),
        write=True,
        serenity_route=True,
        require_serenity_active=False,
    )
    # then
    assert scope.brand == brand


def test_deleted_brand_on_a_serenity_route_is_brand_not_found_before_serenity(writer):
    # given a deleted brand with Serenity off
    brand = BrandFactory(organization=writer.org, status="deleted", serenity_enabled=False)
    # when / then
    with pytest.raises(BrandNotFoundError):
        caller_scope_resolve(
            user=writer.user,
            org_id=str(writer.org.id),
            brand_id=str(brand.id),
            write=False,
            serenity_route=True,
            require_serenity_active=True,
        )


def test_selector_order_org_before_membership_before_brand(writer):
    # given
    other = OrganizationFactory()
    # when / then: unknown org beats "not a member"
    with pytest.raises(OrganizationNotFoundError):
        caller_scope_resolve(
            user=writer.user, org_id=str(uuid.uuid4()), brand_id=str(uuid.uuid4()), write=True
        )
    # and "not a member" beats an unknown brand
    with pytest.raises(NotAMemberError):
        caller_scope_resolve(
            user=writer.user, org_id=str(other.id), brand_id=str(uuid.uuid4()), write=False
        )


def test_selector_validates_every_path_id_before_the_org(writer):
    # when / then: a bad jobId or geoTargetId under an unknown org is still a 400
    with pytest.raises(Exception) as excinfo:
        caller_scope_resolve(
            user=writer.user,
            org_id=str(uuid.uuid4()),
            brand_id=str(uuid.uuid4()),
            extra_uuids={"jobId": "job-1"},
            write=False,
        )
    assert excinfo.value.as_body() == {
        "error": "invalidRequest",
        "message": "jobId must be a UUID.",
        "details": {"field": "jobId"},
    }  # type: ignore[attr-defined]
    with pytest.raises(Exception) as excinfo:
        caller_scope_resolve(
            user=writer.user,
            org_id=str(uuid.uuid4()),
            brand_id=str(uuid.uuid4()),
            geo_target_id="US",
            write=False,
        )
    assert excinfo.value.as_body() == {  # type: ignore[attr-defined]
        "error": "invalidRequest",
        "message": "geoTargetId must be digits.",
        "details": {"field": "geoTargetId"},
    }


# --- framework errors and the route's own rules -------------------------------------------------


def test_unknown_route_is_404_not_found_envelope(writer):
    # when
    responses = [writer.get("/v2/nothing-here"), writer.get("/v2/orgs"), APIClient().get("/nope")]
    # then
    for response in responses:
        assert response.status_code == 404
        assert response.json() == NOT_FOUND


def test_wrong_method_is_405(writer):
    # given
    brand = BrandFactory(organization=writer.org)
    # when
    responses = [
        writer.delete(f"/v2/orgs/{writer.org.id}/brands"),
        writer.client.put(f"/v2/orgs/{writer.org.id}/brands/{brand.id}", {}, format="json"),
    ]
    # then
    for response in responses:
        assert response.status_code == 405
        assert response.json() == {"error": "methodNotAllowed", "message": "Method not allowed."}


def test_unknown_status_filter_is_400(writer):
    # when
    response = writer.get(f"/v2/orgs/{writer.org.id}/brands?status=bogus")
    # then
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalidRequest",
        "message": 'status: "bogus" is not a valid choice.',
        "details": {"field": "status"},
    }


def test_status_deleted_lists_only_deleted_brands(writer):
    # given
    BrandFactory(organization=writer.org, name="Live")
    gone = BrandFactory(organization=writer.org, name="Gone", status="deleted")
    draft = BrandFactory(organization=writer.org, name="Draft", status="pending")
    # when
    deleted = writer.get(f"/v2/orgs/{writer.org.id}/brands?status=deleted")
    pending = writer.get(f"/v2/orgs/{writer.org.id}/brands?status=pending")
    # then
    assert deleted.status_code == 200
    assert deleted.json() == {"brands": [_brand_body(gone)], "nextCursor": None}
    assert pending.json() == {"brands": [_brand_body(draft)], "nextCursor": None}


def test_list_shows_only_the_orgs_own_brands(writer):
    # given
    mine = BrandFactory(organization=writer.org, name="Mine")
    BrandFactory(organization=OrganizationFactory(), name="Theirs")
    # when
    response = writer.get(f"/v2/orgs/{writer.org.id}/brands")
    # then
    assert response.status_code == 200
    assert response.json() == {"brands": [_brand_body(mine)], "nextCursor": None}


@pytest.mark.parametrize("path", ["/healthz", "/api/schema/"])
def test_public_routes_need_no_token(anonymous, db, path):
    # when
    response = anonymous.get(path)
    # then
    assert response.status_code == 200


def test_healthz_body(anonymous):
    # when
    response = anonymous.get("/healthz")
    # then
    assert response.json() == {"status": "ok"}
