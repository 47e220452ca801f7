"""The API as the command uses it: a `requests` session with the token, one method per call,
and one error type carrying what the API answered (its `error` code and message)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

TIMEOUT_SECONDS = 30.0


class ConfigError(Exception):
    """The command is not configured (a variable or option missing)."""


class ApiError(Exception):
    """The API refused a call (`status`, its `error` code and message), or could not be
    reached (`status` 0)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}" if status else message)
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Config:
    api_url: str
    token: str
    org_id: str

    @classmethod
    def from_environment(cls, *, org: str | None) -> Config:
        """SERENITY_API_URL, SERENITY_TOKEN, and the org (--org, else SERENITY_ORG_ID)."""
        api_url = os.environ.get("SERENITY_API_URL", "").strip()
        token = os.environ.get("SERENITY_TOKEN", "").strip()
        org_id = (org or os.environ.get("SERENITY_ORG_ID", "")).strip()
        for value, what in (
            (
                api_url,
                "SERENITY_API_URL is not set (the API's address, e.g. https://serenity.example)",
            ),
            (token, "SERENITY_TOKEN is not set (an API token of a writer of the organization)"),
            (org_id, "no organization: pass --org ORG_ID or set SERENITY_ORG_ID"),
        ):
            if not value:
                raise ConfigError(what)
        if not api_url.startswith(("http://", "https://")):
            raise ConfigError(f"SERENITY_API_URL must start with http:// or https:// ({api_url!r})")
        return cls(api_url=api_url.rstrip("/"), token=token, org_id=org_id)


class SerenityApi:
    def __init__(self, config: Config, session: requests.Session | None = None) -> None:
        self.config = config
        self.session = session or requests.Session()
        self.session.headers.update(
            {"Authorization": f"Bearer {config.token}", "User-Agent": "serenity-cli"}
        )

    def _url(self, path: str) -> str:
        return f"{self.config.api_url}/v2/orgs/{self.config.org_id}/serenity{path}"

    def _send(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        try:
            response = self.session.request(
                method, self._url(path), timeout=TIMEOUT_SECONDS, **kwargs
            )
        except requests.RequestException as exc:
            raise ApiError(0, "unreachable", f"cannot reach {self.config.api_url}: {exc}") from exc
        if response.status_code >= 400:
            try:
                body = response.json()
                code, message = str(body["error"]), str(body.get("message", ""))
            except (ValueError, KeyError, TypeError):
                code, message = "httpError", f"HTTP {response.status_code}"
            raise ApiError(response.status_code, code, message)
        return response

    def onboard_csv(self, path: Path, *, max_failed: int | None) -> dict[str, Any]:
        params = {"maxFailedItems": max_failed} if max_failed is not None else None
        data = path.read_bytes()
        response = self._send(
            "POST",
            "/onboardings",
            data=data,
            params=params,
            headers={"Content-Type": "text/csv; charset=utf-8"},
        )
        return dict(response.json())

    def retry(self, onboarding_id: str) -> dict[str, Any]:
        return dict(self._send("POST", f"/onboardings/{onboarding_id}/retry", json={}).json())

    def onboarding(self, onboarding_id: str) -> dict[str, Any]:
        """The onboarding's document (its counts; one item, not its pages)."""
        return dict(self._send("GET", f"/onboardings/{onboarding_id}", params={"limit": 1}).json())

    def items_csv(self, onboarding_id: str) -> str:
        """Every item of the onboarding, as the API's CSV."""
        response = self._send(
            "GET", f"/onboardings/{onboarding_id}/items", headers={"Accept": "text/csv"}
        )
        response.encoding = "utf-8"
        return response.text

    def job(self, job_id: str) -> dict[str, Any]:
        return dict(self._send("GET", f"/jobs/{job_id}").json())
