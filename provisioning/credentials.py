"""A Semrush credential as the service knows it (SPEC §13.2, §13.3): which one an org uses, its
key in the limiter (:mod:`provisioning.quota`), and its state: the rate it is paced at now, and
whether it is on hold.

The hold: a 401 on a credential that has answered 2xx before (`UpstreamCredential.accepted_at`)
puts it on hold (`refused_at`) instead of failing the work: every client of it refuses its calls
as held (`CredentialWatch`, the `quota.CredentialGuard` of `upstream.client_for_org`), a chained
step waits (`quota.CredentialHeldError`), a sync request answers 503 `credentialRefused`.
:mod:`provisioning.credential_hold` re-checks held credentials and wakes the waiting steps when
a hold lifts (a 2xx with it, from a re-check or any call).

One credential, one set of limits: orgs sharing the service-wide credential share its bucket at
the service-wide limits (an org's override would conflict with the others'); an org with a
credential of its own has its own bucket, at its override where it has one.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.utils import timezone

from jobs.dispatch import jobs_wake
from kernel.errors import ConfigurationError
from provisioning import quota
from provisioning.models import UpstreamCredential
from provisioning.signals import credential_refused as credential_refused_signal
from serenity.models import Organization

logger = logging.getLogger("serenity.quota")


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


# --- the hold (SPEC §13.2) ----------------------------------------------------------------------


class CredentialStatus(StrEnum):
    OK = "ok"
    REFUSED = "refused"


@dataclass(frozen=True)
class CredentialState:
    """A credential's state: `refused` while a hold stands (since `refused_at`), `ok` otherwise;
    `accepted`: it has answered 2xx before (a 401 then holds work instead of failing it)."""

    status: CredentialStatus
    accepted: bool
    refused_at: datetime | None
    checked_at: datetime | None

    @property
    def held(self) -> bool:
        """On hold: refused, and for less than `SERENITY_CREDENTIAL_HOLD_MAX_SECONDS` (after it,
        the work that waited runs into the refusal and fails as a never-accepted one does)."""
        if self.refused_at is None:
            return False
        age = (timezone.now() - self.refused_at).total_seconds()
        return age < float(settings.SERENITY_CREDENTIAL_HOLD_MAX_SECONDS)


def state_of(credential: Credential) -> CredentialState:
    """The credential's state (one read); a credential never seen is `ok`, not accepted."""
    row = UpstreamCredential.objects.filter(key=credential.key).first()
    if row is None:
        return CredentialState(CredentialStatus.OK, False, None, None)
    return CredentialState(
        CredentialStatus.REFUSED if row.refused_at is not None else CredentialStatus.OK,
        row.accepted_at is not None,
        row.refused_at,
        row.checked_at,
    )


def credential_accepted(credential: Credential) -> bool:
    """Upstream answered 2xx with the credential: it is accepted from now on (its row exists:
    rows are only made here), and a hold on it lifts. True when a hold lifted (its waiting work
    is then woken: `held_steps_wake`). Two statements, none that waits on another's lock."""
    now = timezone.now()
    _insert_if_missing(credential.key, now)
    lifted = UpstreamCredential.objects.filter(key=credential.key, refused_at__isnull=False).update(
        refused_at=None, checked_at=now
    )
    if lifted:
        logger.warning(
            "Semrush accepts the credential again: its hold is lifted",
            extra={"credential": label(credential), "source": credential.source},
        )
    return lifted == 1


def _insert_if_missing(key: str, now: datetime) -> None:
    """The credential's row, accepted `now`, unless it exists (once per credential and process:
    `INSERT … ON CONFLICT DO NOTHING` through the ORM)."""
    UpstreamCredential.objects.bulk_create(
        [UpstreamCredential(key=key, accepted_at=now, checked_at=now)], ignore_conflicts=True
    )


