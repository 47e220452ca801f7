"""Drift (SPEC §13.1): reconciliations compare the service's record with Semrush's listings
(`plan`), show the difference (`models.Drift`, the reconciliation's items) and repair it with
`repairBrand` chains of the existing steps (`repair`)."""
