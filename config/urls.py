from django.contrib import admin
from django.urls import include, path, re_path

from api.errors import unknown_route_view

# The service's name, not Django's, on every admin page; no navigation sidebar, so that the
# lists (the jobs' above all) fit a 1400 px window without scrolling sideways.
admin.site.site_header = "Serenity administration"
admin.site.site_title = "Serenity admin"
admin.site.index_title = "Operations"
admin.site.enable_nav_sidebar = False

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("api.urls")),
    # Issue 15 / SPEC §10.2: unknown routes answer the JSON envelope, DEBUG on included.
    re_path(r"", unknown_route_view),
]

handler404 = "api.errors.not_found_view"
handler500 = "api.errors.server_error_view"
