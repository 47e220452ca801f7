from django.apps import AppConfig


class ProvisioningConfig(AppConfig):
    name = "provisioning"
    verbose_name = "Semrush provisioning"
    default_auto_field = "django.db.models.BigAutoField"
