"""Sending one request to Semrush: pooled sessions, timeouts, transport failures.

This module knows HTTP and ``requests``, and nothing of Semrush's operations, statuses or retry
policy (those are :mod:`provisioning.semrush.client`'s and :mod:`.calls`'). It guarantees:

- Every request carries an explicit ``(connect, read)`` timeout and is sent with
  ``requests.Session.send`` of a ``requests.Request(...).prepare()``d request, on a session
  mounted with requests' own ``HTTPAdapter``.
- Redirects are never followed: an answer is returned as Semrush gave it.
- The body is read before :meth:`Transport.send` returns, which hands the connection back to the
  pool.
- A request that got no usable answer raises :class:`TransportError`, which says whether the
  deadline passed and whether the request provably never reached the server. No ``requests``
  exception leaves this module.
"""

from __future__ import annotations

import functools
import http.cookiejar
import os
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from requests.auth import AuthBase
from urllib3.exceptions import NewConnectionError

DEFAULT_TIMEOUT_SECONDS = 15.0

# A session serves one thread, which sends one request at a time, mostly to one origin
# (`SEMRUSH_BASE_URL`): a few origins remembered, a couple of idle connections kept per origin.
POOL_CONNECTIONS = 4
POOL_MAXSIZE = 2


class TransportError(Exception):
    """No usable answer: connection refused or reset, DNS or TLS failure, deadline passed.

    ``description`` names the failure (``"ReadTimeout: ..."``); it may echo the URL, never the
    token, which travels in a header. ``timed_out`` says the deadline passed; ``never_sent``
    that the connection was never established, so the server cannot have acted on the request.
    The ``requests`` exception is the ``__cause__``.
    """

    def __init__(self, description: str, *, timed_out: bool, never_sent: bool) -> None:
        super().__init__(description)
        self.description = description
        self.timed_out = timed_out
        self.never_sent = never_sent


class BearerToken(AuthBase):
    """``Authorization: Bearer <token>`` on each request.

    Given as the request's ``auth``, it also keeps requests from applying ``~/.netrc``
    credentials for the Semrush host over our header.
    """

    def __init__(self, token: str) -> None:
        self.token = token

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self.token}"
        return request

    def __repr__(self) -> str:
        return "BearerToken([REDACTED])"


def new_session() -> requests.Session:
    """A ``requests.Session`` for Semrush: pooled keep-alive connections, no cookies kept.

    Cookies are refused because a session serves every organization's credential in turn:
    nothing one answer sets may travel with another tenant's request.
    """
    session = requests.Session()
    # The environment (proxies, CA bundle) is read by `environment_settings`, once per value,
    # not by requests on every request (it walks the whole environment each time).
    session.trust_env = False
    session.cookies.set_policy(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
    adapter = HTTPAdapter(pool_connections=POOL_CONNECTIONS, pool_maxsize=POOL_MAXSIZE)
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return session


class PooledSessions(threading.local):
    """One keep-alive session (:func:`new_session`) per thread of each process.

    A ``requests.Session`` is not thread-safe, so it is never shared between threads; a process
    forked after a session was made (prefork pools) makes its own rather than sharing the
    parent's sockets.
    """

    pid: int = 0
    session: requests.Session | None = None

    def get(self) -> requests.Session:
        pid = os.getpid()
        if self.session is None or self.pid != pid:
            self.session, self.pid = new_session(), pid
        return self.session


_pooled = PooledSessions()


def pooled_session() -> requests.Session:
    """This thread's shared keep-alive session (see :class:`PooledSessions`)."""
    return _pooled.get()


class Transport:
    """Sends one request with a bearer token and a timeout; no retries, no status handling.

    Uses the given session, or a private one (:func:`new_session`) closed by :meth:`close`.
    """

    def __init__(
        self, *, token: str, timeout: float, session: requests.Session | None = None
    ) -> None:
        self.timeout = timeout
        self._auth = BearerToken(token)
        self._owns_session = session is None
        self.session = session if session is not None else new_session()

    def send(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str] | None = None,
        json_body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> requests.Response:
        """Send one request and return the answer, whatever its status. ``headers`` are sent
        besides ``Accept`` (the call's ``X-Request-Id``).

        Raises :class:`TransportError` when no answer arrived.
        """
        proxies, verify = environment_settings(url)
        request = requests.Request(
            method,
            url,
            params=params,
            json=json_body,
            headers={"Accept": "application/json", **(headers or {})},
            auth=self._auth,
        )
        try:
            # A request this class built whole (URL, headers, auth, body): prepared on its own
            # and sent with `Session.send`, skipping the merge with session-level settings that
            # `Session.request` would make (this session carries none).
            return self.session.send(
                request.prepare(),
                timeout=(self.timeout, self.timeout),
                allow_redirects=False,
                proxies=proxies,
                verify=verify,
            )
        except requests.RequestException as exc:
            raise TransportError(
                f"{type(exc).__name__}: {exc}",
                timed_out=isinstance(exc, requests.Timeout),
                never_sent=_connection_never_established(exc),
            ) from exc

    def close(self) -> None:
        """Close the session if this transport made it."""
        if self._owns_session:
            self.session.close()


# What requests reads from the environment when `trust_env` is on, besides ~/.netrc (never
# wanted: the bearer token is the credential).
_PROXY_VARIABLES = tuple(
    name
    for base in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    for name in (base, base.upper())
)
_CA_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")


def environment_settings(url: str) -> tuple[dict[str, str], str | bool]:
    """The proxies and CA bundle the environment gives a request to `url`, as requests itself
    would take them with `trust_env` (HTTP(S)_PROXY, ALL_PROXY, NO_PROXY, REQUESTS_CA_BUNDLE,
    CURL_CA_BUNDLE), computed once per origin and environment values."""
    parts = urlsplit(url)
    values = tuple(os.environ.get(name) for name in (*_PROXY_VARIABLES, *_CA_VARIABLES))
    proxies, verify = _environment_settings(f"{parts.scheme}://{parts.netloc}", values)
    return dict(proxies), verify


@functools.lru_cache(maxsize=64)
def _environment_settings(
    origin: str, values: tuple[str | None, ...]
) -> tuple[dict[str, str], str | bool]:
    proxies = requests.utils.get_environ_proxies(origin)
    ca_bundle = next((v for v in values[len(_PROXY_VARIABLES) :] if v), None)
    return dict(proxies), ca_bundle or True


def _connection_never_established(exc: requests.RequestException) -> bool:
    """True when the request provably never reached the server."""
    if isinstance(exc, requests.ConnectTimeout):
        return True
    if not isinstance(exc, requests.ConnectionError):
        return False
    # urllib3 reports "could not connect" (refused, DNS) as NewConnectionError, wrapped in its
    # retry error; anything else (a reset, a dropped answer) may have happened after the server
    # received the request.
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
        nested = next((a for a in current.args if isinstance(a, BaseException)), None)
        current = nested if nested is not None else current.__cause__ or current.__context__
    return False
