"""`kernel.queries`: the hot paths' reads and writes, each against what the ORM does."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs.models import AsyncJob, JobStatus, JobStep, JobType
from kernel.queries import (
    fetch_one,
    insert_row,
    insert_rows,
    unique_or_none,
    update_where,
)
from provisioning.models import ProvisioningAttempt
from serenity.models import ApiToken, Brand, Market, MarketStatus, Organization
from tests.factories import BrandFactory, MembershipFactory, OrganizationFactory

pytestmark = pytest.mark.django_db


def test_a_unique_lookup_returns_its_row_in_one_unordered_query():
    # given
    organization = OrganizationFactory()
    # when
    with CaptureQueriesContext(connection) as queries:
        found = unique_or_none(Organization.objects.filter(pk=organization.pk))
    # then: the row, with no ORDER BY (Organization is ordered by name)
    assert found == organization
    assert len(queries) == 1
    assert "ORDER BY" not in queries[0]["sql"]
    assert queries[0]["sql"].endswith("LIMIT 1")


def test_a_lookup_that_matches_nothing_returns_none():
    assert unique_or_none(Organization.objects.filter(pk=uuid.uuid4())) is None


# --- update_where ---------------------------------------------------------------------------


def _job(**fields):  # type: ignore[no-untyped-def]
    values = {
        "organization_id": uuid.uuid4(),
        "job_type": JobType.PROVISION_WORKSPACE,
        "step": JobStep.PROVISION_WORKSPACE,
        "metadata": {"attemptId": "a"},
    }
    return AsyncJob.objects.create(**{**values, **fields})


def _row(job: AsyncJob) -> dict[str, object]:
    return AsyncJob.objects.filter(pk=job.pk).values().get()


def test_update_where_writes_what_the_orms_update_writes():
    # given: two identical pairs of jobs (one successor each), one updated each way
    now = timezone.now()
    token = uuid.uuid4()
    pairs = []
    for _ in range(2):
        successor = _job()
        pairs.append((_job(claim_token=token, next=successor, step_count=3), successor))
    values = {
        "status": JobStatus.COMPLETED,
        "result": {"status": 201, "body": {"ids": ["x"], "n": 1.5}},
        "error": None,
        "finished_at": now,
        "claim_token": None,
        "next": None,
        "step_count": F("step_count") + 2,
    }
    # when
    by_orm = AsyncJob.objects.filter(
        pk=pairs[0][0].pk, status__in=[JobStatus.IN_PROGRESS], claim_token=token
    ).update(**values)
    with CaptureQueriesContext(connection) as queries:
        by_helper = update_where(
            AsyncJob,
            {"pk": pairs[1][0].pk, "status__in": [JobStatus.IN_PROGRESS], "claim_token": token},
            **values,
        )
    # then: one row each, the same columns written
    assert (by_orm, by_helper) == (1, 1)
    assert len(queries) == 1
    orm_row, helper_row = _row(pairs[0][0]), _row(pairs[1][0])
    for row in (orm_row, helper_row):
        del row["id"], row["organization_id"], row["created_at"], row["updated_at"]
    assert helper_row == orm_row
    assert helper_row["step_count"] == 5
    assert helper_row["next_id"] is None
    assert helper_row["result"] == {"status": 201, "body": {"ids": ["x"], "n": 1.5}}


def test_update_where_changes_nothing_when_a_condition_does_not_hold():
    # given
    job = _job(claim_token=uuid.uuid4())
    before = _row(job)
    # when: another claim token; a lease that is not null; an empty IN
    lost = update_where(AsyncJob, {"pk": job.pk, "claim_token": uuid.uuid4()}, run_count=9)
    held = update_where(AsyncJob, {"pk": job.pk, "claim_token__isnull": True}, run_count=9)
    empty = update_where(AsyncJob, {"pk": job.pk, "status__in": []}, run_count=9)
    # then
    assert (lost, held, empty) == (0, 0, 0)
    assert _row(job) == before


def test_update_where_compares_nulls_and_ranges_as_the_orm_does():
    # given
    now = timezone.now()
    unclaimed = _job(lease_expires_at=None)
    expired = _job(claim_token=uuid.uuid4(), lease_expires_at=now - timedelta(seconds=1))
    live = _job(claim_token=uuid.uuid4(), lease_expires_at=now + timedelta(seconds=60))
    ids = [unclaimed.pk, expired.pk, live.pk]
    # when
    none_as_null = update_where(AsyncJob, {"pk__in": ids, "claim_token": None}, run_count=1)
    below = update_where(AsyncJob, {"pk__in": ids, "lease_expires_at__lt": now}, run_count=2)
    at_least = update_where(AsyncJob, {"pk__in": ids, "lease_expires_at__gte": now}, run_count=3)
    not_null = update_where(AsyncJob, {"pk__in": ids, "claim_token__isnull": False}, position=7)
    # then
    assert (none_as_null, below, at_least, not_null) == (1, 1, 1, 2)
    counts = dict(AsyncJob.objects.filter(pk__in=ids).values_list("pk", "run_count"))
    assert counts == {unclaimed.pk: 1, expired.pk: 2, live.pk: 3}
    assert sorted(AsyncJob.objects.filter(position=7).values_list("pk", flat=True)) == sorted(
        [expired.pk, live.pk]
    )


def test_update_where_takes_a_foreign_key_by_instance_or_by_id():
    # given
    root, other = _job(), _job()
    step = _job(root=root)
    # when
    by_instance = update_where(AsyncJob, {"root": root}, current=other)
    by_id = update_where(AsyncJob, {"root_id": root.pk}, position=4)
    # then
    assert (by_instance, by_id) == (1, 1)
    step.refresh_from_db()
    assert (step.current_id, step.position) == (other.pk, 4)


@pytest.mark.parametrize(
    ("where", "values", "message"),
    [
        ({"pk": uuid.uuid4()}, {"nothing": 1}, "AsyncJob has no column field 'nothing'"),
        ({"root__step": "x"}, {"position": 1}, "unsupported lookup 'root__step'"),
        ({"step__icontains": "x"}, {"position": 1}, "unsupported lookup 'step__icontains'"),
        ({"pk": uuid.uuid4()}, {"position": F("run_count") * 2}, "is not F(name) + n"),
        ({"pk": uuid.uuid4()}, {"position": Coalesce("run_count", 0)}, "is not a plain value"),
        ({"pk": uuid.uuid4()}, {}, "nothing to set"),
    ],
)
def test_update_where_refuses_what_it_cannot_write_as_the_orm_would(where, values, message):
    # given
    job = _job()
    before = _row(job)
    # when
    with pytest.raises(ValueError, match=re.escape(message)):
        update_where(AsyncJob, {**where}, **values)
    # then
    assert _row(job) == before


# --- fetch_one ------------------------------------------------------------------------------


def _attempt() -> ProvisioningAttempt:
    brand = BrandFactory(semrush_sub_workspace_id="ws-1")
    return ProvisioningAttempt.objects.create(
        brand=brand, status="pending", started_by="activate", candidate_workspace_id="ws-2"
    )


def test_fetch_one_reads_what_select_related_reads_in_one_query():
    # given
    attempt = _attempt()
    expected = ProvisioningAttempt.objects.select_related("brand__organization").get(pk=attempt.pk)
    # when: the id as a step finds it in its job's metadata (text)
    with CaptureQueriesContext(connection) as queries:
        found = fetch_one(
            ProvisioningAttempt, {"pk": str(attempt.pk)}, related=("brand", "brand__organization")
        )
        assert found is not None
        brand, organization = found.brand, found.brand.organization
    # then: every column of the three rows, converted as the ORM converts them, the related
    # rows cached on their instances (no query after the first)
    assert len(queries) == 1
    assert "LIMIT 1" in queries[0]["sql"]
    for mine, theirs in (
        (found, expected),
        (brand, expected.brand),
        (organization, expected.brand.organization),
    ):
        assert type(mine) is type(theirs)
        fields = type(mine)._meta.concrete_fields
        assert [getattr(mine, f.attname) for f in fields] == [
            getattr(theirs, f.attname) for f in fields
        ]
        assert not mine._state.adding and mine._state.db == "default"
    assert isinstance(found.id, uuid.UUID) and found.created_at.tzinfo is not None


def test_fetch_one_returns_none_when_no_row_matches():
    # given
    attempt = _attempt()
    # when / then: another id; a condition that does not hold; an empty IN (no query)
    assert fetch_one(ProvisioningAttempt, {"pk": uuid.uuid4()}) is None
    assert fetch_one(ProvisioningAttempt, {"pk": attempt.pk, "status": "ready"}) is None
    with CaptureQueriesContext(connection) as queries:
        assert fetch_one(ProvisioningAttempt, {"pk__in": []}) is None
    assert len(queries) == 0


def test_fetch_one_matches_nulls_as_the_orm_does():
    # given: a live token and a revoked one
    organization = OrganizationFactory()
    user = MembershipFactory(organization=organization).user
    live = ApiToken.objects.create(user=user, name="live", token_hash="a" * 64)
    ApiToken.objects.create(user=user, name="old", token_hash="b" * 64, revoked_at=timezone.now())
    # when
    found = fetch_one(ApiToken, {"token_hash": "a" * 64, "revoked_at": None}, related=("user",))
    revoked = fetch_one(ApiToken, {"token_hash": "b" * 64, "revoked_at": None}, related=("user",))
    # then
    assert found == live and found.user == user
    assert revoked is None


def test_fetch_one_refuses_a_read_without_a_condition():
    # when / then: it reads one row by a unique key, never "any row"
    with pytest.raises(ValueError, match="no condition"):
        fetch_one(ProvisioningAttempt, {})


@pytest.mark.parametrize(
    ("related", "message"),
    [
        (("brand__organization",), "'brand__organization' needs 'brand' before it"),
        (("candidate_workspace_id",), "'candidate_workspace_id' is not a non-null foreign key"),
    ],
)
def test_fetch_one_refuses_what_it_cannot_join(related, message):
    # given
    attempt = _attempt()
    # when / then
    with pytest.raises(ValueError, match=re.escape(message)):
        fetch_one(ProvisioningAttempt, {"pk": attempt.pk}, related=related)


# --- insert_rows / insert_row ---------------------------------------------------------------


def test_insert_row_writes_what_create_writes():
    # given
    brand = BrandFactory()
    values = {
        "brand": brand,
        "geo_target_id": 2840,
        "language_code": "en",
        "name": "US-en",
        "status": MarketStatus.CREATING,
        "reserved_by": uuid.uuid4(),
    }
    by_orm = Market.objects.create(**values)
    Market.objects.filter(pk=by_orm.pk).update(deleted_at=timezone.now())  # frees the slice
    # when
    with CaptureQueriesContext(connection) as queries:
        mine = insert_row(Market, **values)
    # then: one INSERT; the instance is a saved row with its timestamps set
    assert len(queries) == 1 and queries[0]["sql"].startswith('INSERT INTO "serenity_market"')
    assert not mine._state.adding and mine._state.db == "default"
    assert mine.created_at is not None and mine.updated_at is not None
    row = Market.objects.filter(pk=mine.pk).values().get()
    theirs = Market.objects.filter(pk=by_orm.pk).values().get()
    for key in ("id", "created_at", "updated_at", "deleted_at"):
        del row[key], theirs[key]
    assert row == theirs
    assert Market.objects.get(pk=mine.pk).created_at == mine.created_at


def test_insert_rows_writes_several_rows_in_one_statement():
    # given: a chain's two jobs, the first pointing at the second
    first, second = _job_instance(), _job_instance()
    first.next_id = second.id
    # when
    with CaptureQueriesContext(connection) as queries:
        insert_rows(first, second)
    # then
    assert len(queries) == 1
    assert AsyncJob.objects.get(pk=first.pk).next_id == second.id
    assert AsyncJob.objects.get(pk=second.pk).metadata == {"attemptId": "a"}


def test_insert_rows_raises_the_orms_integrity_error_and_writes_nothing():
    # given: a brand whose name the org already has
    brand = BrandFactory(name="Taken")
    before = Brand.objects.count()
    # when / then
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_row(Brand, organization=brand.organization, name="Taken", status="active")
    assert Brand.objects.count() == before


def test_insert_rows_refuses_rows_of_two_models():
    # given
    job, organization = _job_instance(), OrganizationFactory.build()
    # when / then
    with pytest.raises(ValueError, match="rows of one model"):
        insert_rows(job, organization)
    assert not AsyncJob.objects.filter(pk=job.pk).exists()


def _job_instance() -> AsyncJob:
    return AsyncJob(
        organization_id=uuid.uuid4(),
        job_type=JobType.PROVISION_WORKSPACE,
        step=JobStep.PROVISION_WORKSPACE,
        metadata={"attemptId": "a"},
    )


def test_update_where_ne_and_null_or_select_what_exclude_and_the_or_select():
    # given: brands whose pointer is empty, this workspace, another; one of them deleted
    empty = BrandFactory(semrush_sub_workspace_id=None)
    same = BrandFactory(semrush_sub_workspace_id="ws-1")
    other = BrandFactory(semrush_sub_workspace_id="ws-2")
    deleted = BrandFactory(semrush_sub_workspace_id=None, status="deleted")
    ids = [empty.pk, same.pk, other.pk, deleted.pk]
    expected = set(
        Brand.objects.filter(pk__in=ids)
        .exclude(status="deleted")
        .filter(Q(semrush_sub_workspace_id__isnull=True) | Q(semrush_sub_workspace_id="ws-1"))
        .values_list("pk", flat=True)
    )
    # when
    changed = update_where(
        Brand,
        {"pk__in": ids, "status__ne": "deleted", "semrush_sub_workspace_id__null_or": "ws-1"},
        name="picked",
    )
    # then
    assert changed == 2
    assert set(Brand.objects.filter(name="picked").values_list("pk", flat=True)) == expected
    assert expected == {empty.pk, same.pk}


def test_update_where_ne_refuses_a_nullable_column():
    # given: `<>` would not match NULL there, where `.exclude()` does
    job = _job()
    # when / then
    with pytest.raises(ValueError, match="`ne` is for a non-null column"):
        update_where(AsyncJob, {"pk": job.pk, "brand_id__ne": uuid.uuid4()}, position=1)
