"""A Semrush credential as the service knows it (SPEC §13.2, §13.3): which one an org uses, its
key in the limiter (:mod:`provisioning.quota`), and its state: the rate it is paced at now.

One credential, one set of limits: orgs sharing the service-wide credential share its bucket at
the service-wide limits (an org's override would conflict with the others'); an org with a
credential of its own has its own bucket, at its override where it has one.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from kernel.errors import ConfigurationError
from provisioning import quota
from serenity.models import Organization


@dataclass(frozen=True)
class Credential:
    """The credential an org's calls use: `source` `org` (its own) or `service` (the service's
    `SEMRUSH_API_TOKEN`); `token` None for the service's (the client reads the setting)."""

    token: str | None
    key: str
    limits: quota.Limits
    source: str

    @property
    def secret(self) -> str:
        return self.token if self.token is not None else str(settings.SEMRUSH_API_TOKEN or "")


def credential_of(organization: Organization) -> Credential:
    """The org's own credential, else the service's, with its limits (module docstring)."""
    try:
        token = organization.semrush_credential()
    except ValueError as exc:
        raise ConfigurationError("The organization's Semrush credential cannot be read.") from exc
    own = token is not None
    secret = token if token is not None else str(settings.SEMRUSH_API_TOKEN or "")
    return Credential(
        token=token,
        key=quota.credential_key(secret),
        limits=quota.limits_for(
            rate=organization.semrush_rate_limit_per_second if own else None,
            burst=organization.semrush_rate_limit_burst if own else None,
            concurrency=organization.semrush_concurrency_limit if own else None,
        ),
        source="org" if own else "service",
    )


def credentials_in_use() -> list[Credential]:
    """The service's credential and every org's own, once each (their orgs' overrides apply to
    an org's own)."""
    service = credential_of(Organization(name="service"))
    found = {service.key: service}
    for organization in Organization.objects.exclude(semrush_credential_encrypted="").only(
        "id",
        "semrush_credential_encrypted",
        "semrush_rate_limit_per_second",
        "semrush_rate_limit_burst",
        "semrush_concurrency_limit",
    ):
        try:
            credential = credential_of(organization)
        except ConfigurationError:
            continue
        found.setdefault(credential.key, credential)
    return list(found.values())


def rate_per_second(credential: Credential) -> float:
    """The rate the credential is paced at now, in the operator's terms (SPEC §13.3)."""
    return quota.rate_per_second(credential.key, credential.limits)


def label(credential: Credential) -> str:
    """A name for the credential fit for a metric label or an admin page: a short prefix of its
    keyed hash (never the credential)."""
    return credential.key.rsplit(":", 1)[-1][:12]
