"""The OpenAPI 3 description of the HTTP API (SPEC §4), for drf-spectacular.

`operations`, `onboardings` and `webhooks` hold one `*_schema` decorator per operation, which
the views apply, naming the output serializers the views render with; `parts` their shared
pieces; `extensions` how drf-spectacular documents our own field and authentication classes;
`hooks` the functions the settings name (`api.schemas.postprocess_schema`,
`api.schemas.doc_excludes`). This package exposes the names the views and the settings
use.
"""

from api.schemas import extensions  # noqa: F401  (registers the extensions)
from api.schemas.hooks import doc_excludes, postprocess_schema
from api.schemas.onboardings import (
    onboarding_cancel_schema,
    onboarding_create_schema,
    onboarding_get_schema,
    onboarding_list_schema,
)
from api.schemas.operations import (
    activate_schema,
    brand_create_schema,
    brand_get_schema,
    brand_list_schema,
    brand_update_schema,
    deactivate_schema,
    job_cancel_schema,
    job_get_schema,
    job_list_schema,
    language_list_schema,
    market_create_schema,
    market_delete_schema,
    market_get_schema,
    market_list_schema,
    org_job_get_schema,
    org_job_list_schema,
    prompts_create_schema,
)

__all__ = [
    "activate_schema",
    "brand_create_schema",
    "brand_get_schema",
    "brand_list_schema",
    "brand_update_schema",
    "deactivate_schema",
    "doc_excludes",
    "job_cancel_schema",
    "job_get_schema",
    "job_list_schema",
    "language_list_schema",
    "market_create_schema",
    "market_delete_schema",
    "market_get_schema",
    "market_list_schema",
    "onboarding_cancel_schema",
    "onboarding_create_schema",
    "onboarding_get_schema",
    "onboarding_list_schema",
    "org_job_get_schema",
    "org_job_list_schema",
    "postprocess_schema",
    "prompts_create_schema",
]
