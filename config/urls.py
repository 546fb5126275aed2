from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from config.observability import metrics_view
from toolcalls.api.errors import unknown_path
from toolcalls.console import views as console_views

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="approvals:queue", permanent=False)),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("console/approvals/", include("approvals.urls")),
    path("console/search/", console_views.search, name="search"),
    path("console/tools/", console_views.tools, name="console-tools"),
    path("console/settings/", console_views.console_settings, name="console-settings"),
    path("console/operations/", include("toolcalls.console.urls")),
    path("admin/", admin.site.urls),
    path("metrics", metrics_view, name="metrics"),
    path("api/v1/", include("toolcalls.api.urls")),
    path("api/v1/", include("approvals.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    # Anything else under /api (a typo, a missing or extra slash): 404 in the API's error shape.
    re_path(r"^api(?:/(?P<path>.*))?$", unknown_path),
]
