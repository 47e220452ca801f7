from django.apps import AppConfig


class ReconcileConfig(AppConfig):
    name = "provisioning.reconcile"
    label = "reconcile"
    default_auto_field = "django.db.models.BigAutoField"
