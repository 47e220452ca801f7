"""The Semrush client: the only module of this project that imports ``requests``.

One class, :class:`SemrushClient`, with one method per upstream operation of the enterprise
write APIs (User Manager under ``{base_url}/enterprise/users/api``, Project Engine under
``{base_url}/enterprise/projects/api``). Shapes, statuses and quirks are described in
``shared/reference/semrush-upstream.md`` §2; the error classes in :mod:`.errors`.

Guarantees of every method:

- Each HTTP attempt carries an explicit ``(connect, read)`` timeout.
- Retries: at most ``max_retries`` (2) after the first attempt, waiting a jittered exponential
  backoff from 200 ms, or ``Retry-After`` when that is longer; each wait is at most 20 s, and a
  ``Retry-After`` beyond that is not waited: :class:`SemrushRateLimitedError` is raised at once
  with its ``retry_after`` so a worker can re-schedule its step instead of sleeping.
- 429 is retried for every HTTP method: Semrush rejects a rate-limited request at the edge
  before it runs (an undocumented contract, see the reference §4).
- 5xx, timeouts and network errors are retried only for idempotent methods (GET, PUT, PATCH,
  DELETE; our only PATCH sets a value, so replaying it is safe). A POST is never replayed after
  a 5xx or a lost response; the error is raised with ``ambiguous=True`` and the caller must
  reconcile before creating again.
- All waiting goes through the injected ``sleep``; durations through the injected ``clock``.
- One log line per attempt on the ``serenity.semrush`` logger with operation, method, path (no
  host, no query), status, duration and attempt, plus the tenant ids of ``log_context``. Error
  lines add a scrubbed body excerpt of at most 2000 characters. The token and the
  ``Authorization`` header are never logged and never put into an exception.
"""

from __future__ import annotations

import email.utils
import functools
import http.cookiejar
import json
import logging
import math
import os
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import orjson
import requests
from urllib3.exceptions import NewConnectionError

from provisioning.semrush.errors import (
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
)

logger = logging.getLogger("serenity.semrush")

USER_MANAGER_PREFIX = "/enterprise/users/api"
PROJECT_ENGINE_PREFIX = "/enterprise/projects/api"

DEFAULT_TIMEOUT_SECONDS = 15.0
DEFAULT_MAX_RETRIES = 2
BACKOFF_BASE_SECONDS = 0.2
MAX_WAIT_SECONDS = 20.0
EXCERPT_LIMIT = 2000
# A safety net against an upstream whose `total` never matches what it returns.
MAX_PROJECT_PAGES = 1000

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "DELETE"})

_REDACTED = "[REDACTED]"
_BEARER_RE = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9\-._~+/]+=*")
_SECRET_JSON_FIELD_RE = re.compile(
    r"""(?ix)
    (["']?(?:[a-z0-9_\-]*token|authorization|password|secret|api[_\-]?key|apikey)["']?
    \s*[:=]\s*)
    (?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|(?!\[REDACTED\])[^\s,;&}\]]+)
    """
)
_SECRET_HEADER_LINE_RE = re.compile(r"(?im)^(\s*authorization\s*:\s*).+$")

# LogRecord attributes that `extra` must not overwrite (logging raises KeyError on them).
_RESERVED_LOG_ATTRS = frozenset(
    logging.LogRecord("x", logging.INFO, "x", 0, "x", None, None).__dict__
) | {"message", "asctime"}


def scrub_secrets(text: str, *, token: str | None = None) -> str:
    """Return ``text`` with bearer tokens, the given token and secret-looking fields redacted."""
    if token:
        text = text.replace(token, _REDACTED)
    text = _BEARER_RE.sub(f"Bearer {_REDACTED}", text)
    text = _SECRET_JSON_FIELD_RE.sub(rf'\g<1>"{_REDACTED}"', text)
    return _SECRET_HEADER_LINE_RE.sub(rf"\g<1>{_REDACTED}", text)


def _excerpt(text: str, *, token: str | None) -> str:
    # Scrub first, then truncate, so a truncation can never cut a secret in half and leak a part.
    return scrub_secrets(text, token=token)[:EXCERPT_LIMIT]


def _segment(value: str | int) -> str:
    """One URL path segment, percent-encoded (ids come from the database and upstream)."""
    return quote(str(value), safe="")


