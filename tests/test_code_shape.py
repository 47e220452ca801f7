"""The code's shape, as a maintainer reads it: no product function longer than a screen (50
lines, `def` to its end, docstring included) and the OpenAPI schema code within 900 lines.
Product code: every package the service ships, migrations aside."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("api", "config", "jobs", "kernel", "provisioning", "serenity", "webhooks")
MAX_FUNCTION_LINES = 50
MAX_SCHEMA_LINES = 900


def _product_files() -> list[Path]:
    return [
        path
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
    ]


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


def test_the_openapi_schema_code_is_within_900_lines():
    lines = sum(len(p.read_text().splitlines()) for p in (ROOT / "api" / "schemas").glob("*.py"))
    assert 0 < lines <= MAX_SCHEMA_LINES, lines
