"""One module per operation: its flow, and the chain's steps it runs on workers (async) or inline
in the request (sync, SPEC §12.3)."""
