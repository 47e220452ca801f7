"""What a reconciliation tells the rest of the house (webhooks subscribe; provisioning does not
know them): `drift_detected` once per brand whose drift a plan found new kinds of, and
`drift_repaired` once per brand a repair mended (both with the kinds), each sent inside the
transaction that records it."""

from __future__ import annotations

from django.dispatch import Signal

# sender=Drift; organization_id, brand_id, kinds (list[str]), reconciliation_id
drift_detected = Signal()
drift_repaired = Signal()
