"""Webhook endpoints, their deliveries and attempts (SPEC §11.3, §12.2). Each answer is
rendered by the output serializer that the OpenAPI document describes
(`api.schemas.webhooks`)."""

from __future__ import annotations

import uuid
from typing import Any

from rest_framework.request import Request
from rest_framework.response import Response

from api.base import OrgScopedView
from api.pagination import PageQuerySerializer
from api.schemas import webhooks as schemas
from api.webhook_serializers import (
    AttemptListSerializer,
    DeliveryListQuerySerializer,
    DeliveryListSerializer,
    DeliverySerializer,
    WebhookCreatedSerializer,
    WebhookCreateSerializer,
    WebhookListSerializer,
    WebhookSerializer,
    WebhookUpdateSerializer,
)
from webhooks import selectors, services
from webhooks.models import Webhook


class WebhookView(OrgScopedView):
    def webhook(self, webhook_id: str) -> Webhook:
        return selectors.webhook_get(
            organization=self.scope.organization, webhook_id=uuid.UUID(webhook_id)
        )


class SecretAnswerView(WebhookView):
    """A POST whose answer shows the endpoint's secret: an idempotent replay re-reads it from
    the encrypted column (the idempotency record holds no secret); an endpoint deleted since
    answers 404 `webhookNotFound`."""

    idempotency_withheld = ("secret",)

    def idempotency_withheld_fill(self, body: dict[str, Any]) -> dict[str, Any]:
        webhook = self.webhook(str(body["id"]))
        return {**body, "secret": webhook.secret()}


class WebhookCollectionView(SecretAnswerView):
    query_serializers = {"GET": PageQuerySerializer}

    @schemas.webhook_list_schema
    def get(self, request: Request, org_id: str) -> Response:
        query = self.query_parse(request)
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
            description=body.validated_data.get("description", ""),
        )
        return Response(WebhookCreatedSerializer(created).data, status=201)


class WebhookDetailView(WebhookView):
    @schemas.webhook_get_schema
    def get(self, request: Request, org_id: str, webhook_id: str) -> Response:
        return Response(WebhookSerializer(self.webhook(webhook_id)).data)

    @schemas.webhook_update_schema
    def patch(self, request: Request, org_id: str, webhook_id: str) -> Response:
        body = WebhookUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        webhook = services.webhook_update(
            webhook=self.webhook(webhook_id), changes=dict(body.validated_data)
        )
        return Response(WebhookSerializer(webhook).data)

    @schemas.webhook_delete_schema
    def delete(self, request: Request, org_id: str, webhook_id: str) -> Response:
        services.webhook_delete(
            organization=self.scope.organization, webhook_id=uuid.UUID(webhook_id)
        )
        return Response(status=204)


class WebhookRotateSecretView(SecretAnswerView):
    @schemas.webhook_rotate_secret_schema
    def post(self, request: Request, org_id: str, webhook_id: str) -> Response:
        rotated = services.webhook_secret_rotate(webhook=self.webhook(webhook_id))
        return Response(WebhookCreatedSerializer(rotated).data)


class WebhookTestView(WebhookView):
    @schemas.webhook_test_schema
    def post(self, request: Request, org_id: str, webhook_id: str) -> Response:
        delivery = services.webhook_test_send(webhook=self.webhook(webhook_id))
        return Response(DeliverySerializer(delivery).data, status=202)


class DeliveryCollectionView(WebhookView):
    query_serializers = {"GET": DeliveryListQuerySerializer}

    @schemas.delivery_list_schema
    def get(self, request: Request, org_id: str, webhook_id: str) -> Response:
        query = self.query_parse(request)
        page = selectors.delivery_list(
            webhook=self.webhook(webhook_id),
            status=query.get("status"),
            cursor=query["cursor"],
            limit=query["limit"],
        )
        return Response(DeliveryListSerializer(page).data)


class DeliveryRedeliverView(WebhookView):
    @schemas.delivery_redeliver_schema
    def post(self, request: Request, org_id: str, webhook_id: str, delivery_id: str) -> Response:
        webhook = self.webhook(webhook_id)
        delivery = selectors.delivery_get(webhook=webhook, delivery_id=uuid.UUID(delivery_id))
        return Response(
            DeliverySerializer(services.delivery_redeliver(delivery=delivery)).data, status=202
        )


class AttemptCollectionView(WebhookView):
    query_serializers = {"GET": PageQuerySerializer}

    @schemas.attempt_list_schema
    def get(self, request: Request, org_id: str, webhook_id: str, delivery_id: str) -> Response:
        query = self.query_parse(request)
        delivery = selectors.delivery_get(
            webhook=self.webhook(webhook_id), delivery_id=uuid.UUID(delivery_id)
        )
        page = selectors.attempt_list(
            delivery=delivery, cursor=query["cursor"], limit=query["limit"]
        )
        return Response(AttemptListSerializer(page).data)
