"""Top-level URLs: pages, API (with OpenAPI schema and Swagger UI) and the Django admin."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.urls import include, path
from django.views.decorators.http import require_safe
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from config.middleware import csp_with

from . import views

urlpatterns = [
    path("", require_safe(views.home), name="home"),
    path("healthz", require_safe(views.healthz), name="healthz"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # A page a person opens: signed out, it goes to the sign-in page like the others.
    path(
        "api/docs/",
        # Split view: Swagger UI's start-up script is a file (?script), not inline. Its React
        # code inserts <style> elements, so this page alone allows inline styles.
        csp_with(style_src="'self' 'unsafe-inline'")(
            login_required(SpectacularSwaggerSplitView.as_view(url_name="api-schema"))
        ),
        name="api-docs",
    ),
    path("", include("review.urls")),
    path("", include("scoring.urls")),
    path("", include("public.urls")),
]
