"""Unit tests for the Semrush client: upstream faked with `responses`, time faked by injection.

No database and no Django settings are needed: the settings factory is tested against a stand-in
settings object.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from types import SimpleNamespace
from urllib.parse import parse_qsl, urlsplit

import django.conf
import pytest
import requests
import responses
from requests.exceptions import ConnectionError, ConnectTimeout, ReadTimeout
from responses import matchers

from provisioning.semrush import (
    SemrushAuthError,
    SemrushClient,
    SemrushConfigurationError,
    SemrushConflictError,
    SemrushError,
    SemrushForbiddenError,
    SemrushGoneError,
    SemrushNetworkError,
    SemrushNotFoundError,
    SemrushQuotaError,
    SemrushRateLimitedError,
    SemrushServerError,
    SemrushTimeoutError,
    SemrushUnauthorizedError,
    SemrushUnexpectedResponseError,
    SemrushValidationError,
    semrush_client_for,
)
from provisioning.semrush.contract import request_problems

BASE = "https://semrush.test"
UM = f"{BASE}/enterprise/users/api"
PE = f"{BASE}/enterprise/projects/api"
TOKEN = "tok-Very-Secret-0123456789abcdef"
WALL_NOW = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)

PARENT = "parent-ws-1"
WS = "child-ws-1"
PID = "project-1"
PROJECT_URL = f"{PE}/v1/workspaces/{WS}/projects/{PID}"
PROMPTS_URL = f"{PE}/v3/workspaces/{WS}/projects/{PID}/aio/prompts/tagged"


def sent_request_problems(request: requests.PreparedRequest) -> list[str]:
    """How a request the client prepared breaks the contract description (SPEC §12.1)."""
    parts = urlsplit(request.url or "")
    body = json.loads(request.body) if request.body else None
    return request_problems(str(request.method), parts.path, dict(parse_qsl(parts.query)), body)


@pytest.fixture(autouse=True)
def requests_keep_the_contract(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every request the client sends in this module is recorded as prepared (below
    ``Session.send``, where `responses` answers it) and, after the test, checked against the
    contract description."""
    sent: list[requests.PreparedRequest] = []
    send = requests.Session.send

    def recording_send(
        self: requests.Session, request: requests.PreparedRequest, **kwargs: object
    ) -> requests.Response:
        sent.append(request)
        return send(self, request, **kwargs)

    monkeypatch.setattr(requests.Session, "send", recording_send)
    yield
    problems = [f"{r.method} {r.url}: {p}" for r in sent for p in sent_request_problems(r)]
    assert problems == []


