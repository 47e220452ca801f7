"""Onboardings as spreadsheets (SPEC §13.2): a CSV body read into the onboarding's brands, and
an onboarding's items written out as CSV.

In: a header row naming the columns (`name`, `baseUrl` required; `aliases`, `markets`
optional; in any order), then one brand per row: `aliases` `;`-separated, `markets` as
`US:en;DE:de`. Each row is validated by the JSON body's own serializer and market parsing, so
the limits are the same; a bad cell is a 400 naming it as `rows[N].column`, the first data row
being 1, before anything is written. The org's cap of open items is checked before the rows
(a CSV of 5,001 rows is the cap's 429 at once, not after validating five thousand rows).

Out: `name,baseUrl,markets,status,brandId,errorCode,errorMessage`, one row per item, the
markets written as they are read, an absent value an empty cell.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from typing import Any

from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request

from api.onboarding_serializers import MAX_BRANDS, OnboardingBrandSerializer, brands_input
from api.parsers import CsvTable
from kernel.errors import DomainError, InvalidRequestError
from provisioning import selectors
from provisioning.flows.onboarding import OnboardingBrand, open_items_check
from provisioning.models import OnboardingItem
from serenity.models import Organization

COLUMNS = ("name", "baseUrl", "aliases", "markets")
REQUIRED = ("name", "baseUrl")
OUT_COLUMNS = ("name", "baseUrl", "markets", "status", "brandId", "errorCode", "errorMessage")
CSV_MEDIA_TYPE = "text/csv"


def csv_table(request: Request) -> CsvTable | None:
    """The request's CSV body, or None when it is not CSV. An empty `text/csv` body is the
    parser's "no header row" too: DRF parses no empty body (it would reach the JSON checks as
    `{}` and be refused as a JSON body missing `brands`)."""
    if isinstance(request.data, CsvTable):
        return request.data
    if request.content_type.split(";", 1)[0].strip().lower() == CSV_MEDIA_TYPE:
        raise InvalidRequestError("The CSV body has no header row.", field="header")
    return None


def csv_brands(table: CsvTable, *, organization: Organization) -> list[OnboardingBrand]:
    """The onboarding's brands from a CSV body. Raises `InvalidRequestError` naming the bad
    header or cell (`rows[N].column`), the org's cap's `OnboardingLimitError`, and the
    markets' own refusals (`unknownMarket`, `unknownLanguage`) named as their cell."""
    columns = _columns(table.header)
    records = [(n, row) for n, row in enumerate(table.rows, start=1) if any(c.strip() for c in row)]
    if not records:
        raise InvalidRequestError("rows: the CSV body has no data row.", field="rows")
    open_items_check(organization=organization, adding=len(records))
    if len(records) > MAX_BRANDS:
        raise InvalidRequestError(
            f"rows: at most {MAX_BRANDS} rows per onboarding; this one has {len(records)}.",
            field="rows",
        )
    return [
        _brand(n, dict(zip(columns, _cells(n, row, columns), strict=True))) for n, row in records
    ]


def _columns(header: list[str]) -> list[str]:
    for name in header:
        if name not in COLUMNS:
            raise InvalidRequestError(
                f"header: {name!r} is not a column (known: {', '.join(COLUMNS)}).",
                field="header",
            )
    if len(set(header)) != len(header):
        raise InvalidRequestError("header: a column is named twice.", field="header")
    missing = [name for name in REQUIRED if name not in header]
    if missing:
        raise InvalidRequestError(f"header: the column {missing[0]!r} is missing.", field="header")
    return header


def _cells(n: int, row: list[str], columns: list[str]) -> list[str]:
    """The row's cells, one per column: a short row is padded with empty cells; a long one is
    refused unless what it has beyond the header is empty (a trailing separator)."""
    if len(row) > len(columns) and any(cell.strip() for cell in row[len(columns) :]):
        raise InvalidRequestError(
            f"rows[{n}]: {len(row)} cells, but the header names {len(columns)} columns.",
            field=f"rows[{n}]",
        )
    return (row + [""] * len(columns))[: len(columns)]


def _brand(n: int, cells: dict[str, str]) -> OnboardingBrand:
    """One row validated as a JSON item is (its serializer, then its markets' slices)."""
    item: dict[str, Any] = {"name": cells["name"]}
    if cells["baseUrl"].strip():
        item["baseUrl"] = cells["baseUrl"].strip()
    aliases = _split(cells.get("aliases", ""))
    if aliases:
        item["aliases"] = aliases
    item["markets"] = [_market(n, pair) for pair in _split(cells.get("markets", ""))]
    serializer = OnboardingBrandSerializer(data=item)
    try:
        valid = serializer.is_valid()
    except DomainError as error:  # a market's own refusal (unknownMarket, unknownLanguage)
        raise _named(error, n, "markets") from None
    if not valid:
        column, message = _first_error(serializer.errors)
        raise InvalidRequestError(f"rows[{n}].{column}: {message}", field=f"rows[{n}].{column}")
    try:
        [brand] = brands_input([dict(serializer.validated_data)])
    except DomainError as error:
        raise _named(error, n, "markets") from None
    return brand


def _split(cell: str) -> list[str]:
    return [part.strip() for part in cell.split(";") if part.strip()]


def _market(n: int, pair: str) -> dict[str, str]:
    market, colon, language = pair.partition(":")
    if not colon or not market.strip() or not language.strip():
        raise InvalidRequestError(
            f"rows[{n}].markets: {pair!r} is not MARKET:LANGUAGE (e.g. US:en).",
            field=f"rows[{n}].markets",
        )
    return {"market": market.strip(), "languageCode": language.strip()}


def _first_error(errors: Any) -> tuple[str, str]:
    """The first offending column of a row's errors and its first message."""
    column, detail = next(iter(errors.items()))
    while isinstance(detail, dict | list):
        detail = next(iter(detail.values() if isinstance(detail, dict) else detail), "")
    return column, str(detail)


def _named(error: DomainError, n: int, column: str) -> DomainError:
    """A refusal raised for a cell's content, named as that cell."""
    message = error.message.split(": ", 1)[-1] if error.message else ""
    error.message = f"rows[{n}].{column}: {message}"
    error.details = {**(error.details or {}), "field": f"rows[{n}].{column}"}
    return error


# --- Out ----------------------------------------------------------------------------------------


class CsvRenderer(BaseRenderer):
    """Lets `Accept: text/csv` through content negotiation; the route streams the CSV itself
    (`items_csv`), and answers its errors as JSON."""

    media_type = CSV_MEDIA_TYPE
    format = "csv"
    charset = "utf-8"

    def render(
        self, data: Any, accepted_media_type: Any = None, renderer_context: Any = None
    ) -> Any:
        raise NotImplementedError("the CSV routes stream their answer")


def items_csv(items: Iterable[OnboardingItem]) -> Iterator[str]:
    """The header, then one line per item (`provisioning.selectors.onboarding_items_all`)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")

    def line(cells: Iterable[Any]) -> str:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow(["" if cell is None else cell for cell in cells])
        return buffer.getvalue()

    yield line(OUT_COLUMNS)
    for item in items:
        document = selectors.onboarding_item_document(item)
        asked = selectors.onboarding_item_input(item)
        error = document.error or {}
        yield line(
            (
                document.name,
                asked.get("baseUrl"),
                ";".join(f"{m['market']}:{m['languageCode']}" for m in asked.get("markets") or []),
                document.status,
                document.brand_id,
                error.get("code"),
                error.get("message"),
            )
        )
