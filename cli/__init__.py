"""The `serenity` command (SPEC §13.6): a client of the API over HTTP with a token, like any
other; it imports nothing of the server (import-linter holds it to that)."""
