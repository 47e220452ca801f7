from django.apps import AppConfig


class ReconcileConfig(AppConfig):
    name = "provisioning.reconcile"
    label = "reconcile"
    verbose_name = "Drift and reconciliations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # A repair chain's end counts its items, in the ending's transaction; the repair step
        # is registered for every process (workers run it, and sync runs never do).
        from jobs.signals import chain_ended
        from provisioning.reconcile import tasks  # noqa: F401
        from provisioning.reconcile.repair import repair_chain_ended

        chain_ended.connect(repair_chain_ended, dispatch_uid="reconcile.repair_ended")
