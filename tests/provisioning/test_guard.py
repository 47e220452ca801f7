"""The concurrency guard (SPEC §6.2): one pending attempt per brand, stale ones reconciled, the
partial unique constraint as the last line of defence, and a deploy ahead of its migration."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.db import ProgrammingError, connection, transaction
from django.utils import timezone

from jobs.models import AsyncJob, JobStatus, JobStep
from jobs.services import CHAINED_POSITION
from provisioning import guard
from provisioning.exceptions import ProvisioningInProgressError
from provisioning.models import (
    AttemptReason,
    AttemptStartedBy,
    AttemptStatus,
    ProvisioningAttempt,
)
from serenity.models import Brand
from tests.factories import AsyncJobFactory, BrandFactory, ProvisioningAttemptFactory

STALE_ERROR = {
    "code": "provisioningStale",
    "message": "Provisioning was abandoned and has been reconciled.",
    "retryable": True,
}


@pytest.fixture
def brand(db: Any) -> Brand:
    return BrandFactory()


def chain_for(brand: Brand) -> tuple[AsyncJob, AsyncJob, AsyncJob]:
    """A provisioning chain mid-flight: a finished settle read, the next read (claimed), and the
    chained create-market waiting for promotion."""
    chained = AsyncJobFactory(
        brand=brand, step=JobStep.CREATE_MARKET, position=CHAINED_POSITION, run_after=None
    )
    root = AsyncJobFactory(brand=brand, status=JobStatus.COMPLETED)
    read = AsyncJobFactory(
        brand=brand,
        root=root,
        position=1,
        next=chained,
        claim_token=uuid.uuid4(),
        lease_expires_at=timezone.now() + timedelta(seconds=60),
    )
    AsyncJob.objects.filter(pk=root.pk).update(next=read, current=read)
    AsyncJob.objects.filter(pk=chained.pk).update(root=root)
    return root, read, chained


def attempt_begin(
    *, brand_id: uuid.UUID, started_by: AttemptStartedBy
) -> ProvisioningAttempt | None:
    """The guard's begin with nothing else in its transaction, as `flows.begin` begins sync
    work, the attempt left pending (the lease's own behaviour is what is tested here)."""
    with (
        transaction.atomic(durable=True),
        guard.lease(brand_id=brand_id, started_by=started_by) as begun,
    ):
        return begun.attempt


def pending(brand: Brand, **fields: Any) -> ProvisioningAttempt:
    fields.setdefault("started_by", AttemptStartedBy.CREATE_MARKET)
    return ProvisioningAttemptFactory(brand=brand, **fields)


def age(attempt: ProvisioningAttempt, seconds: float) -> None:
    ProvisioningAttempt.objects.filter(pk=attempt.pk).update(
        updated_at=timezone.now() - timedelta(seconds=seconds)
    )


def test_no_pending_attempt_begins_one(brand):
    # when
    attempt = attempt_begin(brand_id=brand.id, started_by=AttemptStartedBy.ACTIVATE)
    # then
    assert attempt is not None
    stored = ProvisioningAttempt.objects.get(brand=brand)
    assert stored.pk == attempt.pk
    assert (stored.status, stored.started_by, stored.reason) == (
        AttemptStatus.PENDING,
        AttemptStartedBy.ACTIVATE,
        None,
    )


def test_finished_attempts_do_not_block(brand):
    pending(brand, status=AttemptStatus.FAILED, reason=AttemptReason.UPSTREAM)
    pending(brand, status=AttemptStatus.READY)
    assert attempt_begin(brand_id=brand.id, started_by=AttemptStartedBy.ACTIVATE) is not None
    assert ProvisioningAttempt.objects.filter(brand=brand).count() == 3


def test_a_fresh_pending_attempt_of_a_job_answers_409_naming_the_job(brand):
    # given
    root, _, _ = chain_for(brand)
    blocking = pending(brand, job=root)
    # when
    with pytest.raises(ProvisioningInProgressError) as caught:
        attempt_begin(brand_id=brand.id, started_by=AttemptStartedBy.CREATE_MARKET)
    # then
    assert caught.value.http_status == 409
    assert caught.value.as_body() == {
        "error": "semrush_provisioning_in_progress",
        "message": "A Semrush provisioning job is already in progress for this brand.",
        "details": {"jobId": str(root.id)},
    }
    assert list(ProvisioningAttempt.objects.filter(brand=brand)) == [blocking]
    assert ProvisioningAttempt.objects.get(pk=blocking.pk).status == AttemptStatus.PENDING


def test_a_fresh_pending_sync_attempt_answers_409_with_a_null_job(brand):
    pending(brand)
    with pytest.raises(ProvisioningInProgressError) as caught:
        attempt_begin(brand_id=brand.id, started_by=AttemptStartedBy.DEACTIVATE)
    assert caught.value.details == {"jobId": None}
    assert ProvisioningAttempt.objects.filter(brand=brand).count() == 1


def test_a_chain_with_a_runnable_job_blocks_however_old_its_attempt(brand, settings):
    # given: a chain whose next read is still to run (its lease even expired: the dispatcher
    # re-publishes it), its attempt untouched for ten times the stale threshold
    settings.SERENITY_PROVISIONING_STALE_AFTER_SECONDS = 900
    root, read, _ = chain_for(brand)
    AsyncJob.objects.filter(pk=read.pk).update(lease_expires_at=timezone.now() - timedelta(1))
    blocking = pending(brand, job=root, candidate_workspace_id="ws-1", freshly_created=True)
    age(blocking, 9000)
    # when
    with pytest.raises(ProvisioningInProgressError) as caught:
        attempt_begin(brand_id=brand.id, started_by=AttemptStartedBy.ACTIVATE)
    # then: 409 naming the chain; nothing was reconciled or begun
    assert caught.value.details == {"jobId": str(root.id)}
    assert ProvisioningAttempt.objects.get(brand=brand).status == AttemptStatus.PENDING
    assert AsyncJob.objects.get(pk=read.pk).status == JobStatus.IN_PROGRESS


def test_a_chain_with_no_runnable_job_left_is_reconciled_at_once(brand, settings):
    # given: an abandoned chain (its settle reads ended, its chained job never made runnable),
    # its attempt touched a moment ago
    settings.SERENITY_PROVISIONING_STALE_AFTER_SECONDS = 900
    root, read, chained = chain_for(brand)
    AsyncJob.objects.filter(pk=read.pk).update(status=JobStatus.COMPLETED, claim_token=None)
    stale = pending(brand, job=root, candidate_workspace_id="ws-1", freshly_created=True)
    # when
    attempt = attempt_begin(brand_id=brand.id, started_by=AttemptStartedBy.ACTIVATE)
    # then: the old attempt failed/stale ...
    stale.refresh_from_db()
    assert (stale.status, stale.reason) == (AttemptStatus.FAILED, AttemptReason.STALE)
    assert stale.error == "Provisioning was abandoned and reconciled as stale."
    # ... its chain's unfinished job FAILED provisioningStale, finished ones untouched ...
    chained.refresh_from_db()
    assert (chained.status, chained.error) == (JobStatus.FAILED, STALE_ERROR)
    assert chained.finished_at is not None
    for job in (root, read):
        job.refresh_from_db()
        assert (job.status, job.error) == (JobStatus.COMPLETED, None)
    # ... and the new attempt is the brand's one pending attempt
    assert attempt is not None
    assert list(ProvisioningAttempt.objects.filter(brand=brand, status=AttemptStatus.PENDING)) == [
        attempt
    ]


def test_a_stale_promoted_attempt_becomes_ready_never_failed(brand, settings):
    # given: an abandoned chain whose workspace was promoted (the chained job never ran)
    root, read, chained = chain_for(brand)
    AsyncJob.objects.filter(pk=read.pk).update(status=JobStatus.COMPLETED, claim_token=None)
    stale = pending(brand, job=root, candidate_workspace_id="ws-1", workspace_promoted=True)
    # when
    attempt_begin(brand_id=brand.id, started_by=AttemptStartedBy.ACTIVATE)
    # then: the promoted attempt is ready (its workspace is valid and stays), with no reason;
    # the chained job that never ran is FAILED provisioningStale
    stale.refresh_from_db()
    assert (stale.status, stale.reason, stale.error) == (AttemptStatus.READY, None, None)
    chained.refresh_from_db()
    assert (chained.status, chained.error) == (JobStatus.FAILED, STALE_ERROR)


def test_a_sync_attempt_past_the_threshold_is_reconciled(brand, settings):
    # given: sync work (no job) untouched for longer than the threshold
    settings.SERENITY_PROVISIONING_STALE_AFTER_SECONDS = 900
    stale = pending(brand)
    age(stale, 901)
    # when
    attempt = attempt_begin(brand_id=brand.id, started_by=AttemptStartedBy.ACTIVATE)
    # then
    stale.refresh_from_db()
    assert (stale.status, stale.reason) == (AttemptStatus.FAILED, AttemptReason.STALE)
    assert attempt is not None and attempt.status == AttemptStatus.PENDING


def test_an_attempt_just_under_the_threshold_still_blocks(brand, settings):
    settings.SERENITY_PROVISIONING_STALE_AFTER_SECONDS = 900
    blocking = pending(brand)
    age(blocking, 880)
    with pytest.raises(ProvisioningInProgressError):
        attempt_begin(brand_id=brand.id, started_by=AttemptStartedBy.ACTIVATE)
    assert ProvisioningAttempt.objects.get(pk=blocking.pk).status == AttemptStatus.PENDING


def test_the_unique_constraint_answers_409_when_the_read_missed_a_concurrent_insert(brand):
    # given: a concurrent request inserted its pending attempt after our read
    root, _, _ = chain_for(brand)
    pending(brand, job=root)
    real_read = guard.pending_attempt_for
    reads: list[uuid.UUID] = []

    def missed_then_real(brand_id: uuid.UUID) -> ProvisioningAttempt | None:
        reads.append(brand_id)
        return None if len(reads) == 1 else real_read(brand_id)

    # when
    with (
        mock.patch.object(guard, "pending_attempt_for", side_effect=missed_then_real),
        pytest.raises(ProvisioningInProgressError) as caught,
    ):
        attempt_begin(brand_id=brand.id, started_by=AttemptStartedBy.ACTIVATE)
    # then: the same 409 (never a 500), still naming the blocking job; nothing inserted
    assert caught.value.http_status == 409
    assert caught.value.details == {"jobId": str(root.id)}
    assert len(reads) == 2
    assert ProvisioningAttempt.objects.filter(brand=brand).count() == 1


def test_the_unique_constraint_409_when_every_read_misses(brand):
    pending(brand)
    with (
        mock.patch.object(guard, "pending_attempt_for", return_value=None),
        pytest.raises(ProvisioningInProgressError) as caught,
    ):
        attempt_begin(brand_id=brand.id, started_by=AttemptStartedBy.ACTIVATE)
    assert caught.value.code == "semrush_provisioning_in_progress"
    assert caught.value.details == {"jobId": None}
    # the surrounding transaction is still usable (the insert ran in a savepoint)
    assert ProvisioningAttempt.objects.filter(brand=brand).count() == 1


def _schema_error(sqlstate: str | None) -> ProgrammingError:
    cause = Exception("from the driver")
    cause.sqlstate = sqlstate  # type: ignore[attr-defined]
    error = ProgrammingError("schema")
    error.__cause__ = cause
    return error


@pytest.mark.parametrize("sqlstate", ["42P01", "42703"])
def test_missing_table_or_column_lets_the_guard_proceed(brand, sqlstate):
    # given: a deploy running ahead of its migration
    with mock.patch.object(guard, "pending_attempt_for", side_effect=_schema_error(sqlstate)):
        # when
        attempt = attempt_begin(brand_id=brand.id, started_by=AttemptStartedBy.ACTIVATE)
    # then: no table means no attempt can be in flight; nothing is written
    assert attempt is None
    assert not ProvisioningAttempt.objects.filter(brand=brand).exists()


def test_a_real_undefined_table_error_leaves_the_transaction_usable(brand):
    # given: the read hits a table that does not exist (the driver's own 42P01)
    def read_missing_table(brand_id: uuid.UUID) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM provisioning_attempt_not_migrated_yet")

    with mock.patch.object(guard, "pending_attempt_for", side_effect=read_missing_table):
        # when
        attempt = attempt_begin(brand_id=brand.id, started_by=AttemptStartedBy.ACTIVATE)
    # then: the guard proceeds and the test's own transaction still answers queries
    assert attempt is None
    assert Brand.objects.filter(pk=brand.id).exists()


@pytest.mark.parametrize("sqlstate", ["42501", None])
def test_any_other_read_error_fails_closed(brand, sqlstate):
    with (
        mock.patch.object(guard, "pending_attempt_for", side_effect=_schema_error(sqlstate)),
        pytest.raises(ProgrammingError),
    ):
        attempt_begin(brand_id=brand.id, started_by=AttemptStartedBy.ACTIVATE)
    assert not ProvisioningAttempt.objects.filter(brand=brand).exists()
