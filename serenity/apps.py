from django.apps import AppConfig


class SerenityConfig(AppConfig):
    name = "serenity"
    verbose_name = "Serenity: organizations, brands and markets"
    default_auto_field = "django.db.models.BigAutoField"
