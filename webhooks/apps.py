from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # A root job's end is a webhook event: the receiver writes its deliveries in the
        # transaction that ends the chain (the outbox).
        from jobs.signals import chain_ended, chains_ended
        from provisioning.reconcile.signals import drift_detected, drift_repaired
        from provisioning.signals import credential_refused, onboarding_ended
        from webhooks.events import (
            credential_refused_event,
            drift_detected_event,
            drift_repaired_event,
            job_chain_ended,
            job_chains_ended,
            onboarding_ended_event,
        )

        chain_ended.connect(job_chain_ended, dispatch_uid="webhooks.job_chain_ended")
        chains_ended.connect(job_chains_ended, dispatch_uid="webhooks.job_chains_ended")
        onboarding_ended.connect(onboarding_ended_event, dispatch_uid="webhooks.onboarding_ended")
        credential_refused.connect(
            credential_refused_event, dispatch_uid="webhooks.credential_refused"
        )
        drift_detected.connect(drift_detected_event, dispatch_uid="webhooks.drift_detected")
        drift_repaired.connect(drift_repaired_event, dispatch_uid="webhooks.drift_repaired")
