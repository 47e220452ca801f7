"""Model factories for tests."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from serenity.models import ApiToken, Brand, Membership, Organization, Role
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


def make_token(user) -> str:  # type: ignore[no-untyped-def]
    raw = generate_token()
    ApiToken.objects.create(user=user, prefix=raw[:8], token_hash=token_digest(raw))
    return raw
