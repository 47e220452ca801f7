"""Model factories for tests."""

from __future__ import annotations

import uuid

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from jobs.models import AsyncJob, JobStep, JobType
from provisioning.models import AttemptStartedBy, AttemptStatus, ProvisioningAttempt
from serenity.models import ApiToken, Brand, Market, MarketStatus, Membership, Organization, Role
from serenity.tokens import generate_token, token_digest


class OrganizationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Organization

    name = factory.Sequence(lambda n: f"Org {n}")
    serenity_enabled = True
    semrush_parent_workspace_id = factory.Sequence(lambda n: f"parent-{n}")


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    organization = factory.SubFactory(OrganizationFactory)
    role = Role.WRITER


class BrandFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Brand

    organization = factory.SubFactory(OrganizationFactory)
    name = factory.Sequence(lambda n: f"Brand {n}")
    status = "active"
    base_url = "https://brand.example"
    workspace_mode = factory.LazyAttribute(lambda o: o.organization.workspace_mode)


class ProvisioningAttemptFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ProvisioningAttempt

    brand = factory.SubFactory(BrandFactory)
    started_by = AttemptStartedBy.ACTIVATE
    status = AttemptStatus.PENDING


class AsyncJobFactory(factory.django.DjangoModelFactory):
    """A due provision-workspace job. Pass `brand=` to take both ids from a brand; without one
    the job gets a fresh organization id and no brand (jobs refer to both by id only, so no row
    is created for them)."""

    class Meta:
        model = AsyncJob

    class Params:
        brand = None

    organization_id = factory.LazyAttribute(
        lambda o: o.brand.organization_id if o.brand is not None else uuid.uuid4()
    )
    brand_id = factory.LazyAttribute(lambda o: o.brand.id if o.brand is not None else None)
    job_type = JobType.PROVISION_WORKSPACE
    step = JobStep.PROVISION_WORKSPACE
    run_after = factory.LazyFunction(timezone.now)


class MarketFactory(factory.django.DjangoModelFactory):
    """A live US/en market (the model's own default status is `creating`)."""

    class Meta:
        model = Market

    brand = factory.SubFactory(BrandFactory)
    geo_target_id = 2840
    language_code = "en"
    name = "US-en"
    status = MarketStatus.LIVE


def make_token(user) -> str:  # type: ignore[no-untyped-def]
    raw = generate_token()
    ApiToken.objects.create(user=user, prefix=raw[:8], token_hash=token_digest(raw))
    return raw
