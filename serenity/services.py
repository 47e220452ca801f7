"""Writes for organizations, users, memberships and API tokens.

Brand, market and prompt writes that involve provisioning live in `provisioning.services`; this
module holds the tenancy set-up used by the management commands and the admin.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from kernel.crypto import Reencryption, column_reencrypt
from kernel.errors import InvalidRequestError
from serenity.models import (
    ApiToken,
    Brand,
    DriftRepair,
    Membership,
    Organization,
    Role,
    WorkspaceMode,
)
from serenity.tokens import generate_token, token_digest

# Enough of the token to recognise it in a list; the random part starts after "srn_".
TOKEN_DISPLAY_PREFIX_LENGTH = 8


def organization_create(
    *,
    name: str,
    parent_workspace_id: str | None = None,
    serenity_enabled: bool = False,
    workspace_mode: str = WorkspaceMode.SUBWORKSPACE,
    semrush_token: str | None = None,
    drift_repair: str = DriftRepair.OFF,
) -> Organization:
    """Create an organization.

    `semrush_token`, when given, is stored encrypted (`Organization.set_semrush_credential`) and
    is never returned or logged. A blank `parent_workspace_id` is stored as NULL. The org is a
    Serenity org only when `serenity_enabled` and it has a parent workspace.

    Raises `InvalidRequestError` for a blank name, an unknown workspace mode or drift repair.
    """
    if drift_repair not in DriftRepair.values:
        raise InvalidRequestError(f"driftRepair must be one of {', '.join(DriftRepair.values)}.")
    clean_name = name.strip()
    if not clean_name:
        raise InvalidRequestError("name must not be blank.")
    if workspace_mode not in WorkspaceMode.values:
        raise InvalidRequestError(
            f"workspaceMode must be one of {', '.join(WorkspaceMode.values)}."
        )
    organization = Organization(
        name=clean_name,
        semrush_parent_workspace_id=(parent_workspace_id or "").strip() or None,
        serenity_enabled=serenity_enabled,
        workspace_mode=workspace_mode,
        drift_repair=drift_repair,
    )
    if semrush_token:
        organization.set_semrush_credential(semrush_token)
    organization.save()
    return organization


def user_ensure(*, username: str, staff: bool = False) -> User:
    """Return the user named `username`, creating it (with an unusable password: API users log
    in with tokens) if needed. `staff=True` makes the user staff; it never demotes one.

    Idempotent; safe against a concurrent create of the same username.
    """
    clean_username = username.strip()
    if not clean_username:
        raise InvalidRequestError("username must not be blank.")
    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(username=clean_username)
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    if staff and not user.is_staff:
        user_model.objects.filter(pk=user.pk).update(is_staff=True)
        user.is_staff = True
    return user


def membership_ensure(*, user: User, organization: Organization, role: str) -> Membership:
    """Make `user` a member of `organization` with exactly `role` (creating or updating the one
    membership row). Idempotent; safe against a concurrent create.

    Raises `InvalidRequestError` for an unknown role.
    """
    if role not in Role.values:
        raise InvalidRequestError(f"role must be one of {', '.join(Role.values)}.")
    membership, _ = Membership.objects.update_or_create(
        user=user, organization=organization, defaults={"role": role}
    )
    return membership


def api_token_create(*, user: User, name: str = "") -> tuple[ApiToken, str]:
    """Mint an API token for `user`.

    Returns the row and the raw token. The raw token exists only in this return value: the
    database keeps its SHA-256 digest and a short display prefix, so it can never be shown again.
    """
    raw = generate_token()
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            name=name.strip(),
            prefix=raw[:TOKEN_DISPLAY_PREFIX_LENGTH],
            token_hash=token_digest(raw),
        )
    return token, raw


def api_token_revoke(*, token_id: int) -> bool:
    """Revoke a token (idempotent). Returns whether this call revoked it."""
    changed = ApiToken.objects.filter(pk=token_id, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    return changed == 1


def brand_update(*, brand: Brand, changes: dict[str, Any]) -> None:
    """PATCH: `changes` maps the brand's writable fields (by the model's names: the update
    body's serializer declares which) to their new values; no upstream call. Only the given
    fields are written (an UPDATE of those columns, never a whole-instance save that could
    clobber the provisioning pointer written concurrently by a worker)."""
    if changes:
        Brand.objects.filter(pk=brand.pk).update(updated_at=timezone.now(), **changes)


def organization_credentials_rotate() -> Reencryption:
    """Re-encrypt every stored org credential with the first of FIELD_ENCRYPTION_KEYS (the
    orgs no configured key decrypts are reported, left as they are)."""
    return column_reencrypt(Organization.objects.all(), "semrush_credential_encrypted")


def organization_drift_repair_set(*, organization: Organization, drift_repair: str) -> None:
    """Set what the drift sweep does with what it finds (SPEC §13.1): `off` (report) or
    `auto` (repair). Raises `InvalidRequestError` for another value."""
    if drift_repair not in DriftRepair.values:
        raise InvalidRequestError(f"driftRepair must be one of {', '.join(DriftRepair.values)}.")
    Organization.objects.filter(pk=organization.pk).update(drift_repair=drift_repair)
    organization.drift_repair = drift_repair
