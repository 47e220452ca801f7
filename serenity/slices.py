"""Market slices: ISO country and language codes (SPEC §3). Nothing here is hand-written data:
countries and languages come from pycountry."""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from dataclasses import dataclass

import pycountry

from kernel.errors import InvalidRequestError
from serenity.exceptions import UnknownLanguageError, UnknownMarketError

GEO_TARGET_OFFSET = 2000
_MARKET = re.compile(r"^[A-Za-z]{2}$")
# Any case: a language code is lower-cased (and trimmed) before it is matched. The OpenAPI
# document states this pattern (api/schemas/hooks.py), so the two cannot drift.
LANGUAGE_CODE_PATTERN = "^[A-Za-z]{2,3}(-[A-Za-z]{2,4})?$"
_LANGUAGE = re.compile(LANGUAGE_CODE_PATTERN)


@dataclass(frozen=True)
class Slice:
    country: str  # ISO 3166-1 alpha-2, upper case
    geo_target_id: int
    language_code: str  # lower case, e.g. "en" or "pt-br"

    @property
    def default_name(self) -> str:
        return f"{self.country}-{self.language_code}"

    @property
    def country_name(self) -> str:
        country = pycountry.countries.get(alpha_2=self.country)
        return country.name if country else self.country

    @property
    def base_language(self) -> str:
        return self.language_code.split("-", 1)[0]

    @property
    def language_name(self) -> str | None:
        return language_name(self.language_code)


def geo_target_id_for(country: str, *, field: str = "market") -> tuple[str, int]:
    if not isinstance(country, str) or not _MARKET.match(country):
        raise InvalidRequestError(
            f"{field} must be an ISO 3166-1 alpha-2 country code.", field=field
        )
    found = _country(country.upper())
    if found is None:
        raise UnknownMarketError(
            f"{field}: {country.upper()} is not a known ISO 3166 country.", field=field
        )
    return found


def known_markets() -> list[str]:
    """Every `market` that `geo_target_id_for` accepts, upper case: the ISO 3166-1 countries
    with a numeric code (any case is accepted)."""
    return sorted(c.alpha_2 for c in pycountry.countries if _country(c.alpha_2) is not None)


def market_pattern() -> str:
    """A regular expression that matches exactly the `market` values `geo_target_id_for`
    accepts: a known country's alpha-2 code in any case (`US`, `us`, `Us`), grouped by first
    letter, e.g. `^(?:[Aa][DEFdef]|...)$`. The OpenAPI document states it."""
    seconds: dict[str, list[str]] = defaultdict(list)
    for code in known_markets():
        seconds[code[0]].append(code[1])
    branches = [
        f"[{first}{first.lower()}][{''.join(rest)}{''.join(rest).lower()}]"
        for first, rest in sorted(seconds.items())
    ]
    return f"^(?:{'|'.join(branches)})$"


def load_iso_tables() -> None:
    """Load pycountry's country and language tables now (a server at startup), so that the first
    request or step that names a market does not pay for reading them."""
    pycountry.countries.get(alpha_2="US")
    pycountry.languages.get(alpha_2="en")


# The ISO tables are fixed for the life of the process, and every request and step that names a
# market looks them up: cached.
@functools.lru_cache(maxsize=512)
def _country(alpha_2: str) -> tuple[str, int] | None:
    record = pycountry.countries.get(alpha_2=alpha_2)
    if record is None or not getattr(record, "numeric", None):
        return None
    return record.alpha_2, GEO_TARGET_OFFSET + int(record.numeric)


@functools.lru_cache(maxsize=512)
def country_for_geo_target_id(geo_target_id: int) -> str | None:
    record = pycountry.countries.get(numeric=f"{geo_target_id - GEO_TARGET_OFFSET:03d}")
    return record.alpha_2 if record else None


def normalize_language(value: object, *, field: str = "languageCode") -> str:
    if not isinstance(value, str):
        raise InvalidRequestError(f"{field} must be a string.", field=field)
    code = value.strip().lower()
    if not _LANGUAGE.match(code):
        raise InvalidRequestError(f"{field} must look like 'en' or 'pt-br'.", field=field)
    return code


@functools.lru_cache(maxsize=1024)
def language_name(code: str) -> str | None:
    """The ISO 639 English name of the code's base language ("en" → "English")."""
    base = code.split("-", 1)[0]
    record = (
        pycountry.languages.get(alpha_2=base)
        if len(base) == 2
        else pycountry.languages.get(alpha_3=base)
    )
    return record.name if record else None


def slice_parse(*, market: object, language_code: object, prefix: str = "") -> Slice:
    """Validate a `{market, languageCode}` pair (400 invalidRequest / unknownMarket /
    unknownLanguage), without any upstream call. The upstream catalogue check is separate."""
    if not isinstance(market, str):
        raise InvalidRequestError(f"{prefix}market must be a string.", field=f"{prefix}market")
    country, geo = geo_target_id_for(market, field=f"{prefix}market")
    code = normalize_language(language_code, field=f"{prefix}languageCode")
    if language_name(code) is None:
        raise UnknownLanguageError(
            f"{prefix}languageCode: {code} is not a known language.", field=f"{prefix}languageCode"
        )
    return Slice(country=country, geo_target_id=geo, language_code=code)


def slice_from_ids(*, geo_target_id: int, language_code: str) -> Slice | None:
    country = country_for_geo_target_id(geo_target_id)
    if country is None:
        return None
    return Slice(country=country, geo_target_id=geo_target_id, language_code=language_code)
