"""The code's shape, as a maintainer reads it: no product module over 500 lines (SPEC §13.5), no
product function longer than a screen (50 lines, `def` to its end, docstring included) and the
OpenAPI schema code within 1,000 lines. Product code: every top-level package but the tests, the
benchmarks and the scripts (a new one, such as `cli/`, is product code at once), migrations
aside."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("api", "config", "jobs", "kernel", "provisioning", "serenity", "webhooks")
NOT_PRODUCT = ("tests", "bench", "scripts")
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 50
# 900 in revision 6; revision 7's routes (reconciliations, upstream calls, a redrive, an
# onboarding's items as CSV, the org's Serenity state, one delivery) and their examples added 62.
MAX_SCHEMA_LINES = 1000


def _product_packages() -> list[str]:
    """Every top-level package (a folder with an __init__.py) but the ones that do not ship."""
    return sorted(
        path.parent.name
        for path in ROOT.glob("*/__init__.py")
        if path.parent.name not in NOT_PRODUCT and not path.parent.name.startswith(".")
    )


def _product_files() -> list[Path]:
    return [
        path
        for package in _product_packages()
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
    ]


def test_every_top_level_package_is_walked():
    # then the walk finds today's product packages and nothing that does not ship
    packages = _product_packages()
    assert set(PRODUCT) <= set(packages)
    assert not set(NOT_PRODUCT) & set(packages)


def test_no_product_module_is_longer_than_500_lines():
    # given every product module
    files = _product_files()
    assert len(files) > 100
    too_long = []
    for path in files:
        name = path.relative_to(ROOT).as_posix()
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES:
            too_long.append(f"{name} {lines}")
    # then none is longer than 500 lines
    assert too_long == []


def test_no_product_function_is_longer_than_50_lines():
    # given every function of the product code (nested ones and methods included)
    files = _product_files()
    assert len(files) > 100  # the walk found the packages
    too_long = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} {lines}")
    # then none is longer than 50 lines
    assert too_long == []


def test_the_openapi_schema_code_is_within_1000_lines():
    lines = sum(len(p.read_text().splitlines()) for p in (ROOT / "api" / "schemas").glob("*.py"))
    assert 0 < lines <= MAX_SCHEMA_LINES, lines
