"""Request fields stricter than DRF's defaults (SPEC §4: booleans are JSON true/false only).

Each field class carries the rule it checks as the OpenAPI document states it (`openapi`: its
pattern and description, added to the field's schema by api.schemas.extensions), so that a
serializer field is declared once and what the document promises is what the field accepts."""

from __future__ import annotations

import re
from typing import Any, ClassVar
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import OpenApiParameter, extend_schema_field
from rest_framework import serializers
from rest_framework.fields import get_error_detail

from serenity.names import REFUSED_NAME_CHARACTERS, brand_name_refusal
from serenity.slices import LANGUAGE_CODE_PATTERN, market_pattern


class StrictBooleanField(serializers.Field):
    default_error_messages = {"invalid": "must be a JSON boolean (true or false)."}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data

    def to_representation(self, value: Any) -> bool:
        return bool(value)


@extend_schema_field(
    {
        "type": "boolean",
        "deprecated": True,
        "description": "Deprecated: accepted (a JSON boolean) and ignored until the next major "
        "version; the answer then carries a `Deprecation` header.",
    }
)
class DeprecatedBooleanField(StrictBooleanField):
    """A member a previous release accepted and this one dropped (SPEC §13.6: the onboarding
    create's `async`): still accepted (a JSON boolean), then ignored, until the next major
    version; the answer carries a `Deprecation` header (`OrgScopedView.body`). The OpenAPI
    document marks it `deprecated` (api.schemas.extensions)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(required=False, **kwargs)


# RFC 9745's `Deprecation` header: when the deprecated members were dropped (release 2.3.0).
DEPRECATED_SINCE = "@1796428800"  # 2026-12-05T00:00:00Z
DEPRECATION = OpenApiParameter(
    "Deprecation",
    {"type": "string", "pattern": "^@-?[0-9]+$"},
    OpenApiParameter.HEADER,
    response=True,
    description="Sent when the body held a deprecated member (RFC 9745: `@` and when it was "
    "deprecated, in seconds since 1970); the member was ignored.",
)


class StrictCharField(serializers.CharField):
    """A string, never a number coerced to one (trimmed, not blank and without NUL unless
    `allow_blank`, as DRF's `CharField`)."""

    openapi: ClassVar[dict[str, Any]] = {}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class BrandNameField(StrictCharField):
    """A brand's name, one of its aliases or one of a market's brand names: trimmed, and a name
    `serenity.names.brand_name_refusal` accepts (the admin applies the same rule through the
    model's validators)."""

    # Not blank, no control, bidirectional-override or invisible character inside (leading and
    # trailing whitespace is trimmed first).
    openapi: ClassVar[dict[str, Any]] = {
        "pattern": f"^\\s*[^{REFUSED_NAME_CHARACTERS}]*[^\\s{REFUSED_NAME_CHARACTERS}]"
        f"[^{REFUSED_NAME_CHARACTERS}]*\\s*$"
    }

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        refusal = brand_name_refusal(value)
        if refusal is not None:
            raise serializers.ValidationError(refusal)
        return value


# An absolute http(s) URL in RFC 3986 syntax: the scheme (any case), `://`, a host of reg-name
# characters (an internationalised name in its punycode form), an optional port, then an
# optional path, query and fragment of RFC 3986 characters (anything else percent-encoded). The
# OpenAPI document states this pattern (`HttpUrlField.openapi`), so what it promises is
# what `HttpUrlField` accepts, and what is stored is a `format: uri` the answers can show.
_URL_CHAR = "-A-Za-z0-9._~!$&'()*+,;="  # RFC 3986 unreserved and sub-delims
_PCT = "%[0-9A-Fa-f]{2}"
_PCHAR = f"(?:[{_URL_CHAR}:@]|{_PCT})"
HTTP_URL_PATTERN = (
    f"^[Hh][Tt][Tt][Pp][Ss]?://(?:[{_URL_CHAR}]|{_PCT})+(?::[0-9]*)?"
    f"(?:/{_PCHAR}*)*(?:\\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?$"
)
_HTTP_URL = re.compile(HTTP_URL_PATTERN)


class HttpUrlField(StrictCharField):
    default_error_messages = {"invalid": "must be an absolute http(s) URL."}
    openapi: ClassVar[dict[str, Any]] = {"pattern": HTTP_URL_PATTERN}

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if not _HTTP_URL.fullmatch(value):
            self.fail("invalid")
        try:
            parts = urlsplit(value)
        except ValueError:  # e.g. an unbalanced `[` of an IPv6 host
            self.fail("invalid")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            self.fail("invalid")
        return value


# A host name of DNS labels, any case (it is lower-cased), at most 253 characters. The OpenAPI
# document states the pattern (with `maxLength`).
_LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
HOST_PATTERN = f"^{_LABEL}(?:\\.{_LABEL})*$"
HOST_MAX_LENGTH = 253


class HostField(StrictCharField):
    """A bare host name (`acme.example`), lower-cased: no scheme, path, port or spaces. Semrush
    rejects anything else as a project domain, so it is a 400 here, not a 502 there."""

    default_error_messages = {"invalid": "must be a bare host name such as acme.example."}
    openapi: ClassVar[dict[str, Any]] = {"pattern": HOST_PATTERN}
    _HOST = re.compile(HOST_PATTERN)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data).lower()
        if len(value) > HOST_MAX_LENGTH or not self._HOST.fullmatch(value):
            self.fail("invalid")
        return value


