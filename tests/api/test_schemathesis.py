"""schemathesis against the live API (SPEC §10.5): the whole service as real processes
(tests/harness.py: simulator, gunicorn, a Celery worker, its own redis-server), the OpenAPI
document it serves, and a bounded run (time and examples) of generated requests, valid and
invalid. No answer may be a server error, and every answer must conform to the document:
status code, content type, headers and body schema.

The org and brand path ids are pinned to a real org and brand of the caller, so the generated
requests reach the handlers and flows instead of stopping at 404; every other parameter, query
and body is generated. Everything talks to 127.0.0.1 only.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import Stack, StackConfig

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]
ST = str(Path(sys.executable).parent / "st")

# Every check schemathesis has. `positive_data_acceptance` (a schema-valid request must not be
# refused) runs as `positive_data_acceptance_with_state` of tests/api/schemathesis_hooks.py: the
# same check, minus the refusals that depend on state (a signed cursor, the brand's markets, the
# upstream catalogue, a reused Idempotency-Key), each matched by operation, status and error
# code there, with its SPEC line. Everything else the document allows must be accepted (SPEC
# §10.3 "constraints equal the validation").
# `negative_data_rejection` (schema-violating data must be refused) stays off by design: the
# service is lenient where SPEC tells it to be (strings are trimmed before their length and
# pattern are checked, SPEC §3/§10.2, so `"US "` is accepted where the document's pattern, which
# describes the canonical form, refuses it). Neither SPEC §10.3 nor §10.5 asks for it.
EXCLUDED_CHECKS = "negative_data_rejection,positive_data_acceptance"
HOOKS = "tests.api.schemathesis_hooks"
# Bounds: the run stops at whichever comes first.
MAX_TIME_SECONDS = int(os.environ.get("SERENITY_SCHEMATHESIS_MAX_TIME", "60"))
# One generating thread: under CPython 3.11 two threads describing hypothesis strategies at once
# (`ast.parse` of their lambdas) can trip the interpreter's shared AST recursion counter and stop
# the run with "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905),
# a failure of the tool, not of the service. The run gets the time two threads had instead.
GENERATING_THREADS = 1
MAX_EXAMPLES = int(os.environ.get("SERENITY_SCHEMATHESIS_MAX_EXAMPLES", "25"))

CONFIG = """\
[parameters]
"path.orgId" = "${ST_ORG_ID}"
"path.brandId" = "${ST_BRAND_ID}"
"""


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    stack = Stack(StackConfig(workers=1, concurrency=2, beat=True), name="schemathesis")
    stack.start()
    try:
        yield stack
    finally:
        stack.stop()


def test_generated_requests_get_no_server_error_and_conform_to_the_schema(stack, tmp_path):
    # given a writer of a Serenity org with one active brand
    org_id, token = stack.create_org_and_token()
    api = stack.client(token, org_id)
    created = api.post(api.brands_path, {"name": "Fuzzed", "baseUrl": "https://fuzzed.example"})
    assert created.status == 201, created.body
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    # when schemathesis runs against the live API
    completed = subprocess.run(
        [
            ST,
            "--config-file",
            str(config),
            "run",
            f"{stack.api_url}/api/schema/",
            "--checks",
            "all",
            "--exclude-checks",
            EXCLUDED_CHECKS,
            "--header",
            f"Authorization: Bearer {token}",
            "--max-examples",
            str(MAX_EXAMPLES),
            "--max-time",
            str(MAX_TIME_SECONDS),
            "--workers",
            str(GENERATING_THREADS),
            "--seed",
            "18",
            "--request-timeout",
            "30",
            "--generation-database",
            "none",
            "--no-color",
            "--output-truncate",
            "false",
        ],
        cwd=str(tmp_path),
        env={
            **os.environ,
            "ST_ORG_ID": org_id,
            "ST_BRAND_ID": created.body["id"],
            "SCHEMATHESIS_HOOKS": HOOKS,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        },
        capture_output=True,
        text=True,
        timeout=MAX_TIME_SECONDS + 240,
        check=False,
    )
    (tmp_path / "st-report.txt").write_text(completed.stdout + completed.stderr)
    print(completed.stdout[-6000:])
    # then no failure of any check
    # (with the API's server errors, tracebacks included: the stack's logs go when it stops)
    server_errors = [
        line for line in (stack.log_dir / "api.log").read_text().splitlines() if '"ERROR"' in line
    ]
    report = "\n".join([completed.stdout[-20000:], completed.stderr[-5000:], *server_errors[-5:]])
    assert completed.returncode == 0, report
    counts = re.search(
        r"(\d+) generated, (\d+) passed(?:, \d+ skipped)?\s*$", completed.stdout, re.MULTILINE
    )
    assert counts is not None, report
    generated, passed = int(counts[1]), int(counts[2])
    assert generated == passed > 0, report
