"""The one JSON parser of every route (SPEC §10.2: bad input never answers 500), and the CSV
parser of the routes that take spreadsheets (SPEC §13.2)."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from itertools import chain
from typing import IO, Any

from rest_framework.parsers import BaseParser, JSONParser

from kernel.errors import InvalidRequestError

MAX_JSON_DEPTH = 64


def json_depth_exceeds(value: Any, limit: int) -> bool:
    """Whether `value` nests arrays/objects deeper than `limit` levels. Level by level, without
    recursion (a deep value must not exhaust the interpreter's stack here either) and without
    per-node Python frames: a 1 MiB list of tiny objects costs a few hundred milliseconds at
    most (SPEC §12.4), not seconds."""
    level = [value]
    for depth in range(1, limit + 2):
        containers = [item for item in level if isinstance(item, dict | list)]
        if not containers:
            return False
        if depth > limit:
            return True
        level = list(
            chain.from_iterable(
                item.values() if isinstance(item, dict) else item for item in containers
            )
        )
    return True


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser with a bound on nesting: deeper than `MAX_JSON_DEPTH` levels is a 400
    `invalidRequest` (a deeply nested body would otherwise exhaust the decoder's or a
    validator's recursion and answer 500)."""

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise _too_deep() from None
        if json_depth_exceeds(data, MAX_JSON_DEPTH):
            raise _too_deep()
        return data


def _too_deep() -> InvalidRequestError:
    return InvalidRequestError(f"The body nests JSON deeper than {MAX_JSON_DEPTH} levels.")


class CsvTable(dict[str, Any]):
    """A CSV body as `OnboardingCsvParser` read it: `{"header": [...], "rows": [[...], ...]}`
    (every cell a string), a dict so that the checks every body passes (an object) and the
    Idempotency-Key's digest apply to it as to JSON."""

    @property
    def header(self) -> list[str]:
        return list(self["header"])

    @property
    def rows(self) -> list[list[str]]:
        return list(self["rows"])


class CsvParser(BaseParser):
    """`text/csv` bodies (SPEC §13.2), read with Python's `csv` module: UTF-8 with or without a
    byte order mark, a header row, then the data rows. A body that is not UTF-8 or not CSV →
    400 `invalidRequest`; what the cells mean is the route's to check (`api.onboarding_csv`)."""

    media_type = "text/csv"

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> CsvTable:
        raw = stream.read() if stream is not None else b""
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise InvalidRequestError("The CSV body is not UTF-8.") from None
        try:
            records = list(csv.reader(io.StringIO(text, newline="")))
        except csv.Error as exc:
            raise InvalidRequestError(f"The CSV body cannot be read: {exc}.") from None
        if not records:
            raise InvalidRequestError("The CSV body has no header row.", field="header")
        return CsvTable(header=[cell.strip() for cell in records[0]], rows=records[1:])
