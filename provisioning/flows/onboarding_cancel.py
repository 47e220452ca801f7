"""Ending an onboarding's items early (SPEC §11.2, §13.2): a user's cancel, and the failure
threshold's (`maxFailedItems`: once that many items failed, the onboarding is cancelled and
its items that have not ended are cancelled as a user's cancel would, so a redrive takes
them). Both are set-based, whatever the number of items (SPEC §12.4)."""

from __future__ import annotations

import uuid

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from jobs import services as job_services
from jobs.publishing import publish_task
from jobs.signals import chains_ended_check
from kernel import context
from provisioning import services
from provisioning.exceptions import OnboardingFinishedError
from provisioning.guard import attempts_lock
from provisioning.models import (
    AttemptReason,
    AttemptStatus,
    Onboarding,
    OnboardingCancelledBy,
    OnboardingItem,
    ProvisioningAttempt,
)
from serenity.models import Market, MarketStatus

# The task that cancels the rest of an onboarding its threshold cancelled (provisioning.tasks).
THRESHOLD_CANCEL_TASK = "provisioning.onboarding_threshold_cancel"


def onboarding_cancel(*, onboarding: Onboarding) -> None:
    """Cancel every item that has not ended, as the cancel route cancels a chain (SPEC §6.6),
    with set-based writes whatever the number of items (SPEC §12.4): before promotion the
    attempt fails `cancelled` and the chain is CANCELLED; after it, a chained job that has not
    started is CANCELLED; one that is running goes on and ends as it will. The items that
    ended are counted, and `chains_ended` sent for them, in the same transaction. Raises
    `OnboardingFinishedError` for an onboarding that has ended (COMPLETED or CANCELLED, SPEC
    §12.2): nothing changes.

    The cancel mark is a conditional write on an onboarding that has not ended, committed on
    its own (so the onboarding's row is not held while the items' rows are locked: an item's
    ending locks its job, then the onboarding); the completion (`onboarding_complete_if_ended`)
    is conditional on the same row, so of a cancel and a last item's end racing, the first
    write decides the onboarding's status. Idempotent while the onboarding is in progress: a
    second cancel cancels whatever the first left (nothing, unless it failed halfway)."""
    now = timezone.now()
    marked = Onboarding.objects.filter(
        pk=onboarding.pk, completed_at__isnull=True, cancelled_at__isnull=True
    ).update(cancelled_at=now, cancelled_by=OnboardingCancelledBy.USER, updated_at=now)
    if (
        not marked
        and Onboarding.objects.filter(pk=onboarding.pk, completed_at__isnull=False).exists()
    ):
        raise OnboardingFinishedError()
    onboarding_items_cancel(onboarding_id=onboarding.pk)


def onboarding_items_cancel(*, onboarding_id: uuid.UUID) -> None:
    """Cancel the items of a cancelled onboarding that have not ended (a user's cancel, the
    failure threshold's: `tasks.onboarding_threshold_cancel`), in one transaction. Idempotent:
    a second run cancels whatever the first left."""
    with transaction.atomic():
        roots = list(
            OnboardingItem.objects.filter(
                onboarding_id=onboarding_id, ended_status__isnull=True, job__isnull=False
            ).values_list("job_id", flat=True)
        )
        chains_cancel(root_ids=roots)


def chains_cancel(*, root_ids: list[uuid.UUID]) -> None:
    """`services.job_cancel` for many brand-create chains, in a fixed number of statements.
    Only an attempt with a candidate recorded gets its cleanup scheduled now; one whose
    candidate a running step is creating is emptied by the sweep (`attempts_needing_cleanup`)
    as any failed attempt's."""
    attempts = attempts_lock(root_ids)
    before = [a for a in attempts if not a.workspace_promoted]
    after = [a for a in attempts if a.workspace_promoted]
    now = timezone.now()
    ProvisioningAttempt.objects.filter(
        pk__in=[a.pk for a in before], status=AttemptStatus.PENDING
    ).update(
        status=AttemptStatus.FAILED,
        reason=AttemptReason.CANCELLED,
        error="Provisioning was cancelled.",
        updated_at=now,
        finished_at=now,
        **context.actor_fields("cancelled"),
    )
    job_services.chains_cancel(root_ids=[a.job_id for a in before if a.job_id])
    for attempt in before:
        if attempt.candidate_workspace_id:
            services.schedule_cleanup(attempt_id=attempt.pk)
    changed = job_services.chains_cancel(
        root_ids=[a.job_id for a in after if a.job_id], only_unstarted=True
    )
    ready = [a.pk for a in after if a.job_id in changed]
    ProvisioningAttempt.objects.filter(pk__in=ready, status=AttemptStatus.PENDING).update(
        status=AttemptStatus.READY, reason=None, error=None, updated_at=now, finished_at=now
    )
    Market.objects.filter(
        reserved_by__in=[a.pk for a in before] + ready,
        status=MarketStatus.CREATING,
        semrush_project_id=None,
    ).delete()
    chains_ended_check(root_ids=root_ids)


def threshold_mark(onboarding_id: uuid.UUID) -> bool:
    """Once `max_failed_items` items failed (SPEC §13.2), the onboarding is marked cancelled
    by the threshold: a conditional write on one not cancelled yet, so of items failing
    together (or a user's cancel) the first decides. Whether this call marked it."""
    now = timezone.now()
    return bool(
        Onboarding.objects.filter(
            pk=onboarding_id,
            completed_at__isnull=True,
            cancelled_at__isnull=True,
            max_failed_items__isnull=False,
            failed__gte=F("max_failed_items"),
        ).update(
            cancelled_at=now,
            cancelled_by=OnboardingCancelledBy.FAILURE_THRESHOLD,
            updated_at=now,
        )
    )


def threshold_cancel_schedule(onboarding_id: uuid.UUID) -> None:
    """After commit, not in it: this transaction holds an item's job, and cancelling locks
    the others' (whose endings lock their job, then the onboarding). Should the message be
    lost, the items run on and end as they will; the onboarding still ends CANCELLED."""

    def send() -> None:
        if not publish_task(task_name=THRESHOLD_CANCEL_TASK, args=[str(onboarding_id)]):
            onboarding_items_cancel(onboarding_id=onboarding_id)

    transaction.on_commit(send, robust=True)
