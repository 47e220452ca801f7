"""Market slices in Semrush: reserve, create-or-resume the project, publish, finish (SPEC §4.2).

The sync routes and the chained jobs call `market_provision` unchanged, so both answer the same
`Outcome`. The slice is reserved by a `creating` row under the live-slice unique constraint
before any upstream call; the reservation records its owner and, as soon as it exists, the
upstream project id, so a re-run after a crash resumes the same project instead of making a
second one. The row's final write (`live`, `publish_failed`, or dropped) travels in the
Outcome and is committed with the end of the work (SPEC §11.5): a chained step's ending, in one
transaction with its job and its attempt; a sync request's `market_outcome_commit`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from jobs.models import AsyncJob, JobStatus
from provisioning.exceptions import ProvisioningCancelledError, QuotaExceededError, UpstreamError
from provisioning.models import AttemptStatus, ProvisioningAttempt
from provisioning.outcome import MarketEnd, MarketWrite, Outcome
from provisioning.semrush import SemrushClient, SemrushError, SemrushQuotaError
from provisioning.upstream import translate_upstream
from serenity.exceptions import SliceExistsError
from serenity.models import Brand, Market, MarketStatus
from serenity.slices import Slice

logger = logging.getLogger("serenity.provisioning")

RESUMABLE = (MarketStatus.DRAFT, MarketStatus.PUBLISH_FAILED)
PUBLISHED = frozenset({"live", "live_with_unpublished_updates", "publishing"})


def _owner_is_live(market: Market) -> bool:
    """A `creating` reservation is live while its owner (an attempt or a job) is unfinished;
    a request-owned one (flat sync) while it is younger than the stale threshold."""
    owner = market.reserved_by
    if owner is None:
        return False
    if ProvisioningAttempt.objects.filter(pk=owner, status=AttemptStatus.PENDING).exists():
        return True
    if AsyncJob.objects.filter(pk=owner, status=JobStatus.IN_PROGRESS).exists():
        return True
    if (
        ProvisioningAttempt.objects.filter(pk=owner).exists()
        or AsyncJob.objects.filter(pk=owner).exists()
    ):
        return False
    age = timezone.now() - market.updated_at
    return age < timedelta(seconds=settings.SERENITY_PROVISIONING_STALE_AFTER_SECONDS)


def _live_slice_market(*, brand: Brand, slice_: Slice) -> Market | None:
    return Market.objects.filter(
        brand=brand,
        geo_target_id=slice_.geo_target_id,
        language_code=slice_.language_code,
        deleted_at__isnull=True,
    ).first()


def slice_market_in(markets: list[Market], slice_: Slice) -> Market | None:
    for market in markets:
        if (market.geo_target_id, market.language_code) == (
            slice_.geo_target_id,
            slice_.language_code,
        ):
            return market
    return None


def slice_taken(market: Market | None) -> bool:
    """The slice has a live market or a live reservation (a create must answer 409)."""
    return market is not None and not _resumable(market)


def _resumable(market: Market) -> bool:
    return market.status in RESUMABLE or (
        market.status == MarketStatus.CREATING and not _owner_is_live(market)
    )


def market_slice_check(*, brand: Brand, slice_: Slice) -> None:
    """Raise `SliceExistsError` when the slice has a market a create could not resume (a live
    one, or a reservation whose owner is still working). Reads only; `market_reserve` is the
    write that settles a race."""
    if slice_taken(_live_slice_market(brand=brand, slice_=slice_)):
        raise SliceExistsError()


def market_reserve(
    *,
    brand: Brand,
    slice_: Slice,
    owner: uuid.UUID,
    name: str | None,
    live_markets: list[Market] | None = None,
    savepoint: bool = True,
) -> Market:
    """Reserve the slice for `owner`, or take over a resumable market of it.

    Resumable: `draft`, `publish_failed`, or `creating` whose owner has finished. A `creating`
    reservation of `owner` itself is returned as it is: an earlier run of the owner's step
    reserved it and was interrupted (a worker lost, or re-scheduled for the upstream quota,
    SPEC §10.6) before its end; the re-run resumes it (with its project, if one was recorded).
    Raises `SliceExistsError` when the slice has a live market or another owner's live
    reservation.
    `live_markets`: the brand's live markets, already read under the brand's lock (saves a
    query). `savepoint=False`: the caller holds the brand's lock, so no concurrent insert of
    the slice can conflict; an IntegrityError then aborts the caller's transaction.
    """
    existing = (
        _live_slice_market(brand=brand, slice_=slice_)
        if live_markets is None
        else slice_market_in(live_markets, slice_)
    )
    if existing is not None:
        if existing.status == MarketStatus.CREATING and existing.reserved_by == owner:
            return existing
        if not _resumable(existing):
            raise SliceExistsError()
        taken = Market.objects.filter(
            pk=existing.pk, status=existing.status, reserved_by=existing.reserved_by
        ).update(reserved_by=owner, status=MarketStatus.CREATING, updated_at=timezone.now())
        if taken != 1:
            raise SliceExistsError()
        existing.refresh_from_db()
        return existing
    reservation = Market(
        brand=brand,
        geo_target_id=slice_.geo_target_id,
        language_code=slice_.language_code,
        name=name or slice_.default_name,
        status=MarketStatus.CREATING,
        reserved_by=owner,
    )
    if not savepoint:
        reservation.save(force_insert=True)
        return reservation
    try:
        with transaction.atomic():
            reservation.save(force_insert=True)
    except IntegrityError:
        raise SliceExistsError() from None
    return reservation


def market_release(*, market_id: uuid.UUID, owner: uuid.UUID) -> None:
    """Drop a reservation that created nothing upstream (no project id)."""
    Market.objects.filter(
        pk=market_id, reserved_by=owner, status=MarketStatus.CREATING, semrush_project_id=None
    ).delete()


def _project_slice(project: dict) -> tuple[int | None, str | None]:
    ai = (project.get("settings") or {}).get("ai") or {}
    location = ai.get("location") or {}
    language = ai.get("language") or {}
    geo = location.get("id") if isinstance(location, dict) else None
    if geo is None:
        geo = project.get("location_id")
    lang = language.get("name") if isinstance(language, dict) else None
    return (
        int(geo) if isinstance(geo, int | str) and str(geo).isdigit() else None,
        str(lang).lower() if lang else None,
    )


def _find_slice_project(projects: list[dict], slice_: Slice) -> dict | None:
    """Oldest-wins among duplicates is not knowable (no created_at); pick by id for
    determinism."""
    matches = [
        p
        for p in projects
        if _project_slice(p) == (slice_.geo_target_id, slice_.language_code)
        or _project_slice(p) == (slice_.geo_target_id, slice_.base_language)
    ]
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
    delete_on_failure: bool,
    renew: Callable[[], object] | None = None,
    workspace_new: bool = False,
) -> Outcome:
    """Create or resume the slice's project in `workspace_id`, set its tracked URL and publish
    it. The reservation (`market`, owned by `owner`) already exists.

    In a sub-workspace the slice's project is first looked up upstream (a published one is
    `sliceExists`, a draft is resumed), unless `workspace_new`: the caller's attempt created
    the workspace moments ago and this is the first run of its step, so the workspace holds no
    project (nothing else may touch a brand's workspace while its attempt is pending) and the
    listing would be an upstream call that cannot find anything. A re-run always looks.

    The one write here is the project id, recorded on the reservation the moment the project
    exists (a crash from then on resumes that project). The row's final write is returned in
    the Outcome (`market_writes`, one `MarketWrite`), for the caller to commit with the end of
    its work (`market_writes_commit`; a sync request: `market_outcome_commit`).
    `delete_on_failure` (flat mode) deletes a project created here when a later call fails.
    """
    project_id = market.semrush_project_id
    created_here = False
    ended = _Ending(market=market, owner=owner, workspace_id=workspace_id, owned=owned_workspace)
    try:
        if project_id is None and owned_workspace and not workspace_new:
            existing = _find_slice_project(
                client.list_projects(workspace_id=workspace_id, owned=True), request.slice
            )
            if existing is not None:
                if str(existing.get("publish_status") or "").lower() in PUBLISHED:
                    return ended(Outcome.from_error(SliceExistsError()), MarketEnd.RELEASED)
                project_id = str(existing["id"])
        if project_id is None:
            project_id = _project_create(
                client=client, workspace_id=workspace_id, request=request, owned=owned_workspace
            )
            created_here = True
        # Record the project the moment it exists: a crash from here on resumes it.
        Market.objects.filter(pk=market.pk, reserved_by=owner).update(
            semrush_project_id=project_id, workspace_id=workspace_id, updated_at=timezone.now()
        )
        if renew is not None:
            renew()
        _project_publish(
            client=client,
            brand=brand,
            workspace_id=workspace_id,
            project_id=project_id,
            owned=owned_workspace,
        )
    except _CreateUnresolvedError as unresolved:
        # Not visible yet, but it may still be made: keep the market (no project id,
        # `publish_failed`) so that the next create of the slice finds and resumes that
        # project instead of making a second one.
        return ended(_failure(unresolved.cause), MarketEnd.PUBLISH_FAILED)
    except SemrushError as exc:
        if project_id is None:
            return ended(_failure(exc), MarketEnd.RELEASED)
        if delete_on_failure and created_here:
            _discard(
                client=client,
                workspace_id=workspace_id,
                project_id=project_id,
                owned_workspace=owned_workspace,
            )
            return ended(_failure(exc), MarketEnd.RELEASED, project_id)
        # The project exists: keep it on the market so the next create resumes it.
        return ended(_failure(exc), MarketEnd.PUBLISH_FAILED, project_id)
    answer = Outcome(
        status=201,
        body={
            "brandId": str(brand.id),
            "geoTargetId": request.slice.geo_target_id,
            "languageCode": request.slice.language_code,
            "workspaceId": workspace_id,
            "projectId": project_id,
            "published": True,
        },
    )
    return ended(answer, MarketEnd.LIVE, project_id)


@dataclass(frozen=True)
class _Ending:
    """`market_provision`'s answers, each with its market row's final write."""

    market: Market
    owner: uuid.UUID
    workspace_id: str
    owned: bool

    def __call__(self, outcome: Outcome, end: MarketEnd, project_id: str | None = None) -> Outcome:
        write = MarketWrite(
            market_id=self.market.pk,
            owner=self.owner,
            end=end,
            project_id=project_id,
            workspace_id=self.workspace_id,
            owned_workspace=self.owned,
        )
        return replace(outcome, market_writes=(*outcome.market_writes, write))


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
            client.list_projects(workspace_id=workspace_id, owned=True), request.slice
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


# --- the final writes -------------------------------------------------------------------------


def market_writes_commit(
    writes: tuple[MarketWrite, ...], *, still_valid: Callable[[], bool] | None = None
) -> bool:
    """Apply the market rows' final writes, in the caller's transaction (each only while its
    owner still holds the reservation). False — nothing of the transaction may stand, the
    caller rolls it back — when a row may not go live: `still_valid()` says the work lost the
    brand (a chain's attempt ended, or the brand points elsewhere), or the reservation is no
    longer the owner's (a heal or a deactivate tombstoned it). Other writes are never refused:
    what failed is recorded whoever won."""
    if (
        still_valid is not None
        and any(write.end is MarketEnd.LIVE for write in writes)
        and not still_valid()
    ):
        return False
    changed = [(write, _market_write(write)) for write in writes]
    return all(rows == 1 for write, rows in changed if write.end is MarketEnd.LIVE)


def _market_write(write: MarketWrite) -> int:
    """One row's final write; the number of rows it changed."""
    owned = Market.objects.filter(pk=write.market_id, reserved_by=write.owner)
    now = timezone.now()
    if write.end is MarketEnd.LIVE:
        return owned.filter(deleted_at__isnull=True).update(
            status=MarketStatus.LIVE,
            reserved_by=None,
            semrush_project_id=write.project_id,
            workspace_id=write.workspace_id,
            updated_at=now,
        )
    if write.end is MarketEnd.PUBLISH_FAILED:
        return owned.update(status=MarketStatus.PUBLISH_FAILED, reserved_by=None, updated_at=now)
    deleted, _ = owned.filter(status=MarketStatus.CREATING).delete()
    return deleted


def market_writes_refused(
    *, client: SemrushClient, writes: tuple[MarketWrite, ...]
) -> tuple[MarketWrite, ...]:
    """What to commit instead of writes that were refused (a deactivate or cancel won before
    the final write, SPEC §6.3): each project that was to go live is deleted upstream and its
    row dropped; the other writes stand. Never raises (a project left is listed by
    provisioning_audit)."""
    instead = []
    for write in writes:
        if write.end is MarketEnd.LIVE:
            if write.project_id is not None:
                _discard(
                    client=client,
                    workspace_id=write.workspace_id,
                    project_id=write.project_id,
                    owned_workspace=write.owned_workspace,
                )
            write = replace(write, end=MarketEnd.RELEASED)
        instead.append(write)
    return tuple(instead)


def market_outcome_commit(*, client: SemrushClient, outcome: Outcome) -> Outcome:
    """A sync request's market rows: commit the Outcome's final writes in one transaction and
    answer it. Refused (`market_writes_commit`): the projects that were to go live are deleted
    and their rows dropped, and the answer is 409 `provisioningCancelled`."""
    if not outcome.market_writes:
        return outcome
    if _commit(outcome.market_writes):
        return replace(outcome, market_writes=())
    _commit(market_writes_refused(client=client, writes=outcome.market_writes))
    return Outcome.from_error(ProvisioningCancelledError())


def _commit(writes: tuple[MarketWrite, ...]) -> bool:
    with transaction.atomic():
        committed = market_writes_commit(writes)
        if not committed:
            transaction.set_rollback(True)
    return committed


def market_discard_unrecorded(
    *, client: SemrushClient, workspace_id: str, slice_: Slice
) -> str | None:
    """Delete the slice's project in `workspace_id` if no market row records it: what a step
    that died between creating it upstream and recording it left behind. The caller has made
    sure no live work owns the workspace's slice. Returns the id deleted; never raises (a
    project left is listed by provisioning_audit)."""
    try:
        project = _find_slice_project(client.list_projects(workspace_id=workspace_id), slice_)
    except SemrushError:
        logger.warning("could not list a workspace to discard an unrecorded project")
        return None
    if project is None:
        return None
    project_id = str(project["id"])
    if Market.objects.filter(semrush_project_id=project_id, deleted_at__isnull=True).exists():
        return None
    _discard(client=client, workspace_id=workspace_id, project_id=project_id, owned_workspace=False)
    logger.warning(
        "deleted a project an interrupted step had made but not recorded",
        extra={"project_id": project_id, "workspace_id": workspace_id},
    )
    return project_id


def _discard(
    *, client: SemrushClient, workspace_id: str, project_id: str, owned_workspace: bool
) -> None:
    try:
        client.delete_project(
            workspace_id=workspace_id, project_id=project_id, owned=owned_workspace
        )
    except SemrushError:
        logger.warning(
            "could not delete a project we created; provisioning_audit will list it",
            extra={"project_id": project_id},
        )