class SemrushClient:
    """Client for the Semrush enterprise write APIs (User Manager and Project Engine).

    Thread-safety: one instance may be shared by threads only if the given ``session`` may be;
    the default is a private ``requests.Session`` per instance.

    ``log_context`` holds tenant ids (``org_id``, ``brand_id``, ``attempt_id`` ...) copied onto
    every log line. ``owned=True`` on a method means the workspace is the brand's own pointer or
    candidate: a 403 on it raises :class:`SemrushGoneError` instead of
    :class:`SemrushForbiddenError`.

    Raises :class:`SemrushConfigurationError` when ``base_url`` is not an absolute http(s) URL,
    or ``token`` is empty.
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
        on_call: Callable[[str, int | None], None] | None = None,
    ) -> None:
        self.base_url = _normalize_base_url(base_url)
        if not token or not token.strip():
            raise SemrushConfigurationError(operation="configure", detail="token is empty")
        if "\r" in token or "\n" in token:
            # It would end the Authorization header and start another.
            raise SemrushConfigurationError(
                operation="configure", detail="token contains a line break"
            )
        if timeout <= 0:
            raise SemrushConfigurationError(operation="configure", detail="timeout must be > 0")
        if max_retries < 0:
            raise SemrushConfigurationError(operation="configure", detail="max_retries < 0")
        self._token = token
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self._clock = clock
        self._sleep = sleep
        self._jitter = jitter
        self._wall_clock = wall_clock
        self._owns_session = session is None
        self._session = session if session is not None else requests.Session()
        self.log_context: dict[str, Any] = dict(log_context or {})
        # Observer of every attempt (operation, status or None): metrics, without this module
        # knowing about them.
        self._on_call = on_call
        self._plain_base = _sent_as_is(self.base_url)
        self._um = self.base_url + USER_MANAGER_PREFIX
        self._pe = self.base_url + PROJECT_ENGINE_PREFIX

    def __repr__(self) -> str:
        # Never the token.
        return f"SemrushClient(base_url={self.base_url!r}, timeout={self.timeout!r})"

    def close(self) -> None:
        """Close the HTTP session if this client created it."""
        if self._owns_session:
            self._session.close()

    def __enter__(self) -> SemrushClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ User Manager (workspaces)

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
        return _expect_dict(body, operation="create_subworkspace", required=("id",))

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
        data = _expect_dict(body, operation="get_workspace_status")
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
        decoded (`_cannot_hold_title`). The listing grows with every brand of the org (~300
        bytes each) and is read on every brand create; decoding it was the one cost of a create
        that grows with the fleet.
        """
        url = f"{self._um}/v1/workspaces/{_segment(parent_id)}/family"
        response = self._request(operation="list_family", method="GET", url=url)
        if titled is not None and _cannot_hold_title(response.content, titled):
            return []
        body = self._decode(response, operation="list_family", method="GET", url=url)
        return _expect_list_of_dicts(body, operation="list_family")

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
            data = _expect_dict(body, operation="list_projects")
            page_items = _expect_list_of_dicts(data.get("items") or [], operation="list_projects")
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
        return _expect_dict(body, operation="create_project", required=("id",))

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
        return _expect_dict(body, operation="set_tracked_url")

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
        return _expect_dict(body, operation="get_project")

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
        data = _expect_dict(body, operation="list_languages")
        return _expect_list_of_dicts(data.get("items") or [], operation="list_languages")

    def add_prompts(
        self,
        *,
        workspace_id: str,
        project_id: str,
        prompts: list[dict[str, Any]],
        owned: bool = False,
    ) -> dict[str, Any]:
        """Add prompts to a project's draft; they become readable only after publish.

        Not idempotent (a replay would duplicate prompts): a 5xx or lost response raises with
        ``ambiguous=True``. Returns the parsed response body, or ``{}`` when it is empty.
        """
        body = self._request_json(
            operation="add_prompts",
            method="POST",
            url=self._project_url(workspace_id, project_id) + "/prompts",
            json_body={"prompts": prompts},
            owned=owned,
        )
        if body is None:
            return {}
        return _expect_dict(body, operation="add_prompts")

    # ------------------------------------------------------------------------------ transport

    def _project_url(self, workspace_id: str, project_id: str) -> str:
        return f"{self._pe}/v1/workspaces/{_segment(workspace_id)}/projects/{_segment(project_id)}"

    def _request_json(
        self,
        *,
        operation: str,
        method: str,
        url: str,
        params: Mapping[str, str] | None = None,
        json_body: Any = None,
        owned: bool = False,
    ) -> Any:
        """Send with retries and return the parsed JSON body (``None`` for an empty body)."""
        response = self._request(
            operation=operation,
            method=method,
            url=url,
            params=params,
            json_body=json_body,
            owned=owned,
        )
        return self._decode(response, operation=operation, method=method, url=url)

    def _decode(self, response: requests.Response, *, operation: str, method: str, url: str) -> Any:
        """The parsed JSON body (``None`` for an empty body)."""
        if not response.content or not response.content.strip():
            return None
        try:
            # orjson: a family listing is ~300 bytes per workspace, read on every brand create;
            # the standard library's decoder was a tenth of a worker's CPU at 1000 brands.
            return orjson.loads(response.content)
        except ValueError as exc:  # orjson.JSONDecodeError is a ValueError
            raise SemrushUnexpectedResponseError(
                operation=operation,
                status=response.status_code,
                method=method,
                path=urlsplit(url).path,
                detail=_excerpt(response.text, token=self._token),
                request_id=_request_id(response),
            ) from exc

    def _request(
        self,
        *,
        operation: str,
        method: str,
        url: str,
        params: Mapping[str, str] | None = None,
        json_body: Any = None,
        owned: bool = False,
    ) -> requests.Response:
        """Send one logical call: attempts, classification, waits. Returns a 2xx response."""
        path = urlsplit(url).path
        idempotent = method in IDEMPOTENT_METHODS
        headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json"}
        data: bytes | None = None
        if json_body is not None:
            headers["Content-Type"] = "application/json"
            data = json.dumps(json_body).encode("utf-8")

        attempt = 0
        while True:
            attempt += 1
            started = self._clock()
            try:
                response = self._send(method, url, params=params, data=data, headers=headers)
            except requests.RequestException as exc:
                duration_ms = _elapsed_ms(started, self._clock())
                transport_error = self._transport_error(
                    exc, operation=operation, method=method, path=path, idempotent=idempotent
                )
                retry = idempotent and attempt <= self.max_retries
                wait = self._backoff(attempt) if retry else None
                self._log(
                    logging.WARNING,
                    operation=operation,
                    method=method,
                    path=path,
                    status=None,
                    duration_ms=duration_ms,
                    attempt=attempt,
                    error=transport_error,
                    wait=wait,
                )
                if wait is None:
                    raise transport_error from exc
                self._sleep(wait)
                continue

            duration_ms = _elapsed_ms(started, self._clock())
            if response.status_code < 300:
                self._log(
                    logging.INFO,
                    operation=operation,
                    method=method,
                    path=path,
                    status=response.status_code,
                    duration_ms=duration_ms,
                    attempt=attempt,
                )
                return response

            error = self._http_error(
                response,
                operation=operation,
                method=method,
                path=path,
                idempotent=idempotent,
                owned=owned,
            )
            wait = self._wait_before_retry(error, attempt=attempt, idempotent=idempotent)
            self._log(
                logging.WARNING,
                operation=operation,
                method=method,
                path=path,
                status=response.status_code,
                duration_ms=duration_ms,
                attempt=attempt,
                error=error,
                wait=wait,
            )
            if wait is None:
                raise error
            self._sleep(wait)

    def _send(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str] | None,
        data: bytes | None,
        headers: dict[str, str],
    ) -> requests.Response:
        """One HTTP exchange through the session's transport adapter, never following a
        redirect, the body read (which hands the connection back to the pool).

        `Session.request` would merge cookies, hooks and the environment into every call, ~800
        Python calls more per exchange (seven exchanges per provisioning chain), and prepare
        the request anew (`_prepare`). Nothing it adds applies: cookies are never kept, no
        hooks are set, and a pooled session reads the environment once (`environ_proxies`); a
        session that trusts the environment still has it merged here."""
        session = self._session
        prepared = self._prepare(method, url, params=params, data=data, headers=headers)
        if session.trust_env:
            env = session.merge_environment_settings(prepared.url or url, {}, False, None, None)
            proxies, verify, cert = env["proxies"], env["verify"], env["cert"]
        else:
            proxies, verify, cert = environ_proxies(self.base_url), session.verify, session.cert
        response = session.get_adapter(url).send(
            prepared,
            timeout=(self.timeout, self.timeout),
            verify=verify,
            cert=cert,
            proxies=proxies,
        )
        response.content  # noqa: B018 - read now, as Session.send does without `stream`
        return response

    def _prepare(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str] | None,
        data: bytes | None,
        headers: dict[str, str],
    ) -> requests.PreparedRequest:
        """What `PreparedRequest.prepare` makes of one of our requests, without re-parsing a URL
        this class built itself (~130 Python calls fewer per exchange).

        Every URL is the base URL, constant path parts and `_segment`-quoted ids, which
        requests' normalisation (IDNA host, re-quoted path) leaves as they are when it leaves
        the base URL as it is (`_plain_base`); the parameters are encoded as requests encodes
        them, the body is bytes or nothing, there are no cookies (`_PooledSessions`) and no
        auth but our header. Any other base URL goes through `prepare`.
        `tests/provisioning/test_semrush_transport.py` checks both give the same request."""
        session = self._session
        if not self._plain_base:
            prepared = requests.PreparedRequest()
            prepared.prepare(
                method=method,
                url=url,
                headers={**session.headers, **headers},
                data=data,
                params=params,
            )
            return prepared
        prepared = requests.PreparedRequest()
        prepared.method = method
        prepared.url = f"{url}?{urlencode(params, doseq=True)}" if params else url
        prepared.headers = requests.structures.CaseInsensitiveDict(session.headers)
        prepared.headers.update(headers)
        if data is not None:
            prepared.headers["Content-Length"] = str(len(data))
        elif method not in ("GET", "HEAD"):
            prepared.headers["Content-Length"] = "0"
        prepared.body = data
        prepared.hooks = requests.hooks.default_hooks()
        return prepared

    def _wait_before_retry(
        self, error: SemrushError, *, attempt: int, idempotent: bool
    ) -> float | None:
        """Seconds to wait before the next attempt, or None when the error must be raised now."""
        if attempt > self.max_retries:
            return None
        if isinstance(error, SemrushRateLimitedError):
            pass  # rejected at the edge before it ran: safe to replay for every method
        elif isinstance(error, SemrushServerError):
            if not idempotent:
                return None  # a POST may have committed before the 5xx: never replay it blind
        else:
            return None
        backoff = self._backoff(attempt)
        if error.retry_after is None:
            return backoff
        if error.retry_after > MAX_WAIT_SECONDS:
            # Too long to hold a worker: raise with retry_after so the step is re-scheduled.
            return None
        return max(backoff, error.retry_after)

    def _backoff(self, attempt: int) -> float:
        """Equal-jitter exponential backoff: 0.2 s * 2**(attempt-1) * [0.5, 1.0], capped."""
        factor = 0.5 + 0.5 * min(max(self._jitter(), 0.0), 1.0)
        return float(min(BACKOFF_BASE_SECONDS * (2 ** (attempt - 1)) * factor, MAX_WAIT_SECONDS))

    def _http_error(
        self,
        response: requests.Response,
        *,
        operation: str,
        method: str,
        path: str,
        idempotent: bool,
        owned: bool,
    ) -> SemrushError:
        """Map an error response to the family, on status and body shape only (reference §4)."""
        status = response.status_code
        common: dict[str, Any] = {
            "operation": operation,
            "status": status,
            "method": method,
            "path": path,
            "detail": _excerpt(response.text, token=self._token),
            "request_id": _request_id(response),
        }
        if status == 429:
            return SemrushRateLimitedError(
                retry_after=_parse_retry_after(response, now=self._wall_clock()), **common
            )
        if status >= 500:
            return SemrushServerError(
                ambiguous=not idempotent,
                retry_after=_parse_retry_after(response, now=self._wall_clock()),
                **common,
            )
        if status in (400, 422):
            return SemrushValidationError(**common)
        if status == 401:
            return SemrushUnauthorizedError(**common)
        if status == 403:
            return SemrushGoneError(**common) if owned else SemrushForbiddenError(**common)
        if status == 404:
            return SemrushNotFoundError(**common)
        if status == 409:
            return SemrushConflictError(**common)
        if status == 402 or (status == 405 and not _is_json_body(response)):
            # The disguised quota: an nginx text/html 405 on metered writes and publish. A
            # genuine method-not-allowed answers JSON and stays a plain SemrushError.
            return SemrushQuotaError(**common)
        return SemrushError(**common)

    def _transport_error(
        self,
        exc: requests.RequestException,
        *,
        operation: str,
        method: str,
        path: str,
        idempotent: bool,
    ) -> SemrushNetworkError:
        """Map a transport failure; a POST is ambiguous unless nothing reached the server."""
        never_sent = _connection_never_established(exc)
        common: dict[str, Any] = {
            "operation": operation,
            "method": method,
            "path": path,
            "detail": _excerpt(f"{type(exc).__name__}: {exc}", token=self._token),
            "ambiguous": not idempotent and not never_sent,
        }
        if isinstance(exc, requests.Timeout):
            return SemrushTimeoutError(**common)
        return SemrushNetworkError(**common)

    def _log(
        self,
        level: int,
        *,
        operation: str,
        method: str,
        path: str,
        status: int | None,
        duration_ms: int,
        attempt: int,
        error: SemrushError | None = None,
        wait: float | None = None,
    ) -> None:
        # Prefixed names: `path`, `status` and `request_id` belong to the inbound request's
        # context on the same JSON line.
        fields: dict[str, Any] = {
            "upstream_operation": operation,
            "upstream_method": method,
            "upstream_path": path,
            "upstream_status": status,
            "duration_ms": duration_ms,
            "attempt": attempt,
        }
        for key, value in self.log_context.items():
            if key not in _RESERVED_LOG_ATTRS and key not in fields:
                fields[key] = value
        message = "semrush %s %s %s status=%s duration_ms=%d attempt=%d"
        args: list[Any] = [operation, method, path, status, duration_ms, attempt]
        for key, value in self.log_context.items():
            message += f" {str(key).replace('%', '%%')}=%s"
            args.append(value)
        if error is not None:
            fields["upstream_error"] = type(error).__name__
            fields["upstream_request_id"] = error.request_id
            fields["ambiguous"] = error.ambiguous
            fields["retry_after"] = error.retry_after
            fields["retry_in_s"] = wait
            fields["upstream_body"] = error.detail
            # The excerpt travels as the `upstream_body` field of the JSON line, not in the text.
            message += " error=%s retry_in_s=%s"
            args.extend([type(error).__name__, wait])
        logger.log(level, message, *args, extra=fields)
        if self._on_call is not None:
            self._on_call(operation, status)


