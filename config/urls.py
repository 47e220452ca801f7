from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("serenity.api.urls")),
]

handler404 = "serenity.api.errors.not_found_view"
handler500 = "serenity.api.errors.server_error_view"
