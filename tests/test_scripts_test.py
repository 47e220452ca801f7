"""`./scripts/test` on a fresh machine (SPEC §11.4, §12.4): `--help` runs nothing; the browser
(Debian's chromium and chromium-driver) is installed only when a browser test runs, without
recommended packages and saying what it installs (scripts/install-browser, with sudo only when
not root), and `--no-browser-install` turns that off (the browser test then fails, naming the
installer). `.ci/run` relies on `./scripts/test` rather than installing anything itself, but for
the deploy files' tools (scripts/install-deploy-tools: nginx, and systemd when systemd-analyze
is missing, installed never started).

The scripts run in a copy of the repository's scripts with stand-ins for the venv, apt-get and
sudo (a PATH that has no chromium), so nothing is installed by these tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests import test_operators_stack

ROOT = Path(__file__).resolve().parent.parent


def _stub(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/bash\n" + body + "\n")
    path.chmod(0o755)


def _fresh_machine(tmp_path: Path, uid: str = "1000") -> tuple[Path, dict[str, str], Path]:
    """A copy of scripts/test and scripts/install-browser beside stand-ins that log what they
    are asked to do; returns the tree, a plain environment and the log."""
    tree = tmp_path / "tree"
    (tree / "scripts").mkdir(parents=True)
    for script in ("test", "install-browser", "install-deploy-tools"):
        shutil.copy(ROOT / "scripts" / script, tree / "scripts" / script)
    log = tmp_path / "calls.log"
    _stub(tree / "scripts" / "bootstrap-venv", f'echo "bootstrap-venv $*" >> {log}')
    _stub(tree / ".venv" / "bin" / "python", "exit 0")  # check_services.py: both answer
    _stub(tree / ".venv" / "bin" / "pytest", f'echo "pytest $*" >> {log}')
    bin_dir = tmp_path / "bin"
    _stub(bin_dir / "apt-get", f'echo "apt-get $* DEBIAN_FRONTEND=$DEBIAN_FRONTEND" >> {log}')
    _stub(bin_dir / "sudo", f'echo "sudo" >> {log}; exec "$@"')
    _stub(bin_dir / "id", f"echo {uid}")
    for tool in ("bash", "dirname", "env", "cat", "tee", "chmod", "rm", "tail"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    env = {"PATH": str(bin_dir), "SKIP_STATIC_CHECKS": "1", "HOME": str(tmp_path)}
    return tree, env, log


def _run(tree: Path, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", *argv], cwd=tree, env=env, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("option", ["--help", "-h"])
def test_help_prints_the_usage_and_runs_nothing(tmp_path, option):
    # given
    tree, env, log = _fresh_machine(tmp_path)
    # when
    completed = _run(tree, env, "scripts/test", option, "-k", "anything")
    # then
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("Usage: ./scripts/test [--no-browser-install]")
    assert "--no-browser-install" in completed.stdout
    assert completed.stderr == ""
    assert not log.exists()  # no venv, no apt-get, no pytest


def test_a_run_installs_nothing_itself_and_lets_a_browser_test_install_chromium(tmp_path):
    # given a machine without chromium nor chromedriver on its PATH
    tree, env, log = _fresh_machine(tmp_path)
    # when
    completed = _run(tree, env, "scripts/test", "-k", "tenancy")
    # then: pytest runs with the permission to install, and nothing was installed beforehand
    assert completed.returncode == 0, completed.stderr
    assert log.read_text().splitlines() == [
        "bootstrap-venv dev",
        "pytest --install-browser -k tenancy",
    ]


def test_no_browser_install_is_not_passed_on_and_withholds_the_permission(tmp_path):
    # given
    tree, env, log = _fresh_machine(tmp_path)
    # when
    completed = _run(tree, env, "scripts/test", "--no-browser-install", "-q")
    # then
    assert completed.returncode == 0, completed.stderr
    assert log.read_text().splitlines() == ["bootstrap-venv dev", "pytest -q"]


@pytest.mark.parametrize(("uid", "through_sudo"), [("0", False), ("1000", True)])
def test_install_browser_installs_without_recommends_and_says_what(tmp_path, uid, through_sudo):
    # given a machine without chromium nor chromedriver on its PATH
    tree, env, log = _fresh_machine(tmp_path, uid)
    # when
    completed = _run(tree, env, "scripts/install-browser")
    # then
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == (
        "==> installing chromium chromium-driver (Debian packages, --no-install-recommends)"
        " for the browser test\n"
    )
    expected = [
        "apt-get update -qq DEBIAN_FRONTEND=",
        "apt-get install -y -qq --no-install-recommends chromium chromium-driver"
        " DEBIAN_FRONTEND=noninteractive",
    ]
    if through_sudo:
        expected = ["sudo", expected[0], "sudo", expected[1]]
    assert log.read_text().splitlines() == expected


def test_install_browser_does_nothing_when_both_are_there(tmp_path):
    # given
    tree, env, log = _fresh_machine(tmp_path)
    _stub(tmp_path / "bin" / "chromium", "exit 0")
    _stub(tmp_path / "bin" / "chromedriver", "exit 0")
    # when
    completed = _run(tree, env, "scripts/install-browser")
    # then
    assert (completed.returncode, completed.stderr) == (0, "")
    assert not log.exists()


def test_a_browser_test_told_not_to_install_fails_naming_the_installer(monkeypatch):
    # given no chromium on the PATH
    monkeypatch.setattr(shutil, "which", lambda name: None)
    ran: list[object] = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: ran.append(a))
    # when
    with pytest.raises(pytest.fail.Exception) as failed:
        test_operators_stack.chromium(install=False)
    # then
    assert str(failed.value) == test_operators_stack.BROWSER_MISSING
    assert "scripts/install-browser" in str(failed.value)
    assert ran == []


def test_a_browser_test_allowed_to_install_runs_the_installer(monkeypatch):
    # given chromium appears once the installer ran
    installed: list[object] = []
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}" if installed else None)
    monkeypatch.setattr(subprocess, "run", lambda argv, **k: installed.append((argv, k)))
    # when
    binaries = test_operators_stack.chromium(install=True)
    # then
    assert binaries == ("/usr/bin/chromium", "/usr/bin/chromedriver")
    assert installed == [([ROOT / "scripts" / "install-browser"], {"check": True})]


def test_ci_relies_on_scripts_test_for_chromium():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "apt-get" not in ci
    assert "./scripts/test\n" in ci
    assert os.access(ROOT / "scripts" / "test", os.X_OK)
    assert os.access(ROOT / "scripts" / "install-browser", os.X_OK)


@pytest.mark.parametrize(("uid", "through_sudo"), [("0", False), ("1000", True)])
def test_install_deploy_tools_installs_nginx_and_systemd_never_started(tmp_path, uid, through_sudo):
    # given a machine with none of the tools, and apt-get noting whether a start is refused
    tree, env, log = _fresh_machine(tmp_path, uid)
    policy = tmp_path / "policy-rc.d"
    env["POLICY_RC_D"] = str(policy)
    _stub(
        tmp_path / "bin" / "apt-get",
        f'echo "apt-get $* DEBIAN_FRONTEND=$DEBIAN_FRONTEND policy=$(cat {policy} 2>/dev/null'
        f' | tail -1)" >> {log}',
    )
    # when
    completed = _run(tree, env, "scripts/install-deploy-tools")
    # then
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == (
        "==> installing nginx systemd openssl (Debian packages, --no-install-recommends)"
        " for the deploy tests\n"
    )
    expected = [
        "apt-get update -qq DEBIAN_FRONTEND= policy=",
        "apt-get install -y -qq --no-install-recommends nginx systemd openssl"
        " DEBIAN_FRONTEND=noninteractive policy=exit 101",
    ]
    calls = [line for line in log.read_text().splitlines() if line != "sudo"]
    assert calls == expected
    assert ("sudo" in log.read_text().splitlines()) is through_sudo
    assert not policy.exists()  # only for the time of the install


def test_install_deploy_tools_does_nothing_when_they_are_there(tmp_path):
    # given
    tree, env, log = _fresh_machine(tmp_path)
    for tool in ("nginx", "systemd-analyze", "openssl"):
        _stub(tmp_path / "bin" / tool, "exit 0")
    # when
    completed = _run(tree, env, "scripts/install-deploy-tools")
    # then
    assert (completed.returncode, completed.stderr) == (0, "")
    assert not log.exists()
