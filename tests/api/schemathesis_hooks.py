"""schemathesis hooks of the live run (tests/api/test_schemathesis.py), loaded by the `st`
process through `SCHEMATHESIS_HOOKS`.

`positive_data_acceptance_with_state` is schemathesis' own `positive_data_acceptance` check
("a request the document calls valid is not refused") minus the refusals no OpenAPI document can
state, because they depend on the state of the service or of upstream, not on the request's
shape. Each one is matched by operation, status, error code and field or message, never by
status alone, so that every other refusal of a schema-valid request still fails the run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import schemathesis
from schemathesis.openapi.checks import RejectedPositiveData
from schemathesis.specs.openapi.checks import positive_data_acceptance

IDEMPOTENT_OPERATIONS = frozenset(
    {
        "brandCreate",
        "brandUpdate",
        "marketCreate",
        "brandActivate",
        "brandDeactivate",
        "promptsCreate",
        "jobCancel",
        "webhookCreate",
        "webhookRedeliver",
        "onboardingCreate",
        "onboardingCancel",
        "onboardingRetry",
        "reconciliationCreate",
        "webhookUpdate",
        "webhookRotateSecret",
        "webhookTest",
    }
)


@dataclass(frozen=True)
class StateDependentRefusal:
    operations: frozenset[str]
    status: int
    error: str
    field: str | None = None  # the error's `details.field`, when it names one
    message: str | None = None  # a regular expression the message must match


STATE_DEPENDENT_REFUSALS = (
    # SPEC §10.3 "`?cursor=` (opaque) … A bad cursor → 400 `invalidRequest`": a cursor is
    # valid only when this list issued it (it is signed); a generated string never is.
    StateDependentRefusal(
        operations=frozenset(
            {
                "brandList",
                "marketList",
                "jobList",
                "orgJobList",
                "webhookAttemptList",
                "webhookList",
                "webhookDeliveryList",
                "onboardingList",
                "onboardingGet",
                "onboardingItems",
                "reconciliationList",
                "reconciliationGet",
                "upstreamCallList",
            }
        ),
        status=400,
        error="invalidRequest",
        field="cursor",
    ),
    # SPEC §13.1 "`POST S/reconciliations` `{brandIds?: [...]}`": each id must name a brand of
    # the org, which depends on the org's brands (the run pins one, the document cannot).
    StateDependentRefusal(
        operations=frozenset({"reconciliationCreate"}),
        status=400,
        error="invalidRequest",
        field="brandIds",
        message=r"^brandIds: \S+ is not a brand of this organization\.$",
    ),
    # SPEC §13.2 "`POST S/onboardings` also takes `Content-Type: text/csv` (a header row; columns
    # `name`, `baseUrl`, `aliases`, `markets` …) a bad cell is 400 `invalidRequest` naming it as
    # `details.field` `rows[12].baseUrl`": the document gives a CSV body as a string (no schema
    # states a CSV's grammar), so its header, its rows and their cells are checked by the service
    # alone. Only a CSV body is refused naming `header` or `rows…` (a JSON one names `brands…`).
    StateDependentRefusal(
        operations=frozenset({"onboardingCreate"}),
        status=400,
        error="invalidRequest",
        message=r"^(?:(?:header|rows(?:\[\d+\](?:\.\w+)?)?): |The CSV body )",
    ),
    StateDependentRefusal(
        operations=frozenset({"onboardingCreate"}),
        status=400,
        error="unknownMarket",
        message=r"^rows\[\d+\]\.markets: ",
    ),
    # SPEC §13.6 "an enum that can grow (… job types, … event types …) is open
    # (`x-extensible-enum`) with a stable schema name … each value listed once": a request field
    # naming one (a webhook's `events`, the jobs list's `jobType`) is documented by that one open
    # schema, so the document cannot close it; the service accepts the values of today only and
    # says so in the field's description ("another → 400 `invalidRequest`"). Which values exist
    # is the release's state, not the request's shape.
    StateDependentRefusal(
        operations=frozenset({"webhookCreate", "webhookUpdate"}),
        status=400,
        error="invalidRequest",
        message=r"^events\[\d+\]: [\s\S]* is not one of the known values\.$",
    ),
    StateDependentRefusal(
        operations=frozenset({"orgJobList"}),
        status=400,
        error="invalidRequest",
        field="jobType",
        message=r"^jobType: [\s\S]* is not one of the known values\.$",
    ),
    # The same open `WebhookEventType` lists `webhook.test`, which an endpoint cannot subscribe
    # to (SPEC §11.3: sent on request only; the field's description says so).
    StateDependentRefusal(
        operations=frozenset({"webhookCreate", "webhookUpdate"}),
        status=400,
        error="invalidRequest",
        message=r"^events\[\d+\]: webhook\.test is sent on request only\.$",
    ),
    # SPEC §4.5 "each must name a market of the brand whose project exists (else 400
    # `invalidRequest` naming the prompt's index)": depends on the brand's markets.
    StateDependentRefusal(
        operations=frozenset({"promptsCreate"}),
        status=400,
        error="invalidRequest",
        message=r"^prompts\[\d+\]: no market with a project for geoTargetId ",
    ),
    # SPEC §3 "`languageCode` … present in the upstream language catalogue … a well-formed
    # language missing from the catalogue → 400 `unknownLanguage`": the catalogue is upstream
    # data (the languages route lists it), not a constraint of the document.
    StateDependentRefusal(
        operations=frozenset({"brandCreate", "marketCreate", "brandActivate", "onboardingCreate"}),
        status=400,
        error="unknownLanguage",
    ),
    # SPEC §4.3 branch A "`baseUrl` required (400 `baseUrlRequired`, before any upstream call)":
    # activating a `pending` brand depends on the brand's stored baseUrl.
    StateDependentRefusal(
        operations=frozenset({"brandActivate"}), status=400, error="baseUrlRequired"
    ),
    # SPEC §11.3 "the URL's host must resolve only to public addresses … registration → 400
    # `invalidRequest` naming `url`": what a name resolves to is DNS's state, not the request's
    # shape (and the run's machine resolves no public name).
    StateDependentRefusal(
        operations=frozenset({"webhookCreate"}),
        status=400,
        error="invalidRequest",
        field="url",
        message=r"^url: (the host does not resolve|the host resolves to a non-public address)\.$",
    ),
    # SPEC §11.3 "At most 10 per org (an 11th → 400 `invalidRequest`)": the org's state.
    StateDependentRefusal(
        operations=frozenset({"webhookCreate"}),
        status=400,
        error="invalidRequest",
        message=r"^An organization has at most 10 webhooks\.$",
    ),
    # SPEC §11.2 "0 to 50 distinct markets each": distinct as slices (country and language,
    # any case), which JSON Schema's `uniqueItems` (equal objects only) cannot state.
    StateDependentRefusal(
        operations=frozenset({"onboardingCreate"}),
        status=400,
        error="invalidRequest",
        message=r"^brands\[\d+\]\.markets: \S+ is listed twice\.$",
    ),
    # SPEC §11.4 "refuse control characters, bidi overrides and invisible (default-ignorable)
    # code points": the document's pattern lists those below U+FFFF (schemathesis cannot use a
    # pattern with astral ranges); the few default-ignorable code points above it (tags,
    # variation selectors supplement, …) are refused by the service alone. Generated data
    # never holds one of the pattern's, so this refusal is always one of those.
    StateDependentRefusal(
        operations=frozenset(
            {"brandCreate", "brandUpdate", "marketCreate", "brandActivate", "onboardingCreate"}
        ),
        status=400,
        error="invalidRequest",
        message=r": must not contain control, bidirectional-override or invisible characters\.$",
    ),
    # SPEC §10.3 "a different body → 422 `idempotencyKeyReused`": schemathesis generates the
    # `Idempotency-Key` header too, and a key it generates twice (often `0`) for two different
    # bodies is a reuse the service must refuse.
    StateDependentRefusal(
        operations=IDEMPOTENT_OPERATIONS, status=422, error="idempotencyKeyReused"
    ),
)


def _body(response: Any) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def is_state_dependent(operation_id: str | None, status: int, body: dict[str, Any]) -> bool:
    details = body.get("details")
    field = details.get("field") if isinstance(details, dict) else None
    message = body.get("message")
    for refusal in STATE_DEPENDENT_REFUSALS:
        if (
            operation_id in refusal.operations
            and status == refusal.status
            and body.get("error") == refusal.error
            and (refusal.field is None or field == refusal.field)
            and (
                refusal.message is None
                or (isinstance(message, str) and re.search(refusal.message, message) is not None)
            )
        ):
            return True
    return False


@schemathesis.check
def positive_data_acceptance_with_state(ctx: Any, response: Any, case: Any) -> bool | None:
    """schemathesis' `positive_data_acceptance`, minus `STATE_DEPENDENT_REFUSALS`."""
    try:
        return positive_data_acceptance(ctx, response, case)
    except RejectedPositiveData:
        operation_id = case.operation.definition.raw.get("operationId")
        if is_state_dependent(operation_id, response.status_code, _body(response)):
            return None
        raise
