"""Brand routes: list, create, read, update."""

from __future__ import annotations

from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from provisioning import selectors
from serenity.api.base import OrgScopedView
from serenity.api.payloads import brand_payload
from serenity.models import BrandStatus


class BrandListQuerySerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=BrandStatus.choices, required=False)


class BrandCollectionView(OrgScopedView):
    def get(self, request: Request, org_id: str) -> Response:
        query = BrandListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        brands = selectors.brand_list(
            organization=self.scope.organization, status=query.validated_data.get("status")
        )
        return Response({"brands": [brand_payload(b) for b in brands]})


class BrandDetailView(OrgScopedView):
    def get(self, request: Request, org_id: str, brand_id: str) -> Response:
        assert self.scope.brand is not None
        brand = selectors.brand_get(brand_id=self.scope.brand.id)
        return Response(brand_payload(brand), status=status.HTTP_200_OK)
