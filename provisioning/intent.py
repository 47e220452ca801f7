"""Deterministic search-intent rules for prompts (SPEC §4.5): `classify_intent`.

Keyword rules, checked in this order; the first that matches wins:

1. transactional: the searcher wants to act now (buy, price, order, coupon, deal, ...)
2. commercial: the searcher is comparing before acting (best, top, vs, review, compare, ...)
3. navigational: the searcher wants one site or brand (a brand name or alias, the brand's
   domain, login, official site, website, ...)
4. informational: everything else.

Matching is on whole words of the case-folded text (punctuation separates words, so "vs." is
"vs"); phrases match as consecutive words. Idioms that only look like a keyword ("in order to")
are removed first. The lists are English: prompts in other languages mostly fall through to
informational unless they name the brand. Pure: no database, no upstream call.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from serenity.models import PromptIntent


def _terms(listing: str) -> frozenset[str]:
    return frozenset(term.strip() for term in listing.split(",") if term.strip())


TRANSACTIONAL_TERMS = _terms(
    "buy, buying, purchase, order, ordering, price, prices, pricing, cost, costs, cheap,"
    " cheapest, discount, discounts, coupon, coupons, deal, deals, promo, promo code, sale,"
    " for sale, subscribe, subscription, free trial, checkout, shipping, rent, hire, near me"
)
COMMERCIAL_TERMS = _terms(
    "best, top, vs, versus, review, reviews, compare, comparison, comparisons, alternative,"
    " alternatives, rating, ratings, ranked, recommended, better than, pros and cons"
)
NAVIGATIONAL_TERMS = _terms(
    "login, log in, signin, sign in, sign up, signup, official site, official website,"
    " website, homepage, home page, customer service"
)

NEUTRAL_PHRASES = _terms("in order to, in order for")

_WORD = re.compile(r"\w+")


def _words(text: str) -> str:
    """The text's words, case-folded, space-separated and padded: ' best running shoes '."""
    return " " + " ".join(_WORD.findall(text.casefold())) + " "


def _mentions(words: str, terms: Iterable[str]) -> bool:
    for term in terms:
        phrase = _words(term)
        if phrase.strip() and phrase in words:
            return True
    return False


def classify_intent(text: str, brand_names: Iterable[str]) -> str:
    """The prompt's search intent by the rules of this module: `transactional`, `commercial`,
    `navigational` or `informational`. Pure and deterministic; `brand_names` are names,
    aliases or domains of the brand (blank entries are ignored)."""
    words = _words(text)
    for phrase in NEUTRAL_PHRASES:
        words = words.replace(_words(phrase), " ")
    if _mentions(words, TRANSACTIONAL_TERMS):
        return PromptIntent.TRANSACTIONAL.value
    if _mentions(words, COMMERCIAL_TERMS):
        return PromptIntent.COMMERCIAL.value
    if _mentions(words, NAVIGATIONAL_TERMS) or _mentions(words, brand_names):
        return PromptIntent.NAVIGATIONAL.value
    return PromptIntent.INFORMATIONAL.value