class _SemrushAdapter(requests.adapters.HTTPAdapter):
    """requests' transport adapter without two steps of every exchange that change nothing for
    Semrush (~130 of its ~900 Python calls per exchange, seven exchanges per chain):

    - the connection pool of an origin is looked up once, not re-derived from the URL and the
      TLS settings on every call (a proxied request still goes through requests' own lookup);
    - the answer is built without running its headers through the session's cookie jar, which
      keeps no cookie anyway (`_PooledSessions`).

    `send` is requests' own, so `responses` mocks it as it mocks any adapter."""

    def __init__(self) -> None:
        super().__init__()
        self._origin_pools: dict[tuple[str, str, Any, Any], Any] = {}

    def get_connection_with_tls_context(
        self,
        request: requests.PreparedRequest,
        verify: Any,
        proxies: Any = None,
        cert: Any = None,
    ) -> Any:
        if proxies and requests.utils.select_proxy(request.url or "", proxies):
            return super().get_connection_with_tls_context(request, verify, proxies, cert)
        scheme, netloc = urlsplit(request.url or "")[:2]
        key = (scheme, netloc, verify if isinstance(verify, str | bool) else str(verify), cert)
        pool = self._origin_pools.get(key)
        if pool is None:
            pool = super().get_connection_with_tls_context(request, verify, proxies, cert)
            self._origin_pools[key] = pool
        return pool

    def build_response(self, req: requests.PreparedRequest, resp: Any) -> requests.Response:
        response = requests.Response()
        response.status_code = getattr(resp, "status", None)  # type: ignore[assignment]
        response.headers = requests.structures.CaseInsensitiveDict(getattr(resp, "headers", {}))
        response.encoding = requests.utils.get_encoding_from_headers(response.headers)
        response.raw = resp
        response.reason = resp.reason
        response.url = req.url.decode() if isinstance(req.url, bytes) else str(req.url)
        response.request = req
        response.connection = self
        return response

    def close(self) -> None:
        """Close the pools (requests' own), and forget them: the next exchange opens anew."""
        self._origin_pools.clear()
        super().close()


