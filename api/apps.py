from django.apps import AppConfig


class ApiConfig(AppConfig):
    """The HTTP and admin layer: above every domain app, imported by none (import-linter)."""

    name = "api"
    verbose_name = "Serenity: HTTP API and admin"
