"""Output serializers of the documents that provisioning work shows to clients: a chain as job
polling reports it (SPEC §4.6) and an onboarding without its items (§11.2).

The API renders its answers with these classes, drf-spectacular documents those answers from
them, and the webhook events (§11.3) carry what they render: one shape for all three. They live
here rather than in `api` because the webhooks app renders them too and nothing may
import an API package; and rather than in `jobs` because their vocabulary (the error codes, the
answers a result stands for) is that of provisioning's steps, which `jobs` runs without knowing.

They render the selectors' values (`jobs.selectors.JobDocument`,
`provisioning.selectors.OnboardingSummary`, …) and decide nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rest_framework import serializers
from rest_framework.fields import SkipField

from jobs.models import JobMode, JobStatus, JobStep, JobType
from kernel.errors import DomainError
from provisioning import exceptions
from provisioning.models import OnboardingCancelledBy, OnboardingStatus
from serenity.exceptions import BrandExistsError

# Every `code` a job's `error` can carry: the errors that a job reports as themselves (those
# with a `job_message`, `exceptions.job_error`), the chain's own endings (`jobFailed`,
# `provisioningCancelled`, `provisioningStale`) and an onboarding item refused at accept.
JOB_ERROR_CODES = [
    "jobFailed",
    "provisioningCancelled",
    "provisioningStale",
    BrandExistsError.code,
    *(
        error.code
        for error in vars(exceptions).values()
        if isinstance(error, type)
        and issubclass(error, DomainError)
        and getattr(error, "job_message", None) is not None
    ),
]
OUTCOMES = ["succeeded", "partial", "failed"]


class OpenCodeField(serializers.CharField):
    """A code whose set grows (SPEC §12.2, §13.6: error codes, job error codes, step names, job
    types, a brand's provisioning error codes, webhook event types): a string, documented once
    as the component `schema_name` with its known values (`x-extensible-enum`, and in its
    description: `api.schemas.extensions`), never as a closed enum, so that a client generated
    today still parses an answer carrying a code added later. As a request field
    (`known_only`) it accepts the known values only (the field's help text says so)."""

    default_error_messages = {"unknown": "{value} is not one of the known values."}

    def __init__(
        self,
        *,
        known: Sequence[str],
        schema_name: str,
        known_only: bool = False,
        **kwargs: Any,
    ) -> None:
        self.known = list(dict.fromkeys(known))
        self.schema_name = schema_name
        self.known_only = known_only
        if known_only:
            lead = str(kwargs.pop("help_text", "") or "").rstrip(".")
            rule = "One of the known values of today; another → 400 `invalidRequest`."
            kwargs["help_text"] = f"{lead + '. ' if lead else ''}{rule}"
        super().__init__(**kwargs)

    def schema_description(self) -> str:
        listed = ", ".join(f"`{code}`" for code in self.known)
        return f"Known values (more may be added: expect others): {listed}."

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        value = super().to_internal_value(data)
        if self.known_only and value not in self.known:
            self.fail("unknown", value=value)
        return value


def job_type_field(**kwargs: Any) -> OpenCodeField:
    """A job's `jobType`: the set grows with the operations (SPEC §13.6)."""
    return OpenCodeField(known=JobType.values, schema_name="JobType", **kwargs)


class OmittedWhenNullDateTimeField(serializers.DateTimeField):
    """Left out of the answer, rather than shown as null, when the value is None."""

    def get_attribute(self, instance: Any) -> Any:
        value = super().get_attribute(instance)
        if value is None:
            raise SkipField()
        return value


class OutcomeBodyField(serializers.JSONField):
    """The body of the answer an outcome stands for (`provisioning.outcome.Outcome.body`,
    stored with the job): exactly what the sync path answered, which the API's own output
    serializers rendered there. The API documents it as any of those answers
    (`api.schemas.extensions`)."""


class JobErrorSerializer(serializers.Serializer):
    code = OpenCodeField(
        known=JOB_ERROR_CODES, schema_name="JobErrorCode", help_text="A stable machine code."
    )
    message = serializers.CharField(help_text="Generic for upstream failures.")
    retryable = serializers.BooleanField()


class JobResultSerializer(serializers.Serializer):
    status = serializers.IntegerField(help_text="The HTTP status the sync path would answer.")
    body = OutcomeBodyField(help_text="The body the sync path would answer.")
    outcome = serializers.ChoiceField(
        choices=OUTCOMES, help_text="`succeeded` (2xx but 207), `partial` (207), `failed`."
    )


class JobStepSerializer(serializers.Serializer):
    step = OpenCodeField(known=JobStep.values, schema_name="JobStepName")
    status = serializers.ChoiceField(choices=["PENDING", *JobStatus.values])
    startedAt = serializers.DateTimeField(source="started_at", allow_null=True)  # noqa: N815
    finishedAt = serializers.DateTimeField(source="finished_at", allow_null=True)  # noqa: N815
    runAfter = OmittedWhenNullDateTimeField(  # noqa: N815
        source="run_after",
        required=False,
        help_text="`PENDING` steps only: when the step is due.",
    )
    waitingFor = OpenCodeField(  # noqa: N815
        source="waiting_for",
        known=["credential"],
        schema_name="StepWaitingFor",
        allow_null=True,
        help_text="What the unfinished step waits for: `credential` while Semrush refuses the "
        "organization's credential (the step runs once it is accepted again; nothing fails "
        "meanwhile); null otherwise.",
    )


class JobSummarySerializer(serializers.Serializer):
    """A chain's document without its steps: the item of every job list (a brand's, an org's)
    and a job event's `data`. The poll document is this with `steps` (SPEC §13.6: one shape
    wherever a job is shown)."""

    jobId = serializers.UUIDField(  # noqa: N815
        source="job_id", help_text="The root job's id: the one clients hold."
    )
    jobType = job_type_field(source="job_type")  # noqa: N815
    brandId = serializers.UUIDField(source="brand_id", allow_null=True)  # noqa: N815
    mode = serializers.ChoiceField(
        choices=JobMode.choices,
        help_text="`async`: run by workers (202); `sync`: run at once by the request that began "
        "it, which answered its outcome.",
    )
    status = serializers.ChoiceField(
        choices=JobStatus.choices, help_text="The effective status of the whole chain."
    )
    result = JobResultSerializer(allow_null=True, help_text="Non-null only when `COMPLETED`.")
    error = JobErrorSerializer(
        allow_null=True, help_text="Non-null only when `FAILED` or `CANCELLED`."
    )
    createdAt = serializers.DateTimeField(source="created_at")  # noqa: N815
    updatedAt = serializers.DateTimeField(  # noqa: N815
        source="updated_at", help_text="The latest change anywhere in the chain."
    )
    finishedAt = serializers.DateTimeField(  # noqa: N815
        source="finished_at", allow_null=True, help_text="When the chain ended; null until then."
    )


class JobSerializer(JobSummarySerializer):
    """A chain's document with the steps that exist so far (job polling, cancel)."""

    jobId = serializers.UUIDField(  # noqa: N815
        source="job_id", help_text="Always the id that was asked for."
    )
    steps = JobStepSerializer(many=True)
    # Declared again after `steps`: the answer keeps SPEC §4.6's order.
    createdAt = serializers.DateTimeField(source="created_at")  # noqa: N815
    updatedAt = serializers.DateTimeField(  # noqa: N815
        source="updated_at", help_text="The latest change anywhere in the chain."
    )
    finishedAt = serializers.DateTimeField(  # noqa: N815
        source="finished_at", allow_null=True, help_text="When the chain ended; null until then."
    )


class OnboardingCountsSerializer(serializers.Serializer):
    inProgress = serializers.IntegerField(source="in_progress")  # noqa: N815
    completed = serializers.IntegerField()
    failed = serializers.IntegerField()
    cancelled = serializers.IntegerField()


class OnboardingItemSerializer(serializers.Serializer):
    index = serializers.IntegerField(help_text="The item's position in `brands`, from 0.")
    name = serializers.CharField()
    brandId = serializers.UUIDField(source="brand_id", allow_null=True)  # noqa: N815
    jobId = serializers.UUIDField(source="job_id", allow_null=True)  # noqa: N815
    status = serializers.ChoiceField(choices=JobStatus.choices)
    result = JobResultSerializer(allow_null=True)
    error = JobErrorSerializer(allow_null=True)


class OnboardingSummarySerializer(serializers.Serializer):
    """An onboarding without its items (the list; the `onboarding.completed` and
    `onboarding.cancelled` events' `data`)."""

    onboardingId = serializers.UUIDField(source="onboarding_id")  # noqa: N815
    status = serializers.ChoiceField(choices=OnboardingStatus.choices)
    total = serializers.IntegerField()
    counts = OnboardingCountsSerializer()
    createdAt = serializers.DateTimeField(source="created_at")  # noqa: N815
    updatedAt = serializers.DateTimeField(  # noqa: N815
        source="updated_at", help_text="Moves whenever an item ends or the onboarding is cancelled."
    )
    finishedAt = serializers.DateTimeField(  # noqa: N815
        source="finished_at", allow_null=True, help_text="When it ended; null until then."
    )
    retryOf = serializers.UUIDField(  # noqa: N815
        source="retry_of",
        allow_null=True,
        help_text="The onboarding this one redrives (its failed and cancelled items); null "
        "for an onboarding of its own.",
    )
    maxFailedItems = serializers.IntegerField(  # noqa: N815
        source="max_failed_items",
        allow_null=True,
        help_text="Once this many items failed, the rest is cancelled; null: no threshold.",
    )
    cancelledBy = serializers.ChoiceField(  # noqa: N815
        source="cancelled_by",
        choices=OnboardingCancelledBy.choices,
        allow_null=True,
        help_text="Who cancelled it: `user`, or `failureThreshold` (`maxFailedItems` reached); "
        "null while not cancelled.",
    )