def credential_refused(credential: Credential, *, organization_id: uuid.UUID) -> bool:
    """Upstream answered 401 with the credential. True: the credential is on hold (it had been
    accepted before); the hold that this refusal began sends `credential_refused` (once per
    hold). False: never accepted, or held too long already: the refusal fails as SPEC §7 says."""
    now = timezone.now()
    began = UpstreamCredential.objects.filter(
        key=credential.key, accepted_at__isnull=False, refused_at__isnull=True
    ).update(refused_at=now, checked_at=now)
    if began:
        logger.warning(
            "Semrush refuses a credential it accepted before: the work that uses it waits",
            extra={"credential": label(credential), "source": credential.source},
        )
        credential_refused_signal.send(
            sender=Credential,
            organization_id=organization_id,
            source=credential.source,
            refused_at=now,
        )
        return True
    # Still held: this refusal was its re-check (`CredentialWatch.held`).
    UpstreamCredential.objects.filter(key=credential.key, refused_at__isnull=False).update(
        checked_at=now
    )
    return state_of(credential).held


# What this process has learnt of credentials (by key), so that the common case costs no
# statement: accepted and recorded (`_RECORDED`), or seen on hold (`_SEEN_HELD`: the database
# says whether it still is). A hold that another process began is learnt here from the 401 of
# the next call (a refused call did not run), a lift from the database.
_RECORDED: set[str] = set()
_SEEN_HELD: set[str] = set()


class CredentialWatch:
    """A client's view of its credential's hold (`quota.CredentialGuard`). Before a call, the
    database is read only while this process has seen the credential on hold; the first 2xx of
    a credential in a process records it accepted (and lifts a hold); a 401 asks the database
    whether the credential is now held (`credential_refused`)."""

    def __init__(self, credential: Credential, *, organization_id: uuid.UUID) -> None:
        self._credential = credential
        self._organization_id = organization_id

    def held(self) -> bool:
        """Held, unless its re-check is due: then this call is the re-check (a step that
        comes back without beat's re-check having run makes the refused call itself, one
        per `SERENITY_CREDENTIAL_RECHECK_SECONDS`; a 2xx lifts the hold)."""
        key = self._credential.key
        if key not in _SEEN_HELD:
            return False
        state = state_of(self._credential)
        if not state.held:
            _SEEN_HELD.discard(key)
            return False
        checked = state.checked_at or state.refused_at
        assert checked is not None
        due = float(settings.SERENITY_CREDENTIAL_RECHECK_SECONDS)
        return (timezone.now() - checked).total_seconds() < due

    def answered(self, status: int) -> bool:
        key = self._credential.key
        if 200 <= status < 300:
            if key not in _RECORDED:
                if credential_accepted(self._credential):
                    held_steps_wake(self._credential)
                _RECORDED.add(key)
            _SEEN_HELD.discard(key)
            return False
        if status != 401:
            return False
        held = credential_refused(self._credential, organization_id=self._organization_id)
        if held:
            _SEEN_HELD.add(key)
            # Its next 2xx here lifts the hold (the re-check does it too).
            _RECORDED.discard(key)
        return held


WAITING_FOR = "credential"


def organizations_using(credential: Credential) -> Any:
    """The ids of the orgs whose calls use `credential` (a query for the service's)."""
    if credential.source == "service":
        return Organization.objects.filter(semrush_credential_encrypted="").values("id")
    ids = []
    for organization in Organization.objects.exclude(semrush_credential_encrypted=""):
        try:
            if credential_of(organization).key == credential.key:
                ids.append(organization.id)
        except ConfigurationError:
            continue
    return ids


def held_steps_wake(credential: Credential, *, organization_ids: Any = None) -> int:
    """The steps that wait for `credential` (or for the orgs given) run now: its hold lifted
    (they make the refused call again) or ended (they meet the refusal and fail)."""
    woken = jobs_wake(
        waiting_for=WAITING_FOR,
        organization_ids=(
            organization_ids if organization_ids is not None else organizations_using(credential)
        ),
    )
    if woken:
        logger.info(
            "steps that waited for the credential run again",
            extra={"credential": label(credential), "woken": woken},
        )
    return woken
