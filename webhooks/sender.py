"""The one HTTP client of webhooks: a signed POST to a checked address (SPEC §11.3).

Signatures are the Standard Webhooks ones, made by the `standardwebhooks` package: headers
`webhook-id` (the event's id: the same on every retry), `webhook-timestamp` (this attempt's
time) and `webhook-signature` (`v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`).

The connection goes to the address `webhooks.addresses` checked, never to a second resolution
of the name: the URL is rewritten to that address, `Host` carries the name, and for https the
TLS handshake sends the name (SNI) and checks the certificate against it (the adapter's
`server_hostname` and `assert_hostname`, requests' documented way to configure its pool
manager: `HTTPAdapter.init_poolmanager`). Redirects are not followed (a 3xx is a failed
attempt), environment proxies are ignored, and nothing is retried here: retries are the
delivery's schedule.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import requests
from requests.adapters import DEFAULT_POOLBLOCK, HTTPAdapter
from standardwebhooks.webhooks import Webhook as StandardWebhook

from webhooks.addresses import AddressRefusedError, addresses_resolve, target_parse

# A 2xx within this many seconds delivers (connect, and the status line after the body).
TIMEOUT_SECONDS = 10.0
USER_AGENT = "serenity-webhooks/1"


@dataclass(frozen=True)
class AttemptResult:
    status_code: int | None
    error: str | None
    # How long the attempt took, from the address check to the answer's status line.
    duration_ms: int = 0

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


class _PinnedHostAdapter(HTTPAdapter):
    """TLS to an address: SNI and the certificate check use `hostname`, not the address."""

    def __init__(self, hostname: str) -> None:
        self._hostname = hostname
        super().__init__(max_retries=0)

    def init_poolmanager(
        self, connections: int, maxsize: int, block: bool = DEFAULT_POOLBLOCK, **pool_kwargs: Any
    ) -> None:
        super().init_poolmanager(
            connections,
            maxsize,
            block,
            server_hostname=self._hostname,
            assert_hostname=self._hostname,
            **pool_kwargs,
        )


def signed_headers(*, secrets: list[str], message_id: str, body: str) -> dict[str, str]:
    """One signature per secret, space-separated (`v1,<sig-new> v1,<sig-old>` while a rotated
    secret is still valid), as Standard Webhooks allows: a receiver verifying with either
    secret accepts the message."""
    timestamp = datetime.now(UTC)
    signatures = [StandardWebhook(s).sign(message_id, timestamp, body) for s in secrets]
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(timestamp.timestamp())),
        "webhook-signature": " ".join(signatures),
    }


def webhook_post(*, url: str, secrets: list[str], message_id: str, body: str) -> AttemptResult:
    """One attempt, timed: see `_post`."""
    started = time.monotonic()
    result = _post(url=url, secrets=secrets, message_id=message_id, body=body)
    elapsed = round((time.monotonic() - started) * 1000)
    return replace(result, duration_ms=elapsed)


def _post(*, url: str, secrets: list[str], message_id: str, body: str) -> AttemptResult:
    """One attempt: check the URL and every address its host resolves to, then POST the signed
    body to the first address. Never raises for the receiver's or the network's failures: they
    are the attempt's `error` (short, no secret)."""
    try:
        target = target_parse(url)
        address = addresses_resolve(target)[0]
    except AddressRefusedError as refused:
        return AttemptResult(status_code=None, error=f"refused: {refused}")
    headers = {
        **signed_headers(secrets=secrets, message_id=message_id, body=body),
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "Host": target.host_header,
    }
    prepared = requests.Request(
        "POST", target.url_for(address), headers=headers, data=body.encode()
    ).prepare()
    with requests.Session() as session:
        session.trust_env = False  # no proxy from the environment: we connect where we checked
        session.mount("https://", _PinnedHostAdapter(target.host))
        session.mount("http://", HTTPAdapter(max_retries=0))
        try:
            response = session.send(
                prepared,
                timeout=(TIMEOUT_SECONDS, TIMEOUT_SECONDS),
                allow_redirects=False,
                stream=True,
            )
        except requests.Timeout:
            return AttemptResult(status_code=None, error="timeout: no answer within 10 s")
        except requests.RequestException as exc:
            return AttemptResult(status_code=None, error=f"connection failed: {type(exc).__name__}")
        with response:
            code = response.status_code
    if 200 <= code < 300:
        return AttemptResult(status_code=code, error=None)
    return AttemptResult(status_code=code, error=f"answered {code}")
