"""Benchmarks of the service as real processes (issue 6). Never part of the test suite.

`python -m bench.run all` starts whole stacks with `tests.harness.Stack` (simulator, a fresh
PostgreSQL database, its own Redis, gunicorn, Celery workers and beat), measures, and writes
`docs/benchmarks.md` with its charts. See `bench/run.py`.
"""
