"""`./scripts/test` passes on a fresh machine with nothing but what the machine's kind ships
(SPEC §11.4): it installs Debian's chromium and chromium-driver itself when they are missing
(with sudo only when not root), and `.ci/run` relies on it rather than installing them too.

The script runs in a copy of the repository's scripts with stand-ins for the venv, apt-get and
sudo (a PATH that has no chromium), so nothing is installed by the test."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _stub(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/bash\n" + body + "\n")
    path.chmod(0o755)


def _fresh_machine(tmp_path: Path, uid: str) -> tuple[Path, dict[str, str]]:
    """A copy of scripts/test beside stand-ins that log what they are asked to do."""
    tree = tmp_path / "tree"
    (tree / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "test", tree / "scripts" / "test")
    log = tmp_path / "calls.log"
    _stub(tree / "scripts" / "bootstrap-venv", "exit 0")
    _stub(tree / ".venv" / "bin" / "python", "exit 0")  # check_services.py: both answer
    _stub(tree / ".venv" / "bin" / "pytest", f'echo "pytest $*" >> {log}')
    bin_dir = tmp_path / "bin"
    _stub(bin_dir / "apt-get", f'echo "apt-get $* DEBIAN_FRONTEND=$DEBIAN_FRONTEND" >> {log}')
    _stub(bin_dir / "sudo", f'echo "sudo" >> {log}; exec "$@"')
    _stub(bin_dir / "id", f"echo {uid}")
    for tool in ("bash", "dirname", "env", "cat"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    env = {"PATH": str(bin_dir), "SKIP_STATIC_CHECKS": "1", "HOME": str(tmp_path)}
    return tree, env


@pytest.mark.parametrize(("uid", "through_sudo"), [("0", False), ("1000", True)])
def test_scripts_test_installs_chromium_when_missing(tmp_path, uid, through_sudo):
    # given a machine without chromium nor chromedriver on its PATH
    tree, env = _fresh_machine(tmp_path, uid)
    # when
    completed = subprocess.run(
        ["bash", "scripts/test", "-q"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # then it installed them, then ran pytest
    assert completed.returncode == 0, completed.stderr
    calls = (tmp_path / "calls.log").read_text().splitlines()
    apt = [line for line in calls if line.startswith(("apt-get", "sudo"))]
    expected = [
        "apt-get update -qq DEBIAN_FRONTEND=",
        "apt-get install -y -qq chromium chromium-driver DEBIAN_FRONTEND=noninteractive",
    ]
    if through_sudo:
        expected = ["sudo", expected[0], "sudo", expected[1]]
    assert apt == expected
    assert calls[-1] == "pytest -q"


def test_ci_relies_on_scripts_test_for_chromium():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "apt-get" not in ci
    assert "./scripts/test\n" in ci
    assert os.access(ROOT / "scripts" / "test", os.X_OK)
