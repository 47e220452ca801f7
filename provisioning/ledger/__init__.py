"""The ledger of upstream writes (SPEC §13.4): who did what in Semrush, when, in which job.

Every attempt of a Semrush call that creates, changes or deletes, and of the reads that confirm
one (a workspace's status, a project's publish state), is one :class:`.models.UpstreamCall`
row, written by :class:`.recorder.LedgerRecorder`, the recorder the Semrush client's one send
path hands each attempt to (``provisioning.semrush.calls``). Read by
:func:`.selectors.upstream_call_list` (``GET S/upstream-calls``, the admin) and purged by
:func:`.retention.upstream_calls_purge` after ``SERENITY_LEDGER_RETENTION_DAYS``.
"""
