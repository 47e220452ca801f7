"""Market projects in Semrush (SPEC §4.2): create or resume the slice's project, publish it, and
the upstream clean-up of a slice's projects. The market row's final write is
`provisioning.market_writes`'.

The chained steps call `market_provision` (on a worker, or inline in a sync request), so both
answer the same `Outcome`. The slice is reserved (`provisioning.reservations`) by a `creating`
row before any upstream call; the reservation records its owner and, as soon as it exists, the
upstream project id, so a re-run after a crash resumes the same project instead of making a
second one. A publish is confirmed by reading the project (`provisioning.publishing`, SPEC
§12.1): the row is `publishing` from Semrush's 202 until then. The row's final write (`live`,
`publish_failed`, `publishing` handed to a background confirmation, or dropped) travels in the
Outcome and is committed with the end of the work (SPEC §11.5): a chained step's ending, in one
transaction with its job and its attempt (a sync request runs the step inline).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.utils import timezone

from kernel.errors import DomainError
from provisioning.exceptions import (
    PublishFailedError,
    PublishTimeoutError,
    QuotaExceededError,
    UpstreamError,
)
from provisioning.outcome import MarketEnd, MarketWrite, Outcome
from provisioning.publishing import Confirmation, Live, NotPublished, Patience, publish_confirm
from provisioning.semrush import SemrushClient, SemrushError, SemrushQuotaError
from provisioning.slice_match import project_on_slice
from provisioning.upstream import translate_upstream
from serenity.exceptions import SliceExistsError
from serenity.models import Brand, Market, MarketStatus
from serenity.slices import Slice, slice_from_ids

logger = logging.getLogger("serenity.provisioning")

PUBLISHED = frozenset({"live", "live_with_unpublished_updates", "publishing"})


def _find_slice_project(
    projects: list[dict], slice_: Slice, language_id: str | None = None
) -> dict | None:
    """The slice's project, matched by identities (`provisioning.slice_match`; `language_id`:
    the slice language's catalogue id). Oldest-wins among duplicates is not knowable (no
    created_at); pick by id for determinism."""
    matches = [p for p in projects if project_on_slice(p, slice_, language_id=language_id)]
    if len(matches) > 1:
        logger.error("several upstream projects on one slice", extra={"count": len(matches)})
    return sorted(matches, key=lambda p: str(p.get("id")))[0] if matches else None


@dataclass(frozen=True)
class MarketRequest:
    slice: Slice
    name: str | None
    brand_names: list[str]
    brand_domain: str
    language_id: str


def market_provision(
    *,
    client: SemrushClient,
    brand: Brand,
    market: Market,
    owner: uuid.UUID,
    workspace_id: str,
    request: MarketRequest,
    owned_workspace: bool,
    renew: Callable[[], object] | None = None,
    workspace_new: bool = False,
) -> Outcome:
    """Create or resume the slice's project in `workspace_id` (`_project_of_slice`, which
    `workspace_new` concerns) on the reservation `market`, owned by `owner`, then publish it
    and confirm the publish as the caller's patience allows (`_publish_and_confirm`). The
    row's final write is returned in the Outcome (`market_writes`), for the caller to commit
    with the end of its work (`market_writes_commit`, in the step's ending)."""
    ended = _Ending(market=market, owner=owner, workspace_id=workspace_id, owned=owned_workspace)
    try:
        project_id, created_here = _project_of_slice(
            client=client,
            market=market,
            workspace_id=workspace_id,
            request=request,
            owned=owned_workspace,
            look=owned_workspace and not workspace_new,
        )
    except _SlicePublishedError:
        return ended(Outcome.from_error(SliceExistsError()), MarketEnd.RELEASED)
    except _CreateUnresolvedError as unresolved:
        # Not visible yet, but it may still be made: keep the market (no project id,
        # `publish_failed`) so that the next create of the slice finds and resumes that
        # project instead of making a second one.
        return ended(_failure(unresolved.cause), MarketEnd.PUBLISH_FAILED)
    except SemrushError as exc:
        return ended(_failure(exc), MarketEnd.RELEASED)  # no project: nothing was made
    return _publish_and_confirm(
        ended,
        client=client,
        brand=brand,
        project_id=project_id,
        answer=_published(brand, request.slice, workspace_id, project_id),
        hand_over=Patience.current().hands_over,
        renew=renew,
        # Flat mode: a project made here in the parent is deleted when a later call fails.
        discard=created_here and not owned_workspace,
    )


def _publish_and_confirm(
    ended: _Ending,
    *,
    client: SemrushClient,
    brand: Brand,
    project_id: str,
    answer: Outcome,
    hand_over: bool,
    renew: Callable[[], object] | None = None,
    discard: bool = False,
) -> Outcome:
    """Publish the reservation's project (unless it is `publishing` already:
    `_publish_started`), confirm the publish, and end as `_Ending.confirmed` says; a failed
    call ends as `_Ending.failed` says (`discard`: delete the project)."""
    try:
        started_at = _publish_started(
            client=client,
            brand=brand,
            market=ended.market,
            owner=ended.owner,
            workspace_id=ended.workspace_id,
            project_id=project_id,
            owned=ended.owned,
            renew=renew,
        )
        confirmation = publish_confirm(
            client=client,
            workspace_id=ended.workspace_id,
            project_id=project_id,
            owned=ended.owned,
            started_at=started_at,
            parent_id=brand.organization.semrush_parent_workspace_id or "",
        )
    except SemrushError as exc:
        return ended.failed(client=client, exc=exc, project_id=project_id, discard=discard)
    return ended.confirmed(confirmation, answer=answer, project_id=project_id, hand_over=hand_over)


def _publish_started(
    *,
    client: SemrushClient,
    brand: Brand,
    market: Market,
    owner: uuid.UUID,
    workspace_id: str,
    project_id: str,
    owned: bool,
    renew: Callable[[], object] | None,
) -> datetime:
    """When the reservation's publish began: an earlier run's (the row is `publishing`), else
    now, after recording the project (a crash from then on resumes it), setting its tracked URL
    and publishing it, then recording `publishing`. Raises the publish's SemrushError."""
    if market.status == MarketStatus.PUBLISHING and market.publish_started_at is not None:
        return market.publish_started_at
    _market_record(market, owner, semrush_project_id=project_id, workspace_id=workspace_id)
    if renew is not None:
        renew()
    _project_publish(
        client=client, brand=brand, workspace_id=workspace_id, project_id=project_id, owned=owned
    )
    started_at = timezone.now()
    _market_record(
        market,
        owner,
        status=MarketStatus.PUBLISHING,
        publish_started_at=started_at,
        publish_error=None,
    )
    return started_at


def market_publish_confirm(
    *, client: SemrushClient, market: Market, owner: uuid.UUID, owned_workspace: bool
) -> Outcome:
    """Confirm a `publishing` market's publish, in a chained step (the background confirmation
    of a sync request's publish): the Outcome carries the row's final write, or
    `confirm_in` when it is still publishing. Raises nothing of Semrush's: a failed read ends
    as `market_provision`'s do."""
    project_id, workspace_id = market.semrush_project_id, market.workspace_id
    assert project_id is not None and workspace_id is not None
    # `publishing`: `_publish_and_confirm` only confirms it.
    assert market.status == MarketStatus.PUBLISHING and market.publish_started_at is not None
    slice_ = slice_from_ids(geo_target_id=market.geo_target_id, language_code=market.language_code)
    assert slice_ is not None
    return _publish_and_confirm(
        _Ending(market=market, owner=owner, workspace_id=workspace_id, owned=owned_workspace),
        client=client,
        brand=market.brand,
        project_id=project_id,
        answer=_published(market.brand, slice_, workspace_id, project_id),
        hand_over=False,
    )


def _market_record(market: Market, owner: uuid.UUID, **fields: object) -> None:
    """A write on the reservation while `owner` holds it (a lost one writes nothing: its new
    owner resumes from what it reads)."""
    Market.objects.filter(pk=market.pk, reserved_by=owner).update(
        **fields, updated_at=timezone.now()
    )


def _project_of_slice(
    *,
    client: SemrushClient,
    market: Market,
    workspace_id: str,
    request: MarketRequest,
    owned: bool,
    look: bool,
) -> tuple[str, bool]:
    """The reservation's project and whether this call created it: the one it records, else
    (`look`) the slice's draft in the workspace, resumed, else a new one.

    `look` is false in the parent (flat mode: the slice does not identify a project there)
    and when the caller's attempt created the workspace moments ago and this is the first run
    of its step: the workspace holds no project (nothing else may touch a brand's workspace
    while its attempt is pending) and the listing would be an upstream call that cannot find
    anything. A re-run always looks.
    Raises `_SlicePublishedError` (the slice's project is published already: `sliceExists`),
    `_CreateUnresolvedError`, SemrushError."""
    if market.semrush_project_id is not None:
        return market.semrush_project_id, False
    if look:
        existing = _find_slice_project(
            client.list_projects(workspace_id=workspace_id, owned=True),
            request.slice,
            request.language_id,
        )
        if existing is not None:
            if str(existing.get("publish_status") or "").lower() in PUBLISHED:
                raise _SlicePublishedError()
            return str(existing["id"]), False
    created = _project_create(
        client=client, workspace_id=workspace_id, request=request, owned=owned
    )
    return created, True


def _published(brand: Brand, slice_: Slice, workspace_id: str, project_id: str) -> Outcome:
    return Outcome(
        status=201,
        body={
            "brandId": str(brand.id),
            "geoTargetId": slice_.geo_target_id,
            "languageCode": slice_.language_code,
            "workspaceId": workspace_id,
            "projectId": project_id,
            "published": True,
        },
    )


@dataclass(frozen=True)
class _Ending:
    """`market_provision`'s answers, each with its market row's final write."""

    market: Market
    owner: uuid.UUID
    workspace_id: str
    owned: bool

    def __call__(
        self,
        outcome: Outcome,
        end: MarketEnd,
        project_id: str | None = None,
        **publish: Any,
    ) -> Outcome:
        if end is MarketEnd.PUBLISH_FAILED and "publish_error" not in publish:
            publish["publish_error"] = {
                "code": outcome.body.get("error"),
                "message": outcome.body.get("message"),
            }
        write = MarketWrite(
            market_id=self.market.pk,
            owner=self.owner,
            end=end,
            project_id=project_id,
            workspace_id=self.workspace_id,
            owned_workspace=self.owned,
            **publish,
        )
        return replace(outcome, market_writes=(*outcome.market_writes, write))

    def confirmed(
        self, confirmation: Confirmation, *, answer: Outcome, project_id: str, hand_over: bool
    ) -> Outcome:
        """The answer to what a publish's reads confirmed. Still publishing: a sync request
        answers `published: false` and hands the row to a background confirmation
        (`MarketEnd.PUBLISHING`); a chained step reads again later (`confirm_in`)."""
        if isinstance(confirmation, Live):
            return self(
                answer,
                MarketEnd.LIVE,
                project_id,
                live_status=confirmation.status,
                publish_seconds=confirmation.seconds,
            )
        if isinstance(confirmation, NotPublished):
            error: DomainError = (
                PublishTimeoutError()
                if confirmation.code == PublishTimeoutError.code
                else PublishFailedError()
            )
            logger.warning(
                "a publish did not end live",
                extra={"project_id": project_id, "publish_error": confirmation.code},
            )
            failed = replace(Outcome.from_error(error), job_failure=error)
            publish_error = {"code": error.code, "message": error.message}
            if confirmation.reason:
                # Semrush's own words, for operators (the admin); never in an answer.
                publish_error["reason"] = confirmation.reason[:500]
            return self(failed, MarketEnd.PUBLISH_FAILED, project_id, publish_error=publish_error)
        unconfirmed = replace(answer, body={**answer.body, "published": False})
        if hand_over:
            return self(unconfirmed, MarketEnd.PUBLISHING, project_id)
        return replace(unconfirmed, confirm_in=confirmation.retry_in)

    def failed(
        self, *, client: SemrushClient, exc: SemrushError, project_id: str | None, discard: bool
    ) -> Outcome:
        """An upstream call failed: nothing was made (the reservation is released); or the
        project exists and is kept on the market (`publish_failed`) for the next create to
        resume, unless `discard` (flat mode, created here) deletes it."""
        if project_id is None:
            return self(_failure(exc), MarketEnd.RELEASED)
        if discard:
            project_discard(
                client=client,
                workspace_id=self.workspace_id,
                project_id=project_id,
                owned_workspace=self.owned,
            )
            return self(_failure(exc), MarketEnd.RELEASED, project_id)
        return self(_failure(exc), MarketEnd.PUBLISH_FAILED, project_id)


class _SlicePublishedError(Exception):
    """The slice's project in the brand's workspace is published already."""


class _CreateUnresolvedError(Exception):
    """An ambiguous project create whose project the listing does not show (yet)."""

    def __init__(self, cause: SemrushError) -> None:
        super().__init__("ambiguous project create")
        self.cause = cause


def _project_create(
    *, client: SemrushClient, workspace_id: str, request: MarketRequest, owned: bool
) -> str:
    """Create the slice's project; its id. An ambiguous create (a timeout or a 5xx) may have
    made the project upstream: in the brand's own workspace, where the slice identifies the
    project, it is reconciled through the listing, as a workspace create is (SPEC §5), instead
    of leaving a project no market points at; not found there → `_CreateUnresolvedError`.
    Raises SemrushError otherwise."""
    try:
        project = client.create_project(
            workspace_id=workspace_id,
            name=request.name or request.slice.default_name,
            location_id=request.slice.geo_target_id,
            language=request.language_id,
            brand_names=request.brand_names,
            brand_domain=request.brand_domain,
            country_code=request.slice.country.lower(),
            location_name=request.slice.country_name,
            owned=owned,
        )
    except SemrushError as exc:
        if not (exc.ambiguous and owned):
            raise
        existing = _find_slice_project(
            client.list_projects(workspace_id=workspace_id, owned=True),
            request.slice,
            request.language_id,
        )
        if existing is None:
            raise _CreateUnresolvedError(exc) from exc
        logger.warning(
            "project create was ambiguous; resuming the project it made",
            extra={"project_id": str(existing["id"])},
        )
        project = existing
    return str(project["id"])


def _project_publish(
    *, client: SemrushClient, brand: Brand, workspace_id: str, project_id: str, owned: bool
) -> None:
    """Set the project's tracked URL (the brand's `baseUrl`), then publish it. Raises the
    publish's SemrushError; a failed tracked URL is only logged."""
    if brand.base_url:
        try:
            client.set_tracked_url(
                workspace_id=workspace_id,
                project_id=project_id,
                primary_url=brand.base_url,
                owned=owned,
            )
        except SemrushError:
            # Upstream treats the tracked URL as a setting; a failed PATCH is logged and
            # the market still goes live (it can be re-set by activating again).
            logger.warning("setting the tracked URL failed", extra={"project_id": project_id})
    client.publish_project(workspace_id=workspace_id, project_id=project_id, owned=owned)


def _failure(exc: SemrushError) -> Outcome:
    error = QuotaExceededError() if isinstance(exc, SemrushQuotaError) else translate_upstream(exc)
    if isinstance(error, UpstreamError):
        logger.warning(
            "market provisioning failed upstream", extra={"error_class": type(exc).__name__}
        )
    return Outcome.from_error(error)


def market_discard_unrecorded(
    *,
    client: SemrushClient,
    workspace_id: str,
    slices: list[Slice],
    language_ids: Mapping[str, str | None] | None = None,
) -> None:
    """Delete each slice's project in `workspace_id` that no market row records: what a step
    left behind when it created the project upstream and could not record it (its worker died
    first, or a deactivate or cancel had tombstoned its reservation). One listing and one
    query for all the slices. The caller has made sure no live work owns these slices. Never
    raises a Semrush error (a project left is listed by provisioning_audit), but a permit
    deferred (`PermitDeferredError`) passes through: the step re-runs and discards then.
    `language_ids` maps a slice's language code to its catalogue id, matched first."""
    try:
        projects = client.list_projects(workspace_id=workspace_id)
    except SemrushError:
        logger.warning("could not list a workspace to discard an unrecorded project")
        return
    ids = language_ids or {}
    found = {
        str(p["id"])
        for s in slices
        if (p := _find_slice_project(projects, s, ids.get(s.language_code))) is not None
    }
    recorded = set(
        Market.objects.filter(semrush_project_id__in=found, deleted_at__isnull=True).values_list(
            "semrush_project_id", flat=True
        )
    )
    for project_id in sorted(found - recorded):
        project_discard(
            client=client, workspace_id=workspace_id, project_id=project_id, owned_workspace=False
        )
        logger.warning(
            "deleted a project an interrupted step had made but not recorded",
            extra={"project_id": project_id, "workspace_id": workspace_id},
        )


def project_discard(
    *, client: SemrushClient, workspace_id: str, project_id: str, owned_workspace: bool
) -> None:
    """Delete a project we created, best effort (a project left is listed by the audit)."""
    try:
        client.delete_project(
            workspace_id=workspace_id, project_id=project_id, owned=owned_workspace
        )
    except SemrushError:
        logger.warning(
            "could not delete a project we created; provisioning_audit will list it",
            extra={"project_id": project_id},
        )