class FakeTime:
    """A clock that only moves when the client sleeps; records every wait."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


@pytest.fixture
def semrush(fake_time: FakeTime) -> SemrushClient:
    return SemrushClient(
        base_url=BASE,
        token=TOKEN,
        clock=fake_time.clock,
        sleep=fake_time.sleep,
        jitter=lambda: 0.0,
        log_context={"org_id": "org-1", "brand_id": "brand-1"},
        wall_clock=WALL_NOW.timestamp,
    )


def _semrush_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "serenity.semrush"]


def _everything_logged(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(f"{r.getMessage()} {json.dumps(vars(r), default=str)}" for r in caplog.records)


# ------------------------------------------------------------------------------ request shapes


@responses.activate
def test_every_call_sends_bearer_token_and_an_explicit_timeout(semrush: SemrushClient) -> None:
    # given
    responses.add(responses.GET, f"{UM}/v1/workspaces/{WS}/status", json={"status": "created"})

    # when
    semrush.get_workspace_status(workspace_id=WS)

    # then
    request = responses.calls[0].request
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert request.headers["Accept"] == "application/json"
    assert "Auth-Data-Jwt" not in request.headers
    assert request.req_kwargs["timeout"] == (15.0, 15.0)


@responses.activate
def test_create_subworkspace_posts_title_and_empty_resources(semrush: SemrushClient) -> None:
    # given
    created = {"id": "ws-new", "title": "Acme", "status": "not ready", "parent_id": PARENT}
    responses.add(responses.POST, f"{UM}/v2/workspaces/{PARENT}/child", json=created, status=200)

    # when
    result = semrush.create_subworkspace(parent_id=PARENT, title="Acme")

    # then
    assert result == created
    request = responses.calls[0].request
    assert json.loads(request.body) == {"title": "Acme", "resources": {}}
    assert request.headers["Content-Type"] == "application/json"


@responses.activate
def test_get_workspace_status_returns_the_status_string(semrush: SemrushClient) -> None:
    # given
    responses.add(responses.GET, f"{UM}/v1/workspaces/{WS}/status", json={"status": "not ready"})

    # when
    status = semrush.get_workspace_status(workspace_id=WS)

    # then
    assert status == "not ready"


@responses.activate
def test_list_family_returns_the_bare_array(semrush: SemrushClient) -> None:
    # given
    family = [
        {"id": PARENT, "title": "Org", "status": "created", "parent_id": None},
        {"id": WS, "title": "Acme", "status": "created", "parent_id": PARENT},
    ]
    responses.add(responses.GET, f"{UM}/v1/workspaces/{PARENT}/family", json=family)

    # when
    result = semrush.list_family(parent_id=PARENT)

    # then
    assert result == family


def _family_body(*titles: str) -> bytes:
    rows = [{"id": PARENT, "title": "Org", "status": "created", "parent_id": None}]
    rows += [
        {"id": f"ws-{i}", "title": t, "status": "created", "parent_id": PARENT}
        for i, t in enumerate(titles)
    ]
    return json.dumps(rows, ensure_ascii=False).encode()


@responses.activate
@pytest.mark.parametrize(
    ("body", "decoded"),
    [
        # the title as it is, or in other case and with spaces around it
        (_family_body("Other", "Acme"), True),
        (_family_body("Other", "  ACME "), True),
        # the title spelled with an escape: the text is decoded, not searched
        (b'[{"id": "ws-0", "title": "\\u0041cme", "status": "created"}]', True),
        # a non-ASCII title anywhere: decoded, even without the one wanted
        (_family_body("Caf\u00e9", "Acme"), True),
        (_family_body("Caf\u00e9"), True),
        (_family_body("Other", "Acme Labs"), True),
        (_family_body("Other", "Beta"), False),
    ],
)
def test_list_family_with_a_title_decodes_a_listing_that_could_hold_it(
    semrush: SemrushClient, body: bytes, decoded: bool
) -> None:
    # given
    responses.add(responses.GET, f"{UM}/v1/workspaces/{PARENT}/family", body=body)
    # when
    result = semrush.list_family(parent_id=PARENT, titled="Acme")
    # then: the whole family when the text could hold the title (the caller matches), else none
    assert result == (json.loads(body) if decoded else [])


@responses.activate
def test_list_family_with_a_title_answers_none_for_an_ascii_listing_without_it(
    semrush: SemrushClient,
) -> None:
    # given: a family of a thousand other brands (a bare array, ASCII, no escapes)
    responses.add(
        responses.GET,
        f"{UM}/v1/workspaces/{PARENT}/family",
        body=_family_body(*(f"Brand {i}" for i in range(1000))),
    )
    # when / then: nothing of that title, the same as the decoded listing says
    assert semrush.list_family(parent_id=PARENT, titled="Acme") == []
    assert semrush.list_family(parent_id=PARENT, titled="Brand 999") != []


@responses.activate
@pytest.mark.parametrize(
    "body",
    [b'{"items": []}', b"<html>gateway error</html>", b'[{"id": "ws-1", "title": "Beta"'],
)
def test_list_family_with_a_title_still_rejects_what_is_not_a_listing(
    semrush: SemrushClient, body: bytes
) -> None:
    # given: not a bare array of objects (an envelope, an error page, a truncated array)
    responses.add(responses.GET, f"{UM}/v1/workspaces/{PARENT}/family", body=body)
    # when / then
    with pytest.raises(SemrushUnexpectedResponseError):
        semrush.list_family(parent_id=PARENT, titled="Acme")


@responses.activate
def test_list_projects_follows_pagination_until_total(semrush: SemrushClient) -> None:
    # given
    url = f"{PE}/v1/workspaces/{WS}/projects"
    responses.add(
        responses.GET,
        url,
        json={"page": 1, "total": 3, "items": [{"id": "p1"}, {"id": "p2"}]},
        match=[matchers.query_param_matcher({"type": "ai"})],
    )
    responses.add(
        responses.GET,
        url,
        json={"page": 2, "total": 3, "items": [{"id": "p3"}]},
        match=[matchers.query_param_matcher({"type": "ai", "page": "2"})],
    )

    # when
    items = semrush.list_projects(workspace_id=WS)

    # then
    assert items == [{"id": "p1"}, {"id": "p2"}, {"id": "p3"}]
    assert len(responses.calls) == 2


@responses.activate
def test_list_projects_of_an_empty_workspace_is_one_call(semrush: SemrushClient) -> None:
    # given
    responses.add(
        responses.GET,
        f"{PE}/v1/workspaces/{WS}/projects",
        json={"page": 1, "total": 0, "items": []},
    )

    # when
    items = semrush.list_projects(workspace_id=WS)

    # then
    assert items == []
    assert len(responses.calls) == 1


@responses.activate
def test_create_project_sends_the_spec_body(semrush: SemrushClient) -> None:
    # given
    created = {"id": PID, "name": "US-en", "publish_status": "draft"}
    responses.add(responses.POST, f"{PE}/v1/workspaces/{WS}/projects", json=created, status=201)

    # when
    result = semrush.create_project(
        workspace_id=WS,
        name="US-en",
        location_id=2840,
        language="lang-uuid-en",
        brand_names=["Acme", "Acme Inc", "Acme"],
        brand_domain="acme.com",
        country_code="US",
        location_name="United States",
    )

    # then
    assert result == created
    assert json.loads(responses.calls[0].request.body) == {
        "name": "US-en",
        "type": "ai",
        "domain": "acme.com",
        "location_id": 2840,
        "language_id": "lang-uuid-en",
        "brand_name_display": "Acme",
        "brand_names": ["Acme", "Acme Inc"],
        "country_code": "us",
        "location_name": "United States",
    }


@responses.activate
def test_set_tracked_url_patches_flat_type_and_primary_url(semrush: SemrushClient) -> None:
    # given
    responses.add(responses.PATCH, PROJECT_URL, json={"id": PID})

    # when
    result = semrush.set_tracked_url(
        workspace_id=WS, project_id=PID, primary_url="https://www.acme.com/us"
    )

    # then
    assert result == {"id": PID}
    assert json.loads(responses.calls[0].request.body) == {
        "type": "ai",
        "primary_url": "https://www.acme.com/us",
    }


@responses.activate
def test_publish_project_accepts_an_empty_202(semrush: SemrushClient) -> None:
    # given
    responses.add(responses.POST, f"{PROJECT_URL}/publish", body="", status=202)

    # when
    result = semrush.publish_project(workspace_id=WS, project_id=PID)

    # then
    assert result is None
    assert responses.calls[0].request.body is None


@responses.activate
def test_get_project_reads_the_draft_view(semrush: SemrushClient) -> None:
    # given
    project = {"id": PID, "publish_status": "live"}
    responses.add(
        responses.GET,
        PROJECT_URL,
        json=project,
        match=[matchers.query_param_matcher({"draft": "true", "type": "ai"})],
    )

    # when
    result = semrush.get_project(workspace_id=WS, project_id=PID)

    # then
    assert result == project


@responses.activate
def test_delete_project_returns_true_when_it_deleted(semrush: SemrushClient) -> None:
    # given
    responses.add(responses.DELETE, PROJECT_URL, status=204)

    # when
    deleted = semrush.delete_project(workspace_id=WS, project_id=PID)

    # then
    assert deleted is True


@responses.activate
def test_delete_project_404_counts_as_success(semrush: SemrushClient) -> None:
    # given
    responses.add(responses.DELETE, PROJECT_URL, json={"message": "not found"}, status=404)

    # when
    deleted = semrush.delete_project(workspace_id=WS, project_id=PID)

    # then
    assert deleted is False
    assert len(responses.calls) == 1


@responses.activate
def test_list_languages_returns_items(semrush: SemrushClient) -> None:
    # given
    catalog = [{"id": "uuid-en", "name": "English"}, {"id": "uuid-de", "name": "German"}]
    responses.add(responses.GET, f"{PE}/v1/languages", json={"items": catalog})

    # when
    result = semrush.list_languages()

    # then
    assert result == catalog


@responses.activate
def test_add_prompts_posts_names_and_tags_to_the_v3_tagged_route(semrush: SemrushClient) -> None:
    # given
    prompts = [
        {"name": "best running shoes", "tags": ["shoes"]},
        {"name": "running shoes for kids", "tags": []},
    ]
    items = [
        {"id": "p-1", "name": "best running shoes", "is_new": True},
        {"id": "p-0", "name": "running shoes for kids", "is_new": False},
    ]
    responses.add(
        responses.POST, PROMPTS_URL, json={"items": items, "existing_count": 1}, status=201
    )

    # when
    result = semrush.add_prompts(workspace_id=WS, project_id=PID, prompts=prompts)

    # then the answer's items come back
    assert result == items
    assert responses.calls[0].request.url == PROMPTS_URL
    assert json.loads(responses.calls[0].request.body) == {"prompts": prompts}


@responses.activate
def test_add_prompts_accepted_without_a_body_returns_no_items(semrush: SemrushClient) -> None:
    # given
    responses.add(responses.POST, PROMPTS_URL, body="", status=201)

    # when
    result = semrush.add_prompts(workspace_id=WS, project_id=PID, prompts=[{"name": "x"}])

    # then
    assert result == []


def test_a_request_breaking_the_contract_is_reported() -> None:
    # given requests as revision 5 sent them: prompts to the v1 route, then with `text`
    old_route = requests.Request(
        "POST", f"{PROJECT_URL}/prompts", json={"prompts": [{"text": "x"}]}
    ).prepare()
    old_body = requests.Request("POST", PROMPTS_URL, json={"prompts": [{"text": "x"}]}).prepare()
    no_draft = requests.Request("GET", PROJECT_URL, params={"type": "ai"}).prepare()

    # when they are checked, then each difference is named
    assert sent_request_problems(old_route) == [
        f"POST {urlsplit(PROJECT_URL).path}/prompts is not an operation of the contract"
    ]
    assert sent_request_problems(old_body) == ["body.prompts[0]: 'name' is a required property"]
    assert sent_request_problems(no_draft) == ["query: 'draft' is required"]


# ------------------------------------------------------------------------------ error classes


@responses.activate
def test_400_raises_validation_error(semrush: SemrushClient) -> None:
    # given
    responses.add(
        responses.POST,
        f"{PE}/v1/workspaces/{WS}/projects",
        body="domain: must not contain a path",
        status=400,
        content_type="text/plain",
    )

    # when
    with pytest.raises(SemrushValidationError) as caught:
        semrush.create_project(
            workspace_id=WS,
            name="US-en",
            location_id=2840,
            language="uuid-en",
            brand_names=["Acme"],
            brand_domain="acme.com/path",
        )

    # then
    assert caught.value.status == 400
    assert caught.value.operation == "create_project"
    assert caught.value.detail == "domain: must not contain a path"
    assert caught.value.ambiguous is False
    assert len(responses.calls) == 1


@responses.activate
def test_422_raises_validation_error(semrush: SemrushClient) -> None:
    # given
    responses.add(
        responses.POST,
        f"{UM}/v2/workspaces/{PARENT}/child",
        json={"message": "insufficient available units in subscription"},
        status=422,
    )

    # when
    with pytest.raises(SemrushValidationError) as caught:
        semrush.create_subworkspace(parent_id=PARENT, title="Acme")

    # then
    assert caught.value.status == 422
    assert caught.value.retryable is False


@responses.activate
def test_401_raises_unauthorized_error(semrush: SemrushClient) -> None:
    # given
    responses.add(
        responses.GET,
        f"{UM}/v1/workspaces/{PARENT}/family",
        json={"detail": "Not authenticated"},
        status=401,
    )

    # when
    with pytest.raises(SemrushUnauthorizedError) as caught:
        semrush.list_family(parent_id=PARENT)

    # then
    assert caught.value.status == 401
    assert isinstance(caught.value, SemrushAuthError)
    assert caught.value.safe_message() == "Upstream authorization failed"
    assert len(responses.calls) == 1


@responses.activate
def test_403_on_a_workspace_not_owned_raises_forbidden(semrush: SemrushClient) -> None:
    # given
    responses.add(
        responses.GET,
        f"{UM}/v1/workspaces/{WS}/status",
        json={"message": "invalid access attempt"},
        status=403,
    )

    # when
    with pytest.raises(SemrushForbiddenError) as caught:
        semrush.get_workspace_status(workspace_id=WS)

    # then
    assert caught.value.status == 403
    assert len(responses.calls) == 1


@responses.activate
def test_403_on_an_owned_workspace_raises_gone(semrush: SemrushClient) -> None:
    # given
    responses.add(
        responses.GET,
        f"{UM}/v1/workspaces/{WS}/status",
        json={"message": "invalid access attempt"},
        status=403,
    )

    # when
    with pytest.raises(SemrushGoneError) as caught:
        semrush.get_workspace_status(workspace_id=WS, owned=True)

    # then
    assert caught.value.status == 403
    assert not isinstance(caught.value, SemrushForbiddenError)
    assert len(responses.calls) == 1


@responses.activate
def test_404_raises_not_found(semrush: SemrushClient) -> None:
    # given
    responses.add(responses.GET, PROJECT_URL, json={"message": "not found"}, status=404)

    # when
    with pytest.raises(SemrushNotFoundError) as caught:
        semrush.get_project(workspace_id=WS, project_id=PID)

    # then
    assert caught.value.status == 404
    assert len(responses.calls) == 1


@responses.activate
def test_409_raises_conflict(semrush: SemrushClient) -> None:
    # given
    responses.add(
        responses.POST,
        PROMPTS_URL,
        body="prompt already exists",
        status=409,
        content_type="text/plain",
    )

    # when
    with pytest.raises(SemrushConflictError) as caught:
        semrush.add_prompts(workspace_id=WS, project_id=PID, prompts=[{"name": "x"}])

    # then
    assert caught.value.status == 409
    assert len(responses.calls) == 1


@responses.activate
def test_disguised_html_405_on_publish_raises_quota_error_without_retry(
    semrush: SemrushClient, fake_time: FakeTime
) -> None:
    # given
    responses.add(
        responses.POST,
        f"{PROJECT_URL}/publish",
        body="<html><head><title>405 Not Allowed</title></head><body>nginx</body></html>",
        status=405,
        content_type="text/html",
    )

    # when
    with pytest.raises(SemrushQuotaError) as caught:
        semrush.publish_project(workspace_id=WS, project_id=PID)

    # then
    assert caught.value.status == 405
    assert caught.value.retryable is False
    assert len(responses.calls) == 1
    assert fake_time.waits == []


@responses.activate
def test_json_405_is_a_plain_error_not_quota(semrush: SemrushClient) -> None:
    # given
    responses.add(
        responses.POST,
        f"{PROJECT_URL}/publish",
        json={"message": "method not allowed"},
        status=405,
    )

    # when
    with pytest.raises(SemrushError) as caught:
        semrush.publish_project(workspace_id=WS, project_id=PID)

    # then
    assert type(caught.value) is SemrushError
    assert caught.value.status == 405


@responses.activate
def test_429_exhausted_raises_rate_limited_with_retry_after(
    semrush: SemrushClient, fake_time: FakeTime
) -> None:
    # given
    responses.add(
        responses.GET, f"{PE}/v1/languages", status=429, headers={"Retry-After": "2"}, body=""
    )

    # when
    with pytest.raises(SemrushRateLimitedError) as caught:
        semrush.list_languages()

    # then
    assert caught.value.status == 429
    assert caught.value.retry_after == 2.0
    assert caught.value.retryable is True
    assert len(responses.calls) == 3
    assert fake_time.waits == [2.0, 2.0]


@responses.activate
def test_500_on_get_exhausted_raises_server_error_after_exactly_three_calls(
    semrush: SemrushClient, fake_time: FakeTime
) -> None:
    # given
    responses.add(responses.GET, PROJECT_URL, json={"message": "internal server error"}, status=500)

    # when
    with pytest.raises(SemrushServerError) as caught:
        semrush.get_project(workspace_id=WS, project_id=PID)

    # then
    assert caught.value.status == 500
    assert caught.value.ambiguous is False
    assert len(responses.calls) == 3
    # equal jitter with jitter() == 0: 0.2 s * 2**n * 0.5
    assert fake_time.waits == [0.1, 0.2]


@responses.activate
def test_read_timeout_raises_timeout_error(semrush: SemrushClient) -> None:
    # given
    responses.add(responses.POST, f"{UM}/v2/workspaces/{PARENT}/child", body=ReadTimeout("slow"))

    # when
    with pytest.raises(SemrushTimeoutError) as caught:
        semrush.create_subworkspace(parent_id=PARENT, title="Acme")

    # then
    assert caught.value.status is None
    assert isinstance(caught.value, SemrushNetworkError)
    assert caught.value.detail == "ReadTimeout: slow"


@responses.activate
def test_connection_reset_raises_network_error(semrush: SemrushClient) -> None:
    # given
    responses.add(responses.POST, PROMPTS_URL, body=ConnectionError("connection reset by peer"))

    # when
    with pytest.raises(SemrushNetworkError) as caught:
        semrush.add_prompts(workspace_id=WS, project_id=PID, prompts=[{"name": "x"}])

    # then
    assert type(caught.value) is SemrushNetworkError
    assert caught.value.ambiguous is True
    assert len(responses.calls) == 1


@responses.activate
def test_success_with_a_non_json_body_raises_unexpected_response(semrush: SemrushClient) -> None:
    # given
    responses.add(
        responses.GET, f"{UM}/v1/workspaces/{WS}/status", body="<html>ok</html>", status=200
    )

    # when
    with pytest.raises(SemrushUnexpectedResponseError) as caught:
        semrush.get_workspace_status(workspace_id=WS)

    # then
    assert caught.value.status == 200


@responses.activate
def test_error_str_names_operation_and_status_without_ids_or_body(semrush: SemrushClient) -> None:
    # given
    responses.add(responses.GET, PROJECT_URL, json={"message": "not found"}, status=404)

    # when
    with pytest.raises(SemrushNotFoundError) as caught:
        semrush.get_project(workspace_id=WS, project_id=PID)

    # then
    assert str(caught.value) == "Semrush object not found: get_project (HTTP 404)"
    assert caught.value.safe_message() == "Upstream request failed"
    assert caught.value.path == f"/enterprise/projects/api/v1/workspaces/{WS}/projects/{PID}"


# ------------------------------------------------------------------------------ retry policy


@responses.activate
def test_get_5xx_is_retried_then_succeeds(semrush: SemrushClient, fake_time: FakeTime) -> None:
    # given
    url = f"{UM}/v1/workspaces/{WS}/status"
    responses.add(responses.GET, url, body="bad gateway", status=502)
    responses.add(responses.GET, url, json={"status": "created"})

    # when
    status = semrush.get_workspace_status(workspace_id=WS)

    # then
    assert status == "created"
    assert len(responses.calls) == 2
    assert fake_time.waits == [0.1]


@responses.activate
def test_post_5xx_is_not_retried(semrush: SemrushClient, fake_time: FakeTime) -> None:
    # given
    responses.add(
        responses.POST, f"{PE}/v1/workspaces/{WS}/projects", body="unavailable", status=503
    )

    # when
    with pytest.raises(SemrushServerError) as caught:
        semrush.create_project(
            workspace_id=WS,
            name="US-en",
            location_id=2840,
            language="uuid-en",
            brand_names=["Acme"],
            brand_domain="acme.com",
        )

    # then
    assert caught.value.status == 503
    assert caught.value.ambiguous is True
    assert len(responses.calls) == 1
    assert fake_time.waits == []


@responses.activate
def test_post_that_times_out_is_not_retried_and_is_reported_ambiguous(
    semrush: SemrushClient, fake_time: FakeTime
) -> None:
    # given
    responses.add(
        responses.POST, f"{UM}/v2/workspaces/{PARENT}/child", body=ReadTimeout("read timed out")
    )

    # when
    with pytest.raises(SemrushTimeoutError) as caught:
        semrush.create_subworkspace(parent_id=PARENT, title="Acme")

    # then
    assert caught.value.ambiguous is True
    assert caught.value.operation == "create_subworkspace"
    assert len(responses.calls) == 1
    assert fake_time.waits == []


@responses.activate
def test_post_connect_timeout_is_not_retried_and_not_ambiguous(
    semrush: SemrushClient, fake_time: FakeTime
) -> None:
    # given: the connection was never established, so nothing reached Semrush
    responses.add(responses.POST, f"{PROJECT_URL}/publish", body=ConnectTimeout("connect"))

    # when
    with pytest.raises(SemrushTimeoutError) as caught:
        semrush.publish_project(workspace_id=WS, project_id=PID)

    # then
    assert caught.value.ambiguous is False
    assert len(responses.calls) == 1
    assert fake_time.waits == []


@responses.activate
def test_get_timeout_is_retried(semrush: SemrushClient, fake_time: FakeTime) -> None:
    # given
    url = f"{UM}/v1/workspaces/{PARENT}/family"
    responses.add(responses.GET, url, body=ReadTimeout("read timed out"))
    responses.add(responses.GET, url, json=[])

    # when
    family = semrush.list_family(parent_id=PARENT)

    # then
    assert family == []
    assert len(responses.calls) == 2
    assert fake_time.waits == [0.1]


@responses.activate
def test_get_timeout_exhausted_raises_timeout_not_ambiguous(
    semrush: SemrushClient, fake_time: FakeTime
) -> None:
    # given
    responses.add(responses.GET, f"{UM}/v1/workspaces/{WS}/status", body=ReadTimeout("slow"))

    # when
    with pytest.raises(SemrushTimeoutError) as caught:
        semrush.get_workspace_status(workspace_id=WS)

    # then
    assert caught.value.ambiguous is False
    assert len(responses.calls) == 3


@responses.activate
def test_patch_5xx_is_retried_as_idempotent(semrush: SemrushClient, fake_time: FakeTime) -> None:
    # given
    responses.add(responses.PATCH, PROJECT_URL, body="oops", status=500)
    responses.add(responses.PATCH, PROJECT_URL, json={"id": PID})

    # when
    result = semrush.set_tracked_url(workspace_id=WS, project_id=PID, primary_url="https://a.com")

    # then
    assert result == {"id": PID}
    assert len(responses.calls) == 2


@responses.activate
def test_429_with_retry_after_waits_at_least_that_long(
    semrush: SemrushClient, fake_time: FakeTime
) -> None:
    # given: waiting is measured by the fake clock, never by sleeping for real
    url = f"{UM}/v1/workspaces/{WS}/status"
    responses.add(responses.GET, url, status=429, headers={"Retry-After": "3"}, body="")
    responses.add(responses.GET, url, json={"status": "created"})
    started = fake_time.clock()

    # when
    status = semrush.get_workspace_status(workspace_id=WS)

    # then
    assert status == "created"
    assert fake_time.waits == [3.0]
    assert fake_time.clock() - started >= 3.0
    assert len(responses.calls) == 2


@responses.activate
def test_429_with_an_http_date_retry_after_is_honoured(
    semrush: SemrushClient, fake_time: FakeTime
) -> None:
    # given
    url = f"{UM}/v1/workspaces/{WS}/status"
    retry_at = format_datetime(WALL_NOW + timedelta(seconds=5), usegmt=True)
    responses.add(responses.GET, url, status=429, headers={"Retry-After": retry_at}, body="")
    responses.add(responses.GET, url, json={"status": "created"})

    # when
    semrush.get_workspace_status(workspace_id=WS)

    # then
    assert fake_time.waits == [5.0]


@responses.activate
def test_429_on_post_is_retried(semrush: SemrushClient, fake_time: FakeTime) -> None:
    # given
    url = f"{UM}/v2/workspaces/{PARENT}/child"
    created = {"id": "ws-new", "title": "Acme", "status": "not ready"}
    responses.add(responses.POST, url, status=429, headers={"Retry-After": "1"}, body="")
    responses.add(responses.POST, url, json=created)

    # when
    result = semrush.create_subworkspace(parent_id=PARENT, title="Acme")

    # then
    assert result == created
    assert len(responses.calls) == 2
    assert fake_time.waits == [1.0]


@responses.activate
def test_429_without_retry_after_uses_backoff(semrush: SemrushClient, fake_time: FakeTime) -> None:
    # given
    url = f"{PE}/v1/languages"
    responses.add(responses.GET, url, status=429, body="")
    responses.add(responses.GET, url, json={"items": []})

    # when
    semrush.list_languages()

    # then
    assert fake_time.waits == [0.1]


@responses.activate
def test_retry_after_beyond_20_seconds_raises_at_once_without_sleeping(
    semrush: SemrushClient, fake_time: FakeTime
) -> None:
    # given
    responses.add(
        responses.POST,
        f"{PROJECT_URL}/publish",
        status=429,
        headers={"Retry-After": "120"},
        body="",
    )

    # when
    with pytest.raises(SemrushRateLimitedError) as caught:
        semrush.publish_project(workspace_id=WS, project_id=PID)

    # then
    assert caught.value.retry_after == 120.0
    assert caught.value.ambiguous is False
    assert len(responses.calls) == 1
    assert fake_time.waits == []


def test_backoff_is_jittered_exponential_from_200ms(fake_time: FakeTime) -> None:
    # given
    semrush = SemrushClient(
        base_url=BASE, token=TOKEN, clock=fake_time.clock, sleep=fake_time.sleep, jitter=lambda: 1.0
    )

    # when
    waits = [semrush._backoff(1), semrush._backoff(2), semrush._backoff(3)]

    # then
    assert waits == [0.2, 0.4, 0.8]


@responses.activate
def test_max_retries_zero_makes_a_single_attempt(fake_time: FakeTime) -> None:
    # given
    semrush = SemrushClient(
        base_url=BASE, token=TOKEN, max_retries=0, clock=fake_time.clock, sleep=fake_time.sleep
    )
    responses.add(responses.GET, f"{PE}/v1/languages", status=503, body="")

    # when
    with pytest.raises(SemrushServerError):
        semrush.list_languages()

    # then
    assert len(responses.calls) == 1
    assert fake_time.waits == []


# ------------------------------------------------------------------------------ logging


@responses.activate
def test_one_log_line_per_call_with_tenant_ids(
    semrush: SemrushClient, caplog: pytest.LogCaptureFixture
) -> None:
    # given
    caplog.set_level(logging.INFO, logger="serenity.semrush")
    responses.add(
        responses.GET,
        PROJECT_URL,
        json={"id": PID},
        match=[matchers.query_param_matcher({"draft": "true", "type": "ai"})],
    )

    # when
    semrush.get_project(workspace_id=WS, project_id=PID)

    # then
    [record] = _semrush_records(caplog)
    assert record.levelno == logging.INFO
    assert record.upstream_operation == "get_project"
    assert record.upstream_method == "GET"
    assert record.upstream_path == f"/enterprise/projects/api/v1/workspaces/{WS}/projects/{PID}"
    assert record.upstream_status == 200
    assert record.duration_ms == 0
    assert record.attempt == 1
    assert record.org_id == "org-1"
    assert record.brand_id == "brand-1"
    assert "draft=true" not in record.getMessage()


@responses.activate
def test_token_never_appears_in_logs_even_when_the_upstream_echoes_it(
    semrush: SemrushClient, caplog: pytest.LogCaptureFixture
) -> None:
    # given: an upstream error body that echoes the token in several shapes
    caplog.set_level(logging.DEBUG)
    echoed = json.dumps(
        {
            "message": f"bad token {TOKEN}",
            "token": TOKEN,
            "authorization": f"Bearer {TOKEN}",
            "headers": {"Authorization": f"Bearer {TOKEN}"},
        }
    )
    responses.add(responses.GET, f"{UM}/v1/workspaces/{PARENT}/family", body=echoed, status=401)

    # when
    with pytest.raises(SemrushUnauthorizedError) as caught:
        semrush.list_family(parent_id=PARENT)

    # then
    logged = _everything_logged(caplog)
    assert _semrush_records(caplog)
    assert TOKEN not in logged
    assert TOKEN not in caught.value.detail
    assert TOKEN not in str(caught.value)
    assert TOKEN not in repr(caught.value)
    assert TOKEN not in repr(semrush)
    assert "[REDACTED]" in caught.value.detail


@responses.activate
def test_other_bearer_tokens_and_token_fields_are_scrubbed(
    semrush: SemrushClient, caplog: pytest.LogCaptureFixture
) -> None:
    # given
    caplog.set_level(logging.INFO, logger="serenity.semrush")
    body = '{"access_token": "abc.def.ghi", "note": "Bearer zzz-other-token"}'
    responses.add(responses.GET, f"{PE}/v1/languages", body=body, status=400)

    # when
    with pytest.raises(SemrushValidationError) as caught:
        semrush.list_languages()

    # then
    assert caught.value.detail == '{"access_token": "[REDACTED]", "note": "Bearer [REDACTED]"}'
    assert "abc.def.ghi" not in _everything_logged(caplog)
    assert "zzz-other-token" not in _everything_logged(caplog)


@responses.activate
def test_log_excerpt_is_truncated_to_2000_chars(
    semrush: SemrushClient, caplog: pytest.LogCaptureFixture
) -> None:
    # given
    caplog.set_level(logging.INFO, logger="serenity.semrush")
    responses.add(
        responses.POST,
        f"{PE}/v1/workspaces/{WS}/projects",
        body="x" * 5000,
        status=400,
        content_type="text/plain",
    )

    # when
    with pytest.raises(SemrushValidationError) as caught:
        semrush.create_project(
            workspace_id=WS,
            name="US-en",
            location_id=2840,
            language="uuid-en",
            brand_names=["Acme"],
            brand_domain="acme.com",
        )

    # then
    [record] = _semrush_records(caplog)
    assert record.levelno == logging.WARNING
    assert record.upstream_body == "x" * 2000
    assert caught.value.detail == "x" * 2000
    assert record.upstream_error == "SemrushValidationError"


@responses.activate
def test_each_retry_attempt_is_logged(
    semrush: SemrushClient, caplog: pytest.LogCaptureFixture
) -> None:
    # given
    caplog.set_level(logging.INFO, logger="serenity.semrush")
    url = f"{PE}/v1/languages"
    responses.add(responses.GET, url, status=503, body="down")
    responses.add(responses.GET, url, json={"items": []})

    # when
    semrush.list_languages()

    # then
    records = _semrush_records(caplog)
    assert [(r.attempt, r.upstream_status, r.levelno) for r in records] == [
        (1, 503, logging.WARNING),
        (2, 200, logging.INFO),
    ]
    assert records[0].retry_in_s == 0.1


# ------------------------------------------------------------------------------ construction


def test_factory_reads_settings_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    # given
    fake_settings = SimpleNamespace(
        SEMRUSH_BASE_URL="http://127.0.0.1:8765/",
        SEMRUSH_API_TOKEN="settings-token",
        SEMRUSH_TIMEOUT_SECONDS=2.5,
    )
    monkeypatch.setattr(django.conf, "settings", fake_settings)

    # when
    semrush = semrush_client_for(log_context={"org_id": "o"})

    # then
    assert semrush.base_url == "http://127.0.0.1:8765"
    assert semrush.timeout == 2.5
    assert semrush.log_context == {"org_id": "o"}
    assert semrush._token == "settings-token"


def test_factory_prefers_the_given_token(monkeypatch: pytest.MonkeyPatch) -> None:
    # given
    fake_settings = SimpleNamespace(
        SEMRUSH_BASE_URL=BASE, SEMRUSH_API_TOKEN="settings-token", SEMRUSH_TIMEOUT_SECONDS=15
    )
    monkeypatch.setattr(django.conf, "settings", fake_settings)

    # when
    semrush = semrush_client_for(token="org-token")

    # then
    assert semrush._token == "org-token"


def test_factory_without_a_token_raises_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given
    fake_settings = SimpleNamespace(
        SEMRUSH_BASE_URL=BASE, SEMRUSH_API_TOKEN="", SEMRUSH_TIMEOUT_SECONDS=15
    )
    monkeypatch.setattr(django.conf, "settings", fake_settings)

    # when / then
    with pytest.raises(SemrushConfigurationError):
        semrush_client_for()


@pytest.mark.parametrize("token", ["abc\r\nX-Injected: 1", "abc\n", "\rabc"])
def test_a_token_with_a_line_break_raises_configuration_error(token: str) -> None:
    # when / then: it would end the Authorization header and start another
    with pytest.raises(SemrushConfigurationError) as raised:
        SemrushClient(base_url=BASE, token=token)
    assert raised.value.detail == "token contains a line break"


@pytest.mark.parametrize(
    "base_url", ["", "semrush.com", "ftp://semrush.com", "https://user:pw@semrush.com"]
)
def test_malformed_base_url_raises_configuration_error(base_url: str) -> None:
    # when / then
    with pytest.raises(SemrushConfigurationError):
        SemrushClient(base_url=base_url, token=TOKEN)


@responses.activate
def test_ids_are_percent_encoded_in_paths(semrush: SemrushClient) -> None:
    # given
    responses.add(responses.GET, f"{UM}/v1/workspaces/a%2Fb/status", json={"status": "created"})

    # when
    status = semrush.get_workspace_status(workspace_id="a/b")

    # then
    assert status == "created"


@responses.activate
def test_the_environment_proxy_applies_to_a_factory_client(monkeypatch: pytest.MonkeyPatch) -> None:
    # given: a proxy for Semrush in the environment
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    fake_settings = SimpleNamespace(
        SEMRUSH_BASE_URL=BASE, SEMRUSH_API_TOKEN="settings-token", SEMRUSH_TIMEOUT_SECONDS=15
    )
    monkeypatch.setattr(django.conf, "settings", fake_settings)
    responses.add(responses.GET, f"{UM}/v1/workspaces/{WS}/status", json={"status": "created"})

    # when
    semrush_client_for().get_workspace_status(workspace_id=WS)

    # then
    assert responses.calls[0].request.req_kwargs["proxies"]["https"] == (
        "http://proxy.internal:3128"
    )


@responses.activate
def test_netrc_credentials_never_replace_the_bearer_token(
    semrush: SemrushClient, monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    # given: a ~/.netrc entry for the Semrush host
    netrc = tmp_path / "netrc"
    netrc.write_text("machine semrush.test login someone password hunter2\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    responses.add(responses.GET, f"{UM}/v1/workspaces/{WS}/status", json={"status": "created"})

    # when
    semrush.get_workspace_status(workspace_id=WS)

    # then
    assert responses.calls[0].request.headers["Authorization"] == f"Bearer {TOKEN}"
