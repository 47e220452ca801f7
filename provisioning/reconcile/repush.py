"""A project made again gets its market's stored prompts back (SPEC §13.1), in batches through
the v3 tagged route, leaving Semrush's tags as the record says, never stacked.

Semrush dedupes a prompt by its text but still attaches the tags it is given to the prompt it
holds (`is_new: false`; Adobe saw categories stack on re-imports). So tags are only ever sent
for a prompt Semrush does not hold:

- `fresh` (the repair created the project, or nothing else can have put prompts in it): one
  call per batch, each prompt with its tags;
- otherwise (a project adopted on the slice, or a re-run after a lost worker): each batch is
  pushed without tags first, then the prompts Semrush answered `is_new: true` that have tags
  are pushed again with them (attached to a prompt that has none: exactly the record's). A
  prompt Semrush held keeps the tags it has.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence

from provisioning.semrush import SemrushClient, SemrushError
from serenity.models import Prompt

logger = logging.getLogger("serenity.reconcile")

BATCH_SIZE = 100


def prompts_repush(
    *,
    client: SemrushClient,
    market_id: uuid.UUID,
    workspace_id: str,
    project_id: str,
    fresh: bool,
) -> bool:
    """Push the market's stored prompts to `project_id` (module docstring); their upstream
    ids are recorded. Whether any prompt was pushed. A failed push is logged and ends the
    re-push (the prompts stay stored; a later reconciliation finds nothing to mend, and the
    prompts route pushes them again): it never raises a Semrush error."""
    prompts = list(Prompt.objects.filter(market_id=market_id).order_by("created_at", "id"))
    pushed = False
    for start in range(0, len(prompts), BATCH_SIZE):
        batch = prompts[start : start + BATCH_SIZE]
        try:
            _batch_push(client, workspace_id, project_id, batch, fresh=fresh)
        except SemrushError as exc:
            logger.warning(
                "re-pushing a repaired market's prompts failed",
                extra={"market_id": str(market_id), "error_class": type(exc).__name__},
            )
            return pushed
        pushed = True
    return pushed


def _batch_push(
    client: SemrushClient,
    workspace_id: str,
    project_id: str,
    batch: Sequence[Prompt],
    *,
    fresh: bool,
) -> None:
    first = client.add_prompts(
        workspace_id=workspace_id,
        project_id=project_id,
        prompts=[{"name": p.text, "tags": list(p.tags or []) if fresh else []} for p in batch],
        owned=True,
    )
    _ids_record(batch, first)
    if fresh:
        return
    new = {str(item.get("name")) for item in first if item.get("is_new")}
    tagged = [p for p in batch if p.text in new and p.tags]
    if tagged:
        client.add_prompts(
            workspace_id=workspace_id,
            project_id=project_id,
            prompts=[{"name": p.text, "tags": list(p.tags)} for p in tagged],
            owned=True,
        )


def _ids_record(batch: Sequence[Prompt], answer: list[dict]) -> None:
    by_name = {str(item.get("name")): item.get("id") for item in answer if item.get("id")}
    for prompt in batch:
        upstream_id = by_name.get(prompt.text)
        if upstream_id is not None and upstream_id != prompt.semrush_prompt_id:
            Prompt.objects.filter(pk=prompt.pk).update(semrush_prompt_id=str(upstream_id))
