"""Re-checking held credentials (SPEC §13.2): beat runs `credentials_recheck` every
`SERENITY_CREDENTIAL_RECHECK_SECONDS`, and an org's credential changed (admin or command) runs it
at once for that org. A held credential gets one read with it (the language catalogue): a 2xx
lifts the hold and wakes the steps that waited. Steps whose credential is not held (any more)
are woken too: a hold older than `SERENITY_CREDENTIAL_HOLD_MAX_SECONDS` has ended (they meet the
refusal and fail `upstreamUnauthorized`), and an org given another credential uses it."""

from __future__ import annotations

import logging
import uuid

from django.db import transaction
from django.utils import timezone

from jobs.publishing import publish_task
from kernel.errors import ConfigurationError
from provisioning import quota
from provisioning.credentials import (
    Credential,
    credential_accepted,
    credential_of,
    credentials_in_use,
    held_steps_wake,
    label,
    state_of,
)
from provisioning.models import UpstreamCredential
from provisioning.semrush import SemrushError, SemrushUnauthorizedError, semrush_client_for
from serenity.models import Organization

logger = logging.getLogger("serenity.quota")

RECHECK_TASK = "provisioning.recheck_credentials"


def credentials_recheck(*, organization_id: uuid.UUID | None = None) -> dict[str, int]:
    """Re-check every credential in use (or `organization_id`'s) and wake the steps that no
    longer have a reason to wait (module docstring). Counts what it did."""
    counts = {"checked": 0, "lifted": 0, "woken": 0}
    if organization_id is not None:
        organization = Organization.objects.filter(pk=organization_id).first()
        if organization is None:
            return counts
        try:
            found = [credential_of(organization)]
        except ConfigurationError:
            return counts
        scope: list[uuid.UUID] | None = [organization.id]
    else:
        found, scope = credentials_in_use(), None
    for credential in found:
        state = state_of(credential)
        if state.refused_at is not None:
            counts["checked"] += 1
            if _read_accepted(credential):
                counts["lifted"] += 1
                state = state_of(credential)
        if not state.held:
            counts["woken"] += held_steps_wake(credential, organization_ids=scope)
    return counts


def _read_accepted(credential: Credential) -> bool:
    """One read with the credential (the limiter's permit taken, its hold not in the way): a
    2xx accepts it again (the hold lifts); a 401 records the check."""
    permits = quota.CredentialPermits(
        key=credential.key, limits=credential.limits, org_id="recheck", in_step=False
    )
    try:
        with quota.patient_permits():
            semrush_client_for(token=credential.token, permits=permits).list_languages()
    except SemrushUnauthorizedError:
        UpstreamCredential.objects.filter(key=credential.key).update(checked_at=timezone.now())
        logger.info("Semrush still refuses the credential", extra={"credential": label(credential)})
        return False
    except SemrushError as exc:
        logger.warning(
            "the credential's re-check could not read Semrush",
            extra={"credential": label(credential), "error_class": type(exc).__name__},
        )
        return False
    credential_accepted(credential)
    return True


def recheck_on_commit(*, organization_id: uuid.UUID) -> None:
    """The org's credential changed (admin or command): re-check it on a worker once this
    commits, so that work held for a refused credential resumes at once (module docstring)."""
    transaction.on_commit(
        lambda: publish_task(task_name=RECHECK_TASK, args=[str(organization_id)]), robust=True
    )
