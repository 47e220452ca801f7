"""Unit tests of the deterministic intent rules (`provisioning.intent.classify_intent`)."""

import pytest

from provisioning.flows.prompt_inputs import brand_names_for
from provisioning.intent import classify_intent
from provisioning.prompt_plan import PromptInput, plan_units
from tests.factories import BrandFactory

BRAND = ["Acme", "Acme Co", "acme.example"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # transactional: acting now
        ("buy running shoes", "transactional"),
        ("Running shoes PRICE", "transactional"),
        ("order pizza online", "transactional"),
        ("acme coupon code", "transactional"),
        ("black friday deals on laptops", "transactional"),
        ("laptops for sale", "transactional"),
        ("start a free trial of a CRM", "transactional"),
        # commercial: comparing before acting
        ("best running shoes 2026", "commercial"),
        ("top 10 CRMs", "commercial"),
        ("Acme vs. Globex", "commercial"),
        ("acme review", "commercial"),
        ("compare project management tools", "commercial"),
        ("alternatives to spreadsheets", "commercial"),
        # navigational: one site or brand
        ("acme login", "navigational"),
        ("Sign in to my account", "navigational"),
        ("acme official site", "navigational"),
        ("what is Acme?", "navigational"),
        ("acme co opening hours", "navigational"),
        ("is acme.example down", "navigational"),
        ("the website of the city library", "navigational"),
        # informational: everything else
        ("how do running shoes work", "informational"),
        ("why is the sky blue", "informational"),
        ("stretch in order to run faster", "informational"),
        ("", "informational"),
    ],
)
def test_classify_intent_follows_the_keyword_rules(text, expected):
    assert classify_intent(text, BRAND) == expected


def test_transactional_wins_over_commercial_and_navigational():
    assert classify_intent("best price for acme shoes", BRAND) == "transactional"
    assert classify_intent("buy on the acme website", BRAND) == "transactional"


def test_commercial_wins_over_navigational():
    assert classify_intent("acme website review", BRAND) == "commercial"


def test_words_match_whole_words_only():
    # "topic" is not "top", "buyer" is not "buy", "acmeville" is not "Acme"
    assert classify_intent("topic modelling for a buyer persona", BRAND) == "informational"
    assert classify_intent("history of acmeville", BRAND) == "informational"


def test_blank_brand_names_are_ignored():
    assert classify_intent("how do shoes work", ["", "   "]) == "informational"


def test_is_deterministic():
    texts = ["best shoes", "acme login", "buy shoes", "shoes"]
    first = [classify_intent(t, BRAND) for t in texts]
    assert all([classify_intent(t, BRAND) for t in texts] == first for _ in range(5))


def test_brand_names_are_name_aliases_and_domain(db):
    brand = BrandFactory(
        name="Acme", aliases=["Acme Co", " "], base_url="https://www.acme.example/x"
    )
    assert brand_names_for(brand) == ["Acme", "Acme Co", "acme.example"]


def test_plan_drops_duplicates_in_request_and_cuts_units_per_batch_and_market():
    def p(text, geo=2840, lang="en"):
        return PromptInput(text=text, geo_target_id=geo, language_code=lang)

    prompts = [p("a"), p("b", 2276, "de"), p(" A "), p("c"), p("a", 2276, "de"), p("d")]
    plan = plan_units(prompts, batch_size=3)
    assert plan.duplicates_in_request == 1
    assert [(u.slice_key, [x.text for x in u.prompts]) for u in plan.units] == [
        ((2840, "en"), ["a", "c"]),
        ((2276, "de"), ["b"]),
        ((2276, "de"), ["a"]),
        ((2840, "en"), ["d"]),
    ]
    assert plan.slices == ((2840, "en"), (2276, "de"))
    one_batch = plan_units(prompts, batch_size=None)
    assert [len(u.prompts) for u in one_batch.units] == [3, 2]
