"""The Semrush client: one method per upstream operation.

:class:`SemrushClient` covers the enterprise write APIs (User Manager under
``{base_url}/enterprise/users/api``, Project Engine under ``{base_url}/enterprise/projects/api``):
each method builds the operation's URL and body and checks the shape of its answer. Shapes,
statuses and quirks are described in :mod:`.contract` (Semrush's own contract in the project's
words, SPEC §12.1) and ``shared/reference/semrush-upstream.md`` §2. The retry,
wait and logging policy every method shares (SPEC §5) is :class:`.calls.SemrushCaller`'s, the
client's base; the error classes are in :mod:`.errors`; sending a request (sessions, timeouts)
is :mod:`.transport`'s.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, urlsplit

import requests

from provisioning.semrush.calls import DEFAULT_MAX_RETRIES, CallRecorder, Permits, SemrushCaller
from provisioning.semrush.errors import (
    SemrushConfigurationError,
    SemrushNotFoundError,
    SemrushUnexpectedResponseError,
    expect_list_of_objects,
    expect_object,
)
from provisioning.semrush.transport import DEFAULT_TIMEOUT_SECONDS, pooled_session

USER_MANAGER_PREFIX = "/enterprise/users/api"
PROJECT_ENGINE_PREFIX = "/enterprise/projects/api"

# A safety net against an upstream whose `total` never matches what it returns.
MAX_PROJECT_PAGES = 1000


def _segment(value: str | int) -> str:
    """One URL path segment, percent-encoded (ids come from the database and upstream)."""
    return quote(str(value), safe="")


class SemrushClient(SemrushCaller):
    """Client for the Semrush enterprise write APIs (User Manager and Project Engine).

    Thread-safety: one instance may be shared by threads only if the given ``session`` may be;
    the default is a private ``requests.Session`` per instance.

    ``log_context`` holds tenant ids (``org_id``, ``brand_id``, ``attempt_id`` ...) copied onto
    every log line. ``owned=True`` on a method means the workspace is the brand's own pointer or
    candidate: a 403 on it raises :class:`SemrushGoneError` instead of
    :class:`SemrushForbiddenError`. ``on_call`` observes every attempt (operation, status or
    None, seconds), for metrics this module knows nothing about; ``recorder`` is told of every
    attempt (:class:`.calls.SentAttempt`), for the ledger this module knows nothing about.

    Raises :class:`SemrushConfigurationError` when ``base_url`` is not an absolute http(s) URL,
    or on the token, timeout and retry checks of :class:`SemrushCaller`.
    """

    def __init__(
        self,
        *,
        base_url: str,
        token: str,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        max_retries: int = DEFAULT_MAX_RETRIES,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = random.random,
        session: requests.Session | None = None,
        log_context: Mapping[str, Any] | None = None,
        wall_clock: Callable[[], float] = time.time,
        on_call: Callable[[str, int | None, float], None] | None = None,
        permits: Permits | None = None,
        recorder: CallRecorder | None = None,
    ) -> None:
        self.base_url = _validated_base_url(base_url)
        super().__init__(
            token=token,
            timeout=timeout,
            max_retries=max_retries,
            clock=clock,
            sleep=sleep,
            jitter=jitter,
            session=session,
            log_context=log_context,
            wall_clock=wall_clock,
            on_call=on_call,
            permits=permits,
            recorder=recorder,
        )
        self._um = self.base_url + USER_MANAGER_PREFIX
        self._pe = self.base_url + PROJECT_ENGINE_PREFIX

    def __repr__(self) -> str:
        # Never the token.
        return f"SemrushClient(base_url={self.base_url!r}, timeout={self.timeout!r})"

    def __enter__(self) -> SemrushClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ----------------------------------------------------------------- User Manager (workspaces)

    def create_subworkspace(self, *, parent_id: str, title: str) -> dict[str, Any]:
        """Create a child workspace under ``parent_id``; returns ``{id, title, status, ...}``.

        ``resources`` is sent empty: the child gets no AI allocation of its own. The new
        workspace is ``not ready`` until it settles (poll :meth:`get_workspace_status`).

        Not idempotent: Semrush has no idempotency key and titles are not unique. A 5xx,
        timeout or dropped connection raises with ``ambiguous=True``; reconcile through
        :meth:`list_family` before creating again. A 403 means the parent is unknown or not
        accessible with this token.
        """
        body = self._request_json(
            operation="create_subworkspace",
            method="POST",
            url=f"{self._um}/v2/workspaces/{_segment(parent_id)}/child",
            json_body={"title": title, "resources": {}},
        )
        return expect_object(body, operation="create_subworkspace", required=("id",))

    def get_workspace_status(self, *, workspace_id: str, owned: bool = False) -> str:
        """Return the workspace's raw ``status`` string (``not ready``, ``created``, ...).

        The value is returned as the upstream spells it; classifying it (ready, terminal, not
        settled) is the caller's job. Unknown or deleted workspaces answer 403: with
        ``owned=True`` that raises :class:`SemrushGoneError`.
        """
        body = self._request_json(
            operation="get_workspace_status",
            method="GET",
            url=f"{self._um}/v1/workspaces/{_segment(workspace_id)}/status",
            owned=owned,
        )
        data = expect_object(body, operation="get_workspace_status")
        status = data.get("status")
        if not isinstance(status, str):
            raise SemrushUnexpectedResponseError(
                operation="get_workspace_status", status=200, detail="no string `status`"
            )
        return status

    def list_family(self, *, parent_id: str, titled: str | None = None) -> list[dict[str, Any]]:
        """List the parent workspace and all its descendants (``{id, title, status, parent_id}``).

        Upstream answers a bare JSON array (no ``items`` envelope). The parent itself is part of
        the list; filtering it out is the caller's job.

        With ``titled``, the caller only looks for workspaces of that title (trimmed,
        case-insensitive): a listing whose text cannot hold one answers ``[]`` without being
        decoded (:func:`_cannot_hold_title`). The listing grows with every brand of the org and
        is read on every brand create, so its decoding is skipped when it cannot matter.
        """
        url = f"{self._um}/v1/workspaces/{_segment(parent_id)}/family"
        response = self._request(operation="list_family", method="GET", url=url)
        if titled is not None and _cannot_hold_title(response.content, titled):
            return []
        body = self._decode(response, operation="list_family", method="GET")
        return expect_list_of_objects(body, operation="list_family")

    # ------------------------------------------------------------ Project Engine (projects)

    def list_projects(self, *, workspace_id: str, owned: bool = False) -> list[dict[str, Any]]:
        """Return every AI project of the workspace (draft view), following pagination.

        Pages are requested with the ``page`` query parameter until ``total`` items were seen
        or a page comes back empty. A project created in the last few seconds may be missing
        (the list lags about 4 s behind creates).
        """
        url = f"{self._pe}/v1/workspaces/{_segment(workspace_id)}/projects"
        items: list[dict[str, Any]] = []
        params: dict[str, str] = {"type": "ai"}
        for _ in range(MAX_PROJECT_PAGES):
            body = self._request_json(
                operation="list_projects", method="GET", url=url, params=params, owned=owned
            )
            data = expect_object(body, operation="list_projects")
            page_items = expect_list_of_objects(data.get("items") or [], operation="list_projects")
            items.extend(page_items)
            total = data.get("total")
            if not page_items or not isinstance(total, int) or len(items) >= total:
                return items
            page = data.get("page")
            current = page if isinstance(page, int) else int(params.get("page", "1"))
            params = {"type": "ai", "page": str(current + 1)}
        return items

    def create_project(
        self,
        *,
        workspace_id: str,
        name: str,
        location_id: int,
        language: str,
        brand_names: list[str],
        brand_domain: str,
        owned: bool = False,
        brand_name_display: str | None = None,
        country_code: str | None = None,
        location_name: str | None = None,
    ) -> dict[str, Any]:
        """Create an AI project (one market) in the draft layer; returns it (``publish_status``
        ``draft``).

        ``language`` is the language **catalog id** (a UUID from :meth:`list_languages`), not
        an ISO code: an unknown id makes upstream answer 500. ``brand_domain`` must be a bare
        host (a path is a 400). ``brand_names`` is sent de-duplicated in order; the display name
        defaults to its first entry. ``country_code`` (ISO-2, sent lower-cased) and
        ``location_name`` are optional and sent only when given. The tracked URL is ignored on
        create: follow up with :meth:`set_tracked_url` before :meth:`publish_project`.

        Not idempotent: a retried create makes a second project. A 5xx, timeout or dropped
        connection raises with ``ambiguous=True``; reconcile through :meth:`list_projects`
        (mind the list lag). A 500 also means the workspace is not settled yet.
        """
        names = list(dict.fromkeys(n for n in brand_names if n))
        payload: dict[str, Any] = {
            "name": name,
            "type": "ai",
            "domain": brand_domain,
            "location_id": int(location_id),
            "language_id": language,
            "brand_name_display": brand_name_display or (names[0] if names else name),
            "brand_names": names,
        }
        if country_code:
            payload["country_code"] = country_code.lower()
        if location_name:
            payload["location_name"] = location_name
        body = self._request_json(
            operation="create_project",
            method="POST",
            url=f"{self._pe}/v1/workspaces/{_segment(workspace_id)}/projects",
            json_body=payload,
            owned=owned,
        )
        return expect_object(body, operation="create_project", required=("id",))

    def set_tracked_url(
        self, *, workspace_id: str, project_id: str, primary_url: str, owned: bool = False
    ) -> dict[str, Any]:
        """Set the project's tracked URL (``settings.ai.primary_url``) in the draft layer.

        Must happen before publish. Idempotent (it sets a value), so it is retried like a GET.
        """
        body = self._request_json(
            operation="set_tracked_url",
            method="PATCH",
            url=self._project_url(workspace_id, project_id),
            json_body={"type": "ai", "primary_url": primary_url},
            owned=owned,
        )
        return expect_object(body, operation="set_tracked_url")

    def publish_project(self, *, workspace_id: str, project_id: str, owned: bool = False) -> None:
        """Ask Semrush to promote the project's draft to live (202, no body).

        Publishing is asynchronous: confirm by re-reading :meth:`get_project` and its
        ``publish_status``. A disguised quota rejection raises :class:`SemrushQuotaError`. As a
        POST it is never replayed after a 5xx or a lost response (``ambiguous=True``); publishing
        twice is harmless upstream, so the caller may re-publish after checking.
        """
        self._request(
            operation="publish_project",
            method="POST",
            url=self._project_url(workspace_id, project_id) + "/publish",
            owned=owned,
        )

    def get_project(
        self, *, workspace_id: str, project_id: str, owned: bool = False
    ) -> dict[str, Any]:
        """Read a project's draft view (``draft=true``), which carries ``publish_status``.

        Raises :class:`SemrushNotFoundError` for an unknown project.
        """
        body = self._request_json(
            operation="get_project",
            method="GET",
            url=self._project_url(workspace_id, project_id),
            params={"draft": "true", "type": "ai"},
            owned=owned,
        )
        return expect_object(body, operation="get_project")

    def delete_project(self, *, workspace_id: str, project_id: str, owned: bool = False) -> bool:
        """Hard-delete a project; convergent: an already missing project counts as success.

        Returns True when this call deleted it, False when upstream answered 404 (already
        gone). Prompts, models and benchmarks go with the project.
        """
        try:
            self._request(
                operation="delete_project",
                method="DELETE",
                url=self._project_url(workspace_id, project_id),
                owned=owned,
            )
        except SemrushNotFoundError:
            return False
        return True

    def list_languages(self) -> list[dict[str, Any]]:
        """Return the language catalog, ``[{id, name}]`` (``id`` is what create wants)."""
        body = self._request_json(
            operation="list_languages", method="GET", url=f"{self._pe}/v1/languages"
        )
        data = expect_object(body, operation="list_languages")
        return expect_list_of_objects(data.get("items") or [], operation="list_languages")

    def add_prompts(
        self,
        *,
        workspace_id: str,
        project_id: str,
        prompts: list[dict[str, Any]],
        owned: bool = False,
    ) -> list[dict[str, Any]]:
        """Add prompts to a project's draft (the v3 tagged route, SPEC §12.1); they become
        readable only after publish. Each prompt is ``{name, tags}``: its text and its tag
        names. Returns the answer's ``items``, ``[{id, name, is_new}]``: Semrush dedupes by name
        within the project, and a prompt it held already answers ``is_new: false``.

        An empty 2xx answer returns ``[]``. Not idempotent (Semrush dedupes names, but a replay
        is still never sent blind): a 5xx or lost response raises with ``ambiguous=True``.
        """
        url = (
            f"{self._pe}/v3/workspaces/{_segment(workspace_id)}/projects/"
            f"{_segment(project_id)}/aio/prompts/tagged"
        )
        body = self._request_json(
            operation="add_prompts",
            method="POST",
            url=url,
            json_body={"prompts": prompts},
            owned=owned,
        )
        if body is None:
            return []  # accepted without a body: nothing to map back, the prompts were added
        data = expect_object(body, operation="add_prompts")
        return expect_list_of_objects(data.get("items") or [], operation="add_prompts")

    # ------------------------------------------------------------------------------- URLs

    def _project_url(self, workspace_id: str, project_id: str) -> str:
        return f"{self._pe}/v1/workspaces/{_segment(workspace_id)}/projects/{_segment(project_id)}"


def semrush_client_for(
    *,
    token: str | None = None,
    log_context: Mapping[str, Any] | None = None,
    on_call: Callable[[str, int | None, float], None] | None = None,
    permits: Permits | None = None,
    recorder: CallRecorder | None = None,
) -> SemrushClient:
    """Build a client from Django settings, read at call time (never at import).

    Uses ``SEMRUSH_BASE_URL``, ``SEMRUSH_TIMEOUT_SECONDS`` (default 15) and, when ``token`` is
    None, ``SEMRUSH_API_TOKEN``. Raises :class:`SemrushConfigurationError` when the base URL or
    the token is missing or malformed.

    The client uses this thread's pooled session (:func:`.transport.pooled_session`), so
    connections to Semrush are kept alive across clients, steps and requests. The token travels
    with each request, never in the session. Such a client must stay in the thread that built it.
    """
    from django.conf import settings

    base_url = getattr(settings, "SEMRUSH_BASE_URL", "") or ""
    chosen_token = token if token is not None else getattr(settings, "SEMRUSH_API_TOKEN", "")
    timeout = getattr(settings, "SEMRUSH_TIMEOUT_SECONDS", DEFAULT_TIMEOUT_SECONDS)
    return SemrushClient(
        base_url=base_url,
        token=chosen_token or "",
        timeout=float(timeout if timeout else DEFAULT_TIMEOUT_SECONDS),
        log_context=log_context,
        on_call=on_call,
        permits=permits,
        recorder=recorder,
        session=pooled_session(),
    )


# ------------------------------------------------------------------------------------ helpers


def _validated_base_url(base_url: str) -> str:
    """``scheme://host[:port][/path]`` without a trailing slash; http(s) only, no userinfo."""
    raw = (base_url or "").strip()
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SemrushConfigurationError(
            operation="configure", detail="SEMRUSH_BASE_URL must be an absolute http(s) URL"
        )
    if parts.username or parts.password or parts.query or parts.fragment:
        raise SemrushConfigurationError(
            operation="configure",
            detail="SEMRUSH_BASE_URL must not carry credentials, a query or a fragment",
        )
    return f"{parts.scheme}://{parts.netloc}{parts.path}".rstrip("/")


def _cannot_hold_title(body: bytes, title: str) -> bool:
    """Whether a listing's raw text rules out, unread, any workspace titled `title` (trimmed,
    case-insensitive). Sound only where it answers True, so it answers True only when all hold:
    - the body is a bare array (`[` … `]`), as upstream answers; anything else is decoded and
      judged by the decoder (an error page, a truncated body);
    - it has no backslash, so every string in it is its literal bytes (no escape can spell a
      title differently), and no byte beyond ASCII, so ASCII lower-casing of the bytes is
      `str.lower()` of every string in it;
    - the wanted title is ASCII, and its lower-cased form is nowhere in the lower-cased body
      (a title that matches would be, whatever its surrounding spaces).
    """
    wanted = title.strip().lower()
    if not wanted or not wanted.isascii():
        return False
    text = body.strip()
    if not (text.startswith(b"[") and text.endswith(b"]")) or b"\\" in text:
        return False
    if not text.isascii():
        return False
    return wanted.encode() not in text.lower()
