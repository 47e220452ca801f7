from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from serenity.api import brands, health

urlpatterns = [
    path("healthz", health.healthz),
    path("readyz", health.readyz),
    path("metrics", health.metrics),
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=[], authentication_classes=[]), name="schema"),
    path(
        "api/docs/",
        SpectacularSwaggerView.as_view(url_name="schema", permission_classes=[], authentication_classes=[]),
        name="docs",
    ),
    path("v2/orgs/<str:org_id>/brands", brands.BrandCollectionView.as_view()),
    path("v2/orgs/<str:org_id>/brands/<str:brand_id>", brands.BrandDetailView.as_view()),
]
