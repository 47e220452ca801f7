"""The chained step's final-write check (`provisioning.chain.still_valid`): one statement that
locks the attempt and checks it is pending and the brand still points at the workspace."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from provisioning import states
from provisioning.chain import still_valid
from provisioning.models import AttemptReason, AttemptStatus, ProvisioningAttempt
from tests.factories import BrandFactory, ProvisioningAttemptFactory

pytestmark = pytest.mark.django_db(transaction=True)


def _pending_attempt(pointer: str | None = "ws-1") -> ProvisioningAttempt:
    brand = BrandFactory(semrush_sub_workspace_id=pointer)
    return ProvisioningAttemptFactory(brand=brand)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({}, True),
        ({"workspace_id": "ws-2"}, False),
        ({"brand_id": "other"}, False),
        ({"attempt_id": "unknown"}, False),
    ],
)
def test_the_check_holds_only_for_the_pending_attempt_and_the_current_pointer(change, expected):
    # given
    attempt = _pending_attempt()
    args = {"attempt_id": attempt.id, "brand_id": attempt.brand_id, "workspace_id": "ws-1"}
    if change.get("brand_id") == "other":
        args["brand_id"] = BrandFactory(semrush_sub_workspace_id="ws-3").pk
    elif change.get("attempt_id") == "unknown":
        args["attempt_id"] = uuid.uuid4()
    elif "workspace_id" in change:
        args["workspace_id"] = change["workspace_id"]
    # when
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        held = still_valid(**args)()
    # then: one statement, locking the attempt row only
    assert held is expected
    statements = [q["sql"] for q in queries if q["sql"] not in ("BEGIN", "COMMIT")]
    assert len(statements) == 1
    assert 'FOR UPDATE OF "provisioning_provisioningattempt"' in statements[0]


def test_the_check_is_false_once_the_attempt_is_no_longer_pending():
    # given
    attempt = _pending_attempt()
    states.transition(
        attempt_id=attempt.id, to=AttemptStatus.FAILED, reason=AttemptReason.CANCELLED
    )
    # when
    with transaction.atomic():
        held = still_valid(attempt.id, attempt.brand_id, "ws-1")()
    # then
    assert held is False


def test_a_cancel_waits_for_the_transaction_that_checked():
    # given: the check has run in an open transaction
    attempt = _pending_attempt()
    cancelled = threading.Event()

    def cancel() -> None:
        try:
            states.transition(
                attempt_id=attempt.id, to=AttemptStatus.FAILED, reason=AttemptReason.CANCELLED
            )
            cancelled.set()
        finally:
            connections.close_all()

    with transaction.atomic():
        assert still_valid(attempt.id, attempt.brand_id, "ws-1")() is True
        # when a cancel runs meanwhile on another connection
        other = threading.Thread(target=cancel)
        other.start()
        # then it cannot commit before this transaction does
        assert not cancelled.wait(0.5)
    other.join(timeout=10)
    assert cancelled.is_set()
    attempt.refresh_from_db()
    assert attempt.status == AttemptStatus.FAILED
