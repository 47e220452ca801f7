"""Project furniture (SPEC §12.4): a LICENSE, a CHANGELOG, one version (the package's, which the
OpenAPI document states), a pre-commit configuration running the README's static checks."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

from rest_framework.test import APIClient

ROOT = Path(__file__).resolve().parent.parent


def _package_version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def test_the_openapi_document_states_the_package_version(db):
    # when
    response = APIClient().get("/api/schema/", {"format": "json"})
    # then
    assert response.status_code == 200
    assert response.json()["info"]["version"] == _package_version()
    assert importlib.metadata.version("serenity") == _package_version()


def test_the_changelog_s_newest_entry_is_the_package_version():
    # when
    entries = re.findall(
        r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", _read("CHANGELOG.md"), re.M
    )
    # then
    assert entries[0] == _package_version()
    assert entries == sorted(entries, key=lambda v: tuple(map(int, v.split("."))), reverse=True)


def test_the_license_is_mit_for_serenity_contributors():
    text = _read("LICENSE")
    assert text.startswith("MIT License\n")
    assert "Copyright (c) 2026 Serenity contributors" in text


def test_pre_commit_runs_the_static_checks_of_scripts_test():
    # given the static checks ./scripts/test runs
    checks = re.findall(r"^\s+(\.venv/bin/\S+ .+)$", _read("scripts/test"), re.M)
    # when
    entries = re.findall(r"^\s+entry: (.+)$", _read(".pre-commit-config.yaml"), re.M)
    # then the same commands, and local hooks only (nothing to download)
    assert entries == [c for c in checks if "pytest" not in c]
    assert re.findall(r"^\s+- repo: (.+)$", _read(".pre-commit-config.yaml"), re.M) == ["local"]


def _read(name: str) -> str:
    return (ROOT / name).read_text()


def test_the_readme_s_first_screen_is_the_two_commands_and_a_pointer():
    # given the README as a newcomer opens it (SPEC §13.6: 1,647 words came before the first
    # command in 2.3.0)
    readme = (ROOT / "README.md").read_text()
    before, _, after = readme.partition("```sh\n")

    # then the first command comes within a screen, and its block is the two commands
    assert len(before.split()) <= 250, len(before.split())
    first_block = after.partition("```")[0]
    commands = [line.split("#")[0].strip() for line in first_block.splitlines()]
    assert commands == ["./scripts/run", "./scripts/test"]
    # and right after it, a pointer to the rest
    assert "[glossary](#glossary)" in after.partition("## Glossary")[0]
