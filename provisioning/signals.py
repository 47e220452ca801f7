"""What provisioning tells the apps that care, without knowing them.

`onboarding_ended` is sent once per onboarding, inside the transaction in which its last item
ended (or in which it was accepted, when every item was refused at once), with `onboarding` and
`summary` (`selectors.OnboardingSummary`: its document without items, COMPLETED or CANCELLED,
which `provisioning.serializers` renders for the API and the event alike): the webhooks app
turns it into the `onboarding.completed` or `onboarding.cancelled` event in that same
transaction (the outbox).
"""

from __future__ import annotations

from django.dispatch import Signal

onboarding_ended = Signal()

# A credential's hold began (SPEC §13.2), once per hold: `organization_id` (the org whose call
# was refused), `source` (`org` or `service`), `refused_at`. The webhooks app sends
# `credential.refused`.
credential_refused = Signal()
