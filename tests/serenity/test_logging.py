"""`kernel.logging.JsonFormatter`: one JSON object per line."""

from __future__ import annotations

import json
import logging
import sys
import uuid
from datetime import UTC, datetime

from kernel.logging import JsonFormatter


def _record(msg: str, *args: object, exc_info: object = None, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("serenity.test", logging.INFO, __file__, 1, msg, args, exc_info)  # type: ignore[arg-type]
    for key, value in extra.items():
        setattr(record, key, value)
    return record


def test_a_line_carries_the_message_and_the_extra_fields_as_json():
    # given
    job_id = uuid.UUID("00000000-0000-4000-8000-000000000001")
    record = _record(
        "semrush %s status=%s", "listFamily", 200, job_id=job_id, duration_ms=12, ok=True
    )
    record.created = datetime(2026, 12, 3, 5, 0, tzinfo=UTC).timestamp()
    # when
    line = JsonFormatter().format(record)
    # then
    assert "\n" not in line
    assert json.loads(line) == {
        "ts": "2026-12-03T05:00:00+00:00",
        "level": "INFO",
        "logger": "serenity.test",
        "message": "semrush listFamily status=200",
        "job_id": str(job_id),
        "duration_ms": 12,
        "ok": True,
    }


def test_values_json_cannot_hold_are_written_as_their_text():
    # given: an object with no JSON form, and an int beyond 64 bits (which orjson refuses)
    class Opaque:
        def __str__(self) -> str:
            return "opaque!"

    record = _record("m", thing=Opaque(), huge=2**70)
    # when
    payload = json.loads(JsonFormatter().format(record))
    # then
    assert payload["thing"] == "opaque!"
    assert payload["huge"] == 2**70


def test_an_exception_is_written_with_its_traceback():
    # given
    try:
        raise ValueError("boom")
    except ValueError:
        record = _record("failed", exc_info=sys.exc_info())
    # when
    payload = json.loads(JsonFormatter().format(record))
    # then
    assert payload["message"] == "failed"
    assert payload["exc"].startswith("Traceback (most recent call last):")
    assert payload["exc"].endswith("ValueError: boom")
