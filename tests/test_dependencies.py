"""Reproducible installs (SPEC §11.4): a lock file with every version and its hashes, used by
both README commands (through scripts/bootstrap-venv) and by CI (through scripts/test); celery
and kombu bounded to the versions the broker code (config/broker.py,
config/filesystem_broker.py) is tested with."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _locked(name: str) -> dict[str, str]:
    """{canonical name: version} of a lock file; every pin carries a hash."""
    text = (ROOT / name).read_text()
    pins = {}
    for match in re.finditer(
        r"^([A-Za-z0-9_.-]+)==(\S+) \\\n((?:\s+--hash=sha256:\w+.*\n)+)", text, re.M
    ):
        pins[canonicalize_name(match.group(1))] = match.group(2)
    assert len(pins) == len(re.findall(r"^\S+==", text, re.M)), f"{name}: a pin without a hash"
    return pins


@pytest.mark.parametrize(
    ("lock", "requirements"),
    [
        ("requirements.lock", PROJECT["dependencies"]),
        (
            "requirements-dev.lock",
            PROJECT["dependencies"] + PROJECT["optional-dependencies"]["dev"],
        ),
    ],
)
def test_the_lock_pins_every_dependency_within_its_range(lock, requirements):
    pins = _locked(lock)
    for line in requirements:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{lock} lacks {name}"
        assert requirement.specifier.contains(pins[name]), (lock, name, pins[name])


def test_celery_and_kombu_are_bounded_to_the_tested_minor_release():
    for name in ("celery", "kombu"):
        (line,) = [d for d in PROJECT["dependencies"] if Requirement(d).name == name]
        specifier = Requirement(line).specifier
        assert any(spec.operator == "<" for spec in specifier), line
        assert any(spec.operator == ">=" for spec in specifier), line
        assert specifier.contains(_locked("requirements.lock")[name])


def test_this_run_uses_the_locked_versions():
    for name, version in _locked("requirements-dev.lock").items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # a pin for another Python (an environment marker)
        assert installed == version, name


def test_both_readme_commands_and_ci_install_from_the_lock():
    bootstrap = (ROOT / "scripts" / "bootstrap-venv").read_text()
    assert "--require-hashes" in bootstrap
    assert 'lock="requirements.lock"' in bootstrap
    assert 'lock="requirements-dev.lock"' in bootstrap
    assert "scripts/bootstrap-venv\n" in (ROOT / "scripts" / "run").read_text()
    assert "scripts/bootstrap-venv dev\n" in (ROOT / "scripts" / "test").read_text()
    assert "./scripts/test\n" in (ROOT / ".ci" / "run").read_text()
