"""The drift sweep (SPEC §13.1): beat calls it every `SERENITY_DRIFT_SWEEP_TICK_SECONDS`; it
begins a reconciliation for each Serenity org that is due: none of the org's swept ones began
within `SERENITY_DRIFT_SWEEP_INTERVAL_SECONDS`, and (an org never swept) its own offset in the
interval (from its id) falls in this tick, so that orgs do not all start together. Plan-only,
unless the org's `driftRepair` is `auto`. An org with a reconciliation in progress is left for
a later tick. It also re-sends the next batch of a plan whose message was lost (nothing
recorded for an interval of ticks)."""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Max, Q
from django.utils import timezone

from provisioning.reconcile.exceptions import ReconciliationInProgressError
from provisioning.reconcile.models import Reconciliation, ReconciliationStatus
from provisioning.reconcile.services import plan_send, reconciliation_begin
from serenity.models import DriftRepair, Organization, WorkspaceMode

logger = logging.getLogger("serenity.reconcile")

# A plan that recorded nothing for this many ticks has lost its message.
STALLED_TICKS = 3


def org_offset_seconds(organization_id: uuid.UUID, interval: float) -> float:
    """The org's place in the interval (whole seconds): stable, spread evenly by its id."""
    return float(int((organization_id.int % 1_000_003) / 1_000_003 * interval))


def sweep_due(*, organization_id: uuid.UUID, last_swept: datetime | None, now: datetime) -> bool:
    interval = float(settings.SERENITY_DRIFT_SWEEP_INTERVAL_SECONDS)
    tick = float(settings.SERENITY_DRIFT_SWEEP_TICK_SECONDS)
    if last_swept is not None:
        return (now - last_swept).total_seconds() >= interval
    phase = (now.timestamp() - org_offset_seconds(organization_id, interval)) % interval
    return phase < tick


def drift_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """Begin the due orgs' reconciliations; `{started, resent}`."""
    now = now or timezone.now()
    orgs = (
        Organization.objects.filter(
            serenity_enabled=True, workspace_mode=WorkspaceMode.SUBWORKSPACE
        )
        .exclude(Q(semrush_parent_workspace_id__isnull=True) | Q(semrush_parent_workspace_id=""))
        .annotate(
            last_swept=Max("reconciliations__created_at", filter=Q(reconciliations__swept=True))
        )
    )
    started = 0
    for org in orgs:
        if not sweep_due(organization_id=org.pk, last_swept=org.last_swept, now=now):
            continue
        try:
            reconciliation_begin(
                organization=org, repair=org.drift_repair == DriftRepair.AUTO, swept=True
            )
        except ReconciliationInProgressError:
            continue
        started += 1
    return {"started": started, "resent": _stalled_resend(now)}


def _stalled_resend(now: datetime) -> int:
    cutoff = now - timedelta(
        seconds=STALLED_TICKS * float(settings.SERENITY_DRIFT_SWEEP_TICK_SECONDS)
    )
    stalled = Reconciliation.objects.filter(
        status=ReconciliationStatus.IN_PROGRESS, plan_done=False, updated_at__lt=cutoff
    ).values_list("pk", flat=True)
    for reconciliation_id in stalled:
        logger.warning(
            "a reconciliation's plan stalled; sending its next batch again",
            extra={"reconciliation_id": str(reconciliation_id)},
        )
        plan_send(reconciliation_id)
    return len(stalled)
