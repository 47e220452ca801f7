"""Webhook endpoints and their deliveries (SPEC §11.3). Each answer is rendered by the output
serializer that the OpenAPI document describes (`serenity.api.schemas.webhooks`)."""

from __future__ import annotations

import uuid

from rest_framework.request import Request
from rest_framework.response import Response

from serenity.api.base import OrgScopedView
from serenity.api.pagination import PageQuerySerializer, query_parse
from serenity.api.schemas import webhooks as schemas
from serenity.api.webhook_serializers import (
    DeliveryListSerializer,
    DeliverySerializer,
    WebhookCreatedSerializer,
    WebhookCreateSerializer,
    WebhookListSerializer,
    WebhookSerializer,
)
from webhooks import selectors, services

# --- Views --------------------------------------------------------------------------------------


class WebhookCollectionView(OrgScopedView):
    @schemas.webhook_list_schema
    def get(self, request: Request, org_id: str) -> Response:
        query = query_parse(PageQuerySerializer, request)
        page = selectors.webhook_list(
            organization=self.scope.organization, cursor=query["cursor"], limit=query["limit"]
        )
        return Response(WebhookListSerializer(page).data)

    @schemas.webhook_create_schema
    def post(self, request: Request, org_id: str) -> Response:
        body = WebhookCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        created = services.webhook_create(
            organization=self.scope.organization,
            url=body.validated_data["url"],
            events=body.validated_data.get("events"),
        )
        return Response(WebhookCreatedSerializer(created).data, status=201)


class WebhookDetailView(OrgScopedView):
    @schemas.webhook_get_schema
    def get(self, request: Request, org_id: str, webhook_id: str) -> Response:
        webhook = selectors.webhook_get(
            organization=self.scope.organization, webhook_id=uuid.UUID(webhook_id)
        )
        return Response(WebhookSerializer(webhook).data)

    @schemas.webhook_delete_schema
    def delete(self, request: Request, org_id: str, webhook_id: str) -> Response:
        services.webhook_delete(
            organization=self.scope.organization, webhook_id=uuid.UUID(webhook_id)
        )
        return Response(status=204)


class DeliveryCollectionView(OrgScopedView):
    @schemas.delivery_list_schema
    def get(self, request: Request, org_id: str, webhook_id: str) -> Response:
        query = query_parse(PageQuerySerializer, request)
        webhook = selectors.webhook_get(
            organization=self.scope.organization, webhook_id=uuid.UUID(webhook_id)
        )
        page = selectors.delivery_list(
            webhook=webhook, cursor=query["cursor"], limit=query["limit"]
        )
        return Response(DeliveryListSerializer(page).data)


class DeliveryRedeliverView(OrgScopedView):
    @schemas.delivery_redeliver_schema
    def post(self, request: Request, org_id: str, webhook_id: str, delivery_id: str) -> Response:
        webhook = selectors.webhook_get(
            organization=self.scope.organization, webhook_id=uuid.UUID(webhook_id)
        )
        delivery = selectors.delivery_get(webhook=webhook, delivery_id=uuid.UUID(delivery_id))
        return Response(
            DeliverySerializer(services.delivery_redeliver(delivery=delivery)).data, status=202
        )
