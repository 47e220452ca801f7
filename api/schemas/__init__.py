"""The OpenAPI 3 description of the HTTP API (SPEC §4), for drf-spectacular: each operation is
read from its handler's declaration (api.routes) by `routes.RouteSchema`; `extensions` says how
our own field and authentication classes are documented; `hooks` holds the functions the
settings name (`api.schemas.postprocess_schema`, `api.schemas.doc_excludes`)."""

from api.schemas import extensions  # noqa: F401  (registers the extensions)
from api.schemas.hooks import doc_excludes, postprocess_schema

__all__ = ["doc_excludes", "postprocess_schema"]