class BoundedListField(serializers.ListField):
    """A list with a required `max_length`, refused as soon as it is longer, before any member
    is validated (SPEC §12.4: a 1 MiB body of tiny items answers its 400 at once, not after
    validating a few hundred thousand members). `too_long` words the refusal (`{max_length}`
    is filled in); DRF's own wording otherwise."""

    def __init__(self, *, max_length: int, too_long: str | None = None, **kwargs: Any) -> None:
        if too_long is not None:
            kwargs["error_messages"] = {**kwargs.get("error_messages", {}), "max_length": too_long}
        super().__init__(max_length=max_length, **kwargs)

    def to_internal_value(self, data: Any) -> list[Any]:
        if isinstance(data, list) and len(data) > self.max_length:  # type: ignore[operator]
            self.fail("max_length", max_length=self.max_length)
        return super().to_internal_value(data)

    def run_child_validation(self, data: list[Any]) -> list[Any]:
        """DRF's, stopping once the body has met `MAX_BODY_ERRORS` refused members in all (its
        lists nested in lists included): a body inside every list limit but invalid in every
        member costs a hundred members' validation, not a million's (SPEC §13.6). The answer
        names the first anyway (api.errors)."""
        result: list[Any] = []
        errors: dict[int, Any] = {}
        for index, item in enumerate(data):
            try:
                result.append(self.child.run_validation(item))
            except serializers.ValidationError as error:
                errors[index] = error.detail
            except DjangoValidationError as error:
                errors[index] = get_error_detail(error)
            else:
                continue
            if _errors_spent(self.root) >= MAX_BODY_ERRORS:
                break
        if errors:
            raise serializers.ValidationError(errors)  # type: ignore[arg-type]  # as DRF's own
        return result


# A body's validation stops after this many refused list members (BoundedListField).
MAX_BODY_ERRORS = 100


def _errors_spent(root: serializers.Field) -> int:
    """One more refused member of the body `root` validates; how many so far."""
    spent: int = getattr(root, "_refused_members", 0) + 1
    root._refused_members = spent  # type: ignore[attr-defined]
    return spent


# A webhook's URL: `https://` (`http://` is accepted only where private addresses are allowed,
# for development, which the document does not describe), and its port, when given, a TCP port
# (webhooks.addresses.target_parse connects to it).
_TCP_PORT = (
    "(?::(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4})?)?"
)
HTTPS_URL_PATTERN = HTTP_URL_PATTERN.replace("[Ss]?://", "[Ss]://", 1).replace(
    "(?::[0-9]*)?", _TCP_PORT, 1
)


class WebhookUrlField(HttpUrlField):
    openapi: ClassVar[dict[str, Any]] = {"pattern": HTTPS_URL_PATTERN}


class MarketField(StrictCharField):
    """A market's country; checked with its language by `serenity.slices.slice_parse`
    (400 `unknownMarket`)."""

    openapi: ClassVar[dict[str, Any]] = {
        "pattern": market_pattern(),
        "description": "An ISO 3166-1 alpha-2 country code with an ISO numeric code, any "
        "case, e.g. `US` or `de`.",
    }


class LanguageCodeField(StrictCharField):
    """A language code (`serenity.slices.normalize_language`: 400 `unknownLanguage`)."""

    openapi: ClassVar[dict[str, Any]] = {"pattern": LANGUAGE_CODE_PATTERN}


class BodyObjectSerializer(serializers.Serializer):
    """The body must be a JSON object (DRF already rejects non-dicts with 'non_field_errors')."""

    async_ = StrictBooleanField(required=False, default=False, source="run_async")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["async"] = self.fields.pop("async_")


# A market in a body (an activation's, an onboarding item's): its slice, checked by
# `serenity.slices.slice_parse`, and an optional project name.
class ActivateMarketSerializer(serializers.Serializer):
    market = MarketField()
    languageCode = LanguageCodeField()  # noqa: N815
    name = StrictCharField(required=False, max_length=200)
