from django.apps import AppConfig


class ProvisioningConfig(AppConfig):
    name = "provisioning"
    verbose_name = "Semrush provisioning"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # An onboarding completes when its last item's chain ends, in that ending's
        # transaction (SPEC §11.2, §11.3).
        # The chain's steps, registered for every process: a sync request runs them inline
        # (SPEC §12.3), a worker from its queue.
        from jobs.signals import chain_ended, chains_ended
        from provisioning import tasks  # noqa: F401
        from provisioning.flows.onboarding import onboarding_chain_ended, onboarding_chains_ended

        chain_ended.connect(onboarding_chain_ended, dispatch_uid="provisioning.onboarding")
        chains_ended.connect(onboarding_chains_ended, dispatch_uid="provisioning.onboardings")
