"""Admin for organizations, members, tokens and brands (SPEC §8; markets and prompts:
`api.admin.markets`).

Secrets never render: the org's Semrush credential is a write-only field (the page shows only
whether one is set) and an API token is shown once, right after it is created. Provisioning
fields (the brand's pointer, market reservations) are read-only here: only the provisioning
services write them, with conditional updates.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db import models
from django.db.models import Prefetch, Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from kernel import context
from kernel.errors import DomainError
from provisioning import credential_hold, credentials
from provisioning.flows.deactivate import deactivate
from provisioning.models import AttemptStatus, ProvisioningAttempt
from provisioning.selectors import brand_provisioning_state, brands_with_provisioning_state
from serenity.models import ApiToken, Brand, BrandStatus, Market, Membership, Organization
from serenity.names import brand_name_key
from serenity.services import api_token_create, api_token_revoke


class OrganizationAdminForm(forms.ModelForm):
    semrush_credential = forms.CharField(
        label="Semrush credential",
        required=False,
        strip=True,
        # render_value=False: the field is always empty on the page, even after an error.
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only. Leave empty to keep the current credential.",
    )
    clear_semrush_credential = forms.BooleanField(
        label="Remove the Semrush credential",
        required=False,
        help_text="The org then uses the service-wide SEMRUSH_API_TOKEN.",
    )

    class Meta:
        model = Organization
        fields = [
            "name",
            "semrush_parent_workspace_id",
            "serenity_enabled",
            "workspace_mode",
            "semrush_rate_limit_per_second",
            "semrush_rate_limit_burst",
            "semrush_concurrency_limit",
            "onboarding_open_items_max",
            "drift_repair",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A form posted without it (an older page) keeps the org's setting (or the default).
        self.fields["drift_repair"].required = False

    def clean_drift_repair(self) -> str:
        return str(self.cleaned_data.get("drift_repair") or self.instance.drift_repair)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("semrush_credential") and cleaned.get("clear_semrush_credential"):
            raise forms.ValidationError("Either set a new credential or remove it, not both.")
        return cleaned


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    raw_id_fields = ["user"]
    fields = ["user", "role", "created_at"]
    readonly_fields = ["created_at"]


@admin.register(Organization)
class OrganizationAdmin(admin.ModelAdmin):
    form = OrganizationAdminForm
    list_display = [
        "name",
        "id",
        "serenity_enabled",
        "semrush_parent_workspace_id",
        "workspace_mode",
        "credential_status",
        "created_at",
    ]
    list_filter = ["serenity_enabled", "workspace_mode", "drift_repair"]
    search_fields = ["name", "=id", "=semrush_parent_workspace_id"]
    readonly_fields = ["id", "credential_status", "credential_rate", "created_at", "updated_at"]
    fields = [
        "id",
        "name",
        "semrush_parent_workspace_id",
        "serenity_enabled",
        "workspace_mode",
        "credential_status",
        "credential_rate",
        "semrush_credential",
        "clear_semrush_credential",
        "semrush_rate_limit_per_second",
        "semrush_rate_limit_burst",
        "semrush_concurrency_limit",
        "onboarding_open_items_max",
        "drift_repair",
        "created_at",
        "updated_at",
    ]
    inlines = [MembershipInline]

    @admin.display(description="Semrush credential")
    def credential_status(self, obj: Organization) -> str:
        return "set" if obj.has_semrush_credential else "not set"

    @admin.display(description="Semrush rate now (requests/s)")
    def credential_rate(self, obj: Organization) -> str:
        """The credential's adaptive rate (SPEC §13.3): below the configured rate after upstream
        answered 429 without Retry-After, back up while it does not."""
        if obj.pk is None:
            return "-"
        credential = credentials.credential_of(obj)
        return f"{credentials.rate_per_second(credential):g} ({credential.source} credential)"

    def save_model(
        self, request: HttpRequest, obj: Organization, form: forms.ModelForm, change: bool
    ) -> None:
        token = form.cleaned_data.get("semrush_credential") or ""
        changed = bool(token) or bool(form.cleaned_data.get("clear_semrush_credential"))
        if token:
            obj.set_semrush_credential(token)
        elif form.cleaned_data.get("clear_semrush_credential"):
            obj.set_semrush_credential("")
        super().save_model(request, obj, form, change)
        if changed and change:
            # SPEC §13.2: work held for a refused credential resumes at once if this one works.
            credential_hold.recheck_on_commit(organization_id=obj.pk)


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "organization", "role", "created_at"]
    list_filter = ["role"]
    search_fields = ["user__username", "organization__name", "=organization__id"]
    raw_id_fields = ["user", "organization"]
    list_select_related = ["user", "organization"]


class ApiTokenAddForm(forms.ModelForm):
    class Meta:
        model = ApiToken
        fields = ["user", "name"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are minted by `api_token_create`; only its digest is stored. The raw value is
    shown once, in the body of the answer to the add form itself: never in a message (the
    messages framework keeps it in a signed, not encrypted, cookie), a redirect or a log.
    Tokens are revoked, never edited."""

    # The request attribute that carries the raw token from save_model to response_add
    # (same request, same thread; nothing else reads it).
    new_token_attribute = "serenity_new_api_token"

    list_display = ["prefix", "user", "name", "created_at", "last_used_at", "revoked_at"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["prefix", "user__username", "name"]
    list_select_related = ["user"]
    raw_id_fields = ["user"]
    actions = ["revoke_tokens"]

    def get_form(
        self, request: HttpRequest, obj: ApiToken | None = None, change: bool = False, **kwargs: Any
    ) -> type[forms.ModelForm]:
        if obj is None:
            kwargs["form"] = ApiTokenAddForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> tuple[str, ...]:
        if obj is None:
            return ("user", "name")
        return ("user", "name", "prefix", "created_at", "last_used_at", "revoked_at")

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> list[str]:
        if obj is None:
            return []
        return ["user", "prefix", "created_at", "last_used_at", "revoked_at"]

    def save_model(
        self, request: HttpRequest, obj: ApiToken, form: forms.ModelForm, change: bool
    ) -> None:
        if change:
            ApiToken.objects.filter(pk=obj.pk).update(name=obj.name)
            return
        token, raw = api_token_create(user=obj.user, name=obj.name)
        # The admin logs and redirects using `obj`: make it the row the service created.
        for field in ApiToken._meta.concrete_fields:
            setattr(obj, field.attname, getattr(token, field.attname))
        setattr(request, self.new_token_attribute, raw)

    def response_add(
        self, request: HttpRequest, obj: ApiToken, post_url_continue: str | None = None
    ) -> HttpResponse:
        raw = getattr(request, self.new_token_attribute, None)
        if raw is None:
            return super().response_add(request, obj, post_url_continue)
        context = {
            **self.admin_site.each_context(request),
            "title": "New API token",
            "opts": self.opts,
            "token": obj,
            "raw_token": raw,
        }
        # The admin's views are never_cache: this page is not kept by any cache either.
        return TemplateResponse(request, "admin/serenity/apitoken/created.html", context)

    @admin.action(description="Revoke selected tokens")
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        revoked = sum(api_token_revoke(token_id=pk) for pk in queryset.values_list("pk", flat=True))
        self.message_user(request, f"Revoked {revoked} token(s).", messages.SUCCESS)


class MarketInline(admin.TabularInline):
    model = Market
    extra = 0
    can_delete = False
    show_change_link = True
    fields = readonly_fields = (
        "geo_target_id",
        "language_code",
        "name",
        "status",
        "semrush_project_id",
        "workspace_id",
        # Why the last publish did not end live, with Semrush's own reason (SPEC §12.1).
        "publish_error",
        "deleted_at",
        "updated_at",
    )

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ProvisioningAttemptInline(admin.TabularInline):
    model = ProvisioningAttempt
    extra = 0
    can_delete = False
    show_change_link = True
    ordering = ["-created_at"]
    fields = readonly_fields = (
        "id",
        "status",
        "reason",
        "started_by",
        "started_by_actor",
        "candidate_workspace_id",
        "freshly_created",
        "workspace_promoted",
        "job",
        "created_at",
        "updated_at",
    )

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _https_url_formfield(db_field: models.Field, **kwargs: Any) -> forms.Field | None:
    """Form fields for a model, with URL fields assuming https (Django 6's default)."""
    if isinstance(db_field, models.URLField):
        kwargs.setdefault("assume_scheme", "https")
    return db_field.formfield(**kwargs)


class BrandAdminForm(forms.ModelForm):
    class Meta:
        model = Brand
        # `status` is not editable: it changes only through the API's flows and the
        # "Deactivate" action (which runs the real deactivate flow).
        fields = ["name", "base_url", "urls", "aliases", "serenity_enabled"]
        formfield_callback = _https_url_formfield

    def clean(self) -> dict[str, Any]:
        # The unique constraint also involves `organization`, which is read-only on this form,
        # so Django's constraint validation skips it: check here rather than fail with a 500.
        cleaned = super().clean() or {}
        name = (cleaned.get("name") or "").strip()
        if name and self.instance.status != BrandStatus.DELETED:
            clash = (
                Brand.objects.filter(
                    organization_id=self.instance.organization_id, name_key=brand_name_key(name)
                )
                .exclude(status=BrandStatus.DELETED)
                .exclude(pk=self.instance.pk)
                .exists()
            )
            if clash:
                raise forms.ValidationError(
                    {"name": "Another live brand of this organization has this name."}
                )
        return cleaned


# A brand's provisioning status as the API derives it (`selectors.brand_provisioning_state`),
# as conditions on `brands_with_provisioning_state`'s annotation: a pending or failed latest
# attempt decides; else a brand with its pointer is ready; else it has none.
_NOT_DECIDED_BY_ATTEMPT = Q(latest_attempt_status__isnull=True) | Q(
    latest_attempt_status=AttemptStatus.READY
)
PROVISIONING_STATUS_Q = {
    "pending": Q(latest_attempt_status=AttemptStatus.PENDING),
    "failed": Q(latest_attempt_status=AttemptStatus.FAILED),
    "ready": _NOT_DECIDED_BY_ATTEMPT & Q(semrush_sub_workspace_id__isnull=False),
    "none": _NOT_DECIDED_BY_ATTEMPT & Q(semrush_sub_workspace_id__isnull=True),
}


class ProvisioningStatusFilter(admin.SimpleListFilter):
    title = "provisioning status"
    parameter_name = "provisioning_status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("pending", "pending"), ("failed", "failed"), ("ready", "ready"), ("none", "none")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Brand]) -> QuerySet[Brand]:
        condition = PROVISIONING_STATUS_Q.get(self.value() or "")
        return queryset.filter(condition) if condition is not None else queryset


@admin.register(Brand)
class BrandAdmin(admin.ModelAdmin):
    """Brands are created and deleted through the API (which provisions Semrush); here an
    operator inspects them and may correct descriptive fields."""

    form = BrandAdminForm
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    list_display = [
        "name",
        "organization",
        "status",
        "provisioning_status",
        "workspace_mode",
        "semrush_sub_workspace_id",
        "serenity_enabled",
        "updated_at",
    ]
    list_filter = ["status", ProvisioningStatusFilter, "workspace_mode", "serenity_enabled"]
    search_fields = ["name", "=id", "=semrush_sub_workspace_id", "organization__name"]
    list_select_related = ["organization"]
    readonly_fields = [
        "id",
        "organization",
        "status",
        "provisioning_status",
        "workspace_mode",
        "semrush_sub_workspace_id",
        "created_at",
        "updated_at",
    ]
    fields = [
        "id",
        "organization",
        "name",
        "status",
        "provisioning_status",
        "workspace_mode",
        "base_url",
        "urls",
        "aliases",
        "serenity_enabled",
        "semrush_sub_workspace_id",
        "created_at",
        "updated_at",
    ]
    inlines = [MarketInline, ProvisioningAttemptInline]
    actions = ["deactivate_brands"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Brand]:
        return brands_with_provisioning_state(super().get_queryset(request))

    @admin.display(description="provisioning status")
    def provisioning_status(self, obj: Brand) -> str:
        return brand_provisioning_state(obj).status or "—"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(
        self, request: HttpRequest, obj: Brand, form: forms.ModelForm, change: bool
    ) -> None:
        # Write only what the operator changed: a full save would overwrite the pointer with
        # this (possibly stale) instance's value and race the provisioning workers.
        changed = [f for f in form.changed_data if f in BrandAdminForm.Meta.fields]
        if changed:
            obj.save(update_fields=[*changed, "updated_at"])

    def has_deactivate_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("serenity.change_brand")

    @admin.action(description="Deactivate…", permissions=["deactivate"])
    def deactivate_brands(
        self, request: HttpRequest, queryset: QuerySet[Brand]
    ) -> TemplateResponse | None:
        """First an intermediate page listing what will be removed (each brand's Semrush
        workspace and its live markets' projects); on its confirmation, the API's deactivate
        flow, brand by brand (it empties the Semrush workspace, clears the pointer and
        tombstones the markets); each success is recorded in the admin log."""
        brands = queryset.select_related("organization").exclude(status=BrandStatus.DELETED)
        if request.POST.get("confirm") != "yes":
            return self._deactivate_confirmation(request, brands)
        done = 0
        with context.scope(actor=context.admin_actor(request.user.get_username())):
            for brand in brands:
                with context.scope(org_id=brand.organization_id, brand_id=brand.pk):
                    try:
                        deactivate(brand=brand)
                    except DomainError as error:
                        self.message_user(request, f"{brand.name}: {error.message}", messages.ERROR)
                        continue
                done += 1
                self.log_change(request, brand, "Deactivated (the deactivate flow ran).")
        self.message_user(request, f"Deactivated {done} brand(s).", messages.SUCCESS)
        return None

    def _deactivate_confirmation(
        self, request: HttpRequest, brands: QuerySet[Brand]
    ) -> TemplateResponse:
        listed = list(brands.prefetch_related(_LIVE_MARKETS))
        context = {
            **self.admin_site.each_context(request),
            "title": "Deactivate brands?",
            "opts": self.opts,
            "brands": listed,
            "selected": [str(brand.pk) for brand in listed],
            "action": "deactivate_brands",
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(
            request, "admin/serenity/brand/deactivate_confirmation.html", context
        )


# A brand's markets that deactivating removes (their projects upstream, then the rows).
_LIVE_MARKETS = Prefetch(
    "markets",
    queryset=Market.objects.filter(deleted_at__isnull=True).order_by("geo_target_id"),
    to_attr="live_markets",
)