class _PooledSessions(threading.local):
    """One keep-alive ``requests.Session`` per thread of each process.

    A ``requests.Session`` is not thread-safe, so it is never shared between threads; a process
    forked after a session was made (prefork pools) makes its own rather than sharing the
    parent's sockets. Cookies are never kept: a session serves every organization's credential
    in turn, and nothing one answer sets may travel with another tenant's request.
    """

    pid: int = 0
    session: requests.Session | None = None

    def get(self) -> requests.Session:
        pid = os.getpid()
        if self.session is None or self.pid != pid:
            session = requests.Session()
            session.cookies.set_policy(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
            for prefix in ("https://", "http://"):
                session.mount(prefix, _SemrushAdapter())
            # With `trust_env`, requests re-reads the environment (proxies, no_proxy, netrc, CA
            # bundle) on every call: ~0.3 ms of CPU each. The environment does not change
            # under a running process, so it is read once: the CA bundle here, the proxies per
            # base URL (`environ_proxies`), and netrc never (the token is our own header).
            session.trust_env = False
            session.verify = (
                os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or True
            )
            self.session, self.pid = session, pid
        return self.session


_pooled = _PooledSessions()


@functools.lru_cache(maxsize=16)
def environ_proxies(base_url: str) -> dict[str, str]:
    """The proxies the environment sets for `base_url` (honouring no_proxy), read once."""
    return dict(requests.utils.get_environ_proxies(base_url))


def pooled_session() -> requests.Session:
    """This thread's shared keep-alive session (see :class:`_PooledSessions`)."""
    return _pooled.get()


def semrush_client_for(
    *,
    token: str | None = None,
    log_context: Mapping[str, Any] | None = None,
    on_call: Callable[[str, int | None], None] | None = None,
) -> SemrushClient:
    """Build a client from Django settings, read at call time (never at import).

    Uses ``SEMRUSH_BASE_URL``, ``SEMRUSH_TIMEOUT_SECONDS`` (default 15) and, when ``token`` is
    None, ``SEMRUSH_API_TOKEN``. Raises :class:`SemrushConfigurationError` when the base URL or
    the token is missing or malformed.

    The client uses this thread's pooled session (:func:`pooled_session`): connections to
    Semrush are kept alive across clients, steps and requests instead of a new TCP (and TLS)
    handshake for every client. The token travels in each request's own header, never in the
    session. Such a client must stay in the thread that built it.
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
        session=pooled_session(),
    )


# ------------------------------------------------------------------------------------ helpers


@functools.lru_cache(maxsize=64)
def _sent_as_is(base_url: str) -> bool:
    """Whether requests would send the base URL as it is (see `SemrushClient._prepare`): asked
    once per base URL, as a client is made for every step."""
    return requests.Request("GET", base_url).prepare().url in (base_url, base_url + "/")


def _normalize_base_url(base_url: str) -> str:
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


def _parse_retry_after(response: requests.Response, *, now: float) -> float | None:
    """``Retry-After`` as seconds from now: delta-seconds or an HTTP-date; None if absent/bad."""
    raw = response.headers.get("Retry-After")
    if raw is None or not raw.strip():
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - now
    if math.isnan(seconds) or math.isinf(seconds):
        return None
    return max(seconds, 0.0)


def _is_json_body(response: requests.Response) -> bool:
    if not response.content or not response.content.strip():
        return False
    try:
        response.json()
    except ValueError:
        return False
    return True


def _connection_never_established(exc: requests.RequestException) -> bool:
    """True when the request provably never reached the server (safe to call unambiguous)."""
    if isinstance(exc, requests.ConnectTimeout):
        return True
    if not isinstance(exc, requests.ConnectionError):
        return False
    # urllib3 wraps "could not connect" (refused, DNS) in NewConnectionError; anything else
    # (a reset or a dropped response) may have happened after the server received the request.
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, NewConnectionError):
            return True
        reason = getattr(current, "reason", None)
        if isinstance(reason, BaseException):
            current = reason
            continue
        args = getattr(current, "args", ())
        nested = next((a for a in args if isinstance(a, BaseException)), None)
        current = nested if nested is not None else current.__cause__ or current.__context__
    return False


def _request_id(response: requests.Response) -> str | None:
    for header in ("X-Request-Id", "X-Request-ID", "X-Correlation-Id"):
        value = response.headers.get(header)
        if value:
            return value
    return None


def _elapsed_ms(started: float, finished: float) -> int:
    return max(round((finished - started) * 1000), 0)


def _expect_dict(body: Any, *, operation: str, required: tuple[str, ...] = ()) -> dict[str, Any]:
    if not isinstance(body, dict) or any(key not in body for key in required):
        raise SemrushUnexpectedResponseError(
            operation=operation, status=None, detail=f"expected an object with {list(required)}"
        )
    return body


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


def _expect_list_of_dicts(body: Any, *, operation: str) -> list[dict[str, Any]]:
    if not isinstance(body, list) or not all(isinstance(item, dict) for item in body):
        raise SemrushUnexpectedResponseError(
            operation=operation, status=None, detail="expected an array of objects"
        )
    return body
