from django.urls import path
from drf_spectacular.views import SpectacularRedocView, SpectacularSwaggerView

from api import (
    brands,
    health,
    jobs,
    onboardings,
    org_serenity,
    prompts,
    reconciliations,
    serenity_routes,
    upstream_calls,
    webhooks,
)
from api.schema_view import SchemaView

B = "v2/orgs/<str:org_id>/brands/<str:brand_id>"
ONB = "v2/orgs/<str:org_id>/serenity/onboardings"
REC = "v2/orgs/<str:org_id>/serenity/reconciliations"
W = "v2/orgs/<str:org_id>/serenity/webhooks"
J = "v2/orgs/<str:org_id>/serenity/jobs"

urlpatterns = [
    path("healthz", health.healthz),
    path("readyz", health.readyz),
    path("metrics", health.metrics),
    path(
        "api/schema/",
        SchemaView.as_view(permission_classes=[], authentication_classes=[]),
        name="schema",
    ),
    path(
        "api/docs/",
        SpectacularSwaggerView.as_view(
            url_name="schema", permission_classes=[], authentication_classes=[]
        ),
        name="docs",
    ),
    path(
        "api/redoc/",
        SpectacularRedocView.as_view(
            url_name="schema",
            template_name="serenity/redoc.html",
            permission_classes=[],
            authentication_classes=[],
        ),
        name="redoc",
    ),
    path("v2/orgs/<str:org_id>/brands", brands.BrandCollectionView.as_view()),
    path("v2/orgs/<str:org_id>/serenity", org_serenity.SerenityStateView.as_view()),
    path("v2/orgs/<str:org_id>/serenity/languages", serenity_routes.LanguagesView.as_view()),
    path(f"{ONB}", onboardings.OnboardingCollectionView.as_view()),
    path(f"{ONB}/<str:onboarding_id>", onboardings.OnboardingDetailView.as_view()),
    path(f"{ONB}/<str:onboarding_id>/cancel", onboardings.OnboardingCancelView.as_view()),
    path(f"{ONB}/<str:onboarding_id>/retry", onboardings.OnboardingRetryView.as_view()),
    path(f"{ONB}/<str:onboarding_id>/items", onboardings.OnboardingItemsView.as_view()),
    path(f"{REC}", reconciliations.ReconciliationCollectionView.as_view()),
    path(f"{REC}/<str:reconciliation_id>", reconciliations.ReconciliationDetailView.as_view()),
    path(f"{W}", webhooks.WebhookCollectionView.as_view()),
    path(f"{W}/<str:webhook_id>", webhooks.WebhookDetailView.as_view()),
    path(f"{W}/<str:webhook_id>/rotate-secret", webhooks.WebhookRotateSecretView.as_view()),
    path(f"{W}/<str:webhook_id>/test", webhooks.WebhookTestView.as_view()),
    path(f"{W}/<str:webhook_id>/deliveries", webhooks.DeliveryCollectionView.as_view()),
    path(
        f"{W}/<str:webhook_id>/deliveries/<str:delivery_id>",
        webhooks.DeliveryDetailView.as_view(),
    ),
    path(
        f"{W}/<str:webhook_id>/deliveries/<str:delivery_id>/redeliver",
        webhooks.DeliveryRedeliverView.as_view(),
    ),
    path(
        f"{W}/<str:webhook_id>/deliveries/<str:delivery_id>/attempts",
        webhooks.AttemptCollectionView.as_view(),
    ),
    path(J, jobs.OrgJobCollectionView.as_view()),
    path(
        "v2/orgs/<str:org_id>/serenity/upstream-calls",
        upstream_calls.UpstreamCallCollectionView.as_view(),
    ),
    path(f"{J}/<str:job_id>", jobs.OrgJobDetailView.as_view()),
    path(B, brands.BrandDetailView.as_view()),
    path(f"{B}/serenity/markets", serenity_routes.MarketCollectionView.as_view()),
    path(
        f"{B}/serenity/markets/<str:geo_target_id>/<str:language_code>",
        serenity_routes.MarketDetailView.as_view(),
    ),
    path(f"{B}/serenity/activate", serenity_routes.ActivateView.as_view()),
    path(f"{B}/serenity/deactivate", serenity_routes.DeactivateView.as_view()),
    path(f"{B}/serenity/prompts", prompts.PromptCollectionView.as_view()),
    path(f"{B}/serenity/jobs", jobs.JobCollectionView.as_view()),
    path(f"{B}/serenity/jobs/<str:job_id>", jobs.JobDetailView.as_view()),
    path(f"{B}/serenity/prompts/jobs/<str:job_id>", jobs.JobDetailView.as_view()),
    path(f"{B}/serenity/jobs/<str:job_id>/cancel", jobs.JobCancelView.as_view()),
]
