"""Request fields stricter than DRF's defaults (SPEC §4: booleans are JSON true/false only)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from rest_framework import serializers


class StrictBooleanField(serializers.Field):
    default_error_messages = {"invalid": "must be a JSON boolean (true or false)."}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data

    def to_representation(self, value: Any) -> bool:
        return bool(value)


class StrictCharField(serializers.CharField):
    """A string, never a number coerced to one."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class HttpUrlField(StrictCharField):
    default_error_messages = {"invalid": "must be an absolute http(s) URL."}

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or " " in value:
            self.fail("invalid")
        return value


class HostField(StrictCharField):
    """A bare host name (`acme.example`), lower-cased: no scheme, path, port or spaces. Semrush
    rejects anything else as a project domain, so it is a 400 here, not a 502 there."""

    default_error_messages = {"invalid": "must be a bare host name such as acme.example."}
    _HOST = re.compile(
        r"^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$"
    )

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data).lower()
        if not self._HOST.match(value):
            self.fail("invalid")
        return value


class BodyObjectSerializer(serializers.Serializer):
    """The body must be a JSON object (DRF already rejects non-dicts with 'non_field_errors')."""

    async_ = StrictBooleanField(required=False, default=False, source="run_async")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["async"] = self.fields.pop("async_")
