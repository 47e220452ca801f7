"""`./scripts/run` and `./scripts/manage` as a developer uses them (SPEC §10.4): Ctrl-C stops
everything within 5 s with a warm worker shutdown, logs are appended, a busy port names the
option that changes it, and management commands run from a plain shell. SPEC §12.4: a restarted
run keeps its simulator's state (var/simulator-state.json), and `./scripts/manage` talks to the
simulator on the port the run was started with (var/run.json).

The runs use the embedded default (SQLite and the filesystem broker in a temporary var dir),
on free ports, with the environment of a plain shell (none of the test run's settings)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import requests

from tests.harness import free_port

ROOT = Path(__file__).resolve().parent.parent
# What a developer's shell would not have: the test run's own service settings.
_TEST_ONLY = ("DATABASE_URL", "CELERY_BROKER_URL", "SECRET_KEY", "FIELD_ENCRYPTION_KEY", "DEBUG")


def _plain_shell_env(var_dir: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in _TEST_ONLY
        and not k.startswith(("SERENITY_", "JOBS_", "SEMRUSH_", "CELERY_", "PYTEST_", "PROMETHEUS"))
        and k != "DJANGO_SETTINGS_MODULE"
    }
    env["SERENITY_VAR_DIR"] = str(var_dir)
    return env


def _run_a_chain(base: str, token: str, org_id: str) -> None:
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    accepted = session.post(
        f"{base}/v2/orgs/{org_id}/brands",
        json={
            "name": "Ctrl C",
            "baseUrl": "https://ctrl-c.example",
            "semrushMarket": {"market": "US", "languageCode": "en"},
            "async": True,
        },
        timeout=30,
    )
    assert accepted.status_code == 202, accepted.text
    location = accepted.headers["Location"]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        body = session.get(f"{base}{location}", timeout=30).json()
        if body["status"] != "IN_PROGRESS":
            break
        time.sleep(0.5)
    assert body["status"] == "COMPLETED", body


def test_ctrl_c_stops_everything_within_5_s_with_a_warm_worker_shutdown(tmp_path):
    # given a previous run's log line, and ./scripts/run up on free ports
    log_dir = tmp_path / "var" / "log"
    log_dir.mkdir(parents=True)
    (log_dir / "worker.log").write_text("a line of the previous run\n")
    port, sim_port = free_port(), free_port()
    output = (tmp_path / "run.out").open("wb")
    run = subprocess.Popen(
        ["scripts/run", "--port", str(port), "--simulator-port", str(sim_port)],
        cwd=ROOT,
        env=_plain_shell_env(tmp_path / "var"),
        stdout=output,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert run.poll() is None, (tmp_path / "run.out").read_text()
            if b"Serenity is running" in (tmp_path / "run.out").read_bytes():
                break
            time.sleep(0.5)
        assert requests.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
        worker_log = log_dir / "worker.log"
        # and a chain run to its end through the embedded broker, as the banner shows it
        banner = (tmp_path / "run.out").read_text()
        token = re.search(r"Token +(\S+)", banner).group(1)  # type: ignore[union-attr]
        org_id = re.search(r"Org +(\S+)", banner).group(1)  # type: ignore[union-attr]
        _run_a_chain(f"http://127.0.0.1:{port}", token, org_id)
        # when: Ctrl-C (the terminal sends SIGINT to the foreground process)
        started = time.monotonic()
        run.send_signal(signal.SIGINT)
        run.wait(timeout=30)
        elapsed = time.monotonic() - started
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
        output.close()
    # then
    out = (tmp_path / "run.out").read_text()
    assert run.returncode == 0, out
    assert elapsed < 5.0, out
    assert "killing it" not in out
    worker_text = worker_log.read_text()
    assert worker_text.startswith("a line of the previous run\n")  # appended, not truncated
    assert "Warm shutdown" in worker_text or "warm shutdown" in worker_text
    with socket.socket() as probe:  # the API is gone
        assert probe.connect_ex(("127.0.0.1", port)) != 0


def test_a_busy_port_names_the_option_that_changes_it(tmp_path):
    # given
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        # when
        completed = subprocess.run(
            ["scripts/run", "--port", str(port), "--simulator-port", str(free_port())],
            cwd=ROOT,
            env=_plain_shell_env(tmp_path / "var"),
            capture_output=True,
            text=True,
            timeout=120,
        )
    # then
    assert completed.returncode == 1
    assert f"port {port} is in use" in completed.stderr
    assert "--port" in completed.stderr


def test_management_commands_run_from_a_plain_shell(tmp_path):
    # given a plain shell (no SECRET_KEY, no DEBUG), as the README shows the commands
    env = _plain_shell_env(tmp_path / "var")
    subprocess.run(
        ["scripts/manage", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True, timeout=300
    )
    # when
    completed = subprocess.run(
        [
            "scripts/manage",
            "create_org",
            "--name",
            "Shell Org",
            "--serenity",
            "--parent-workspace-id",
            "ws-parent-1",
            "--json",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # then
    assert completed.returncode == 0, completed.stderr
    assert set(json.loads(completed.stdout)) == {"id"}


class _Run:
    """`./scripts/run` on the given ports, in the background, until `stop()`."""

    def __init__(self, tmp_path: Path, port: int, sim_port: int, name: str) -> None:
        self.out_path = tmp_path / f"{name}.out"
        self._out = self.out_path.open("wb")
        self.process = subprocess.Popen(
            ["scripts/run", "--port", str(port), "--simulator-port", str(sim_port)],
            cwd=ROOT,
            env=_plain_shell_env(tmp_path / "var"),
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 180
        while b"Serenity is running" not in self.out_path.read_bytes():
            assert self.process.poll() is None, self.out_path.read_text()
            assert time.monotonic() < deadline, self.out_path.read_text()
            time.sleep(0.5)
        banner = self.out_path.read_text()
        self.token = re.search(r"Token +(\S+)", banner).group(1)  # type: ignore[union-attr]
        self.org_id = re.search(r"Org +(\S+)", banner).group(1)  # type: ignore[union-attr]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._out.close()


def _manage(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["scripts/manage", *argv],
        cwd=ROOT,
        env=_plain_shell_env(tmp_path / "var"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_restarted_run_keeps_its_simulator_state_and_manage_follows_its_ports(tmp_path):
    # given a run on a simulator port that is not the default, and a brand provisioned by it
    port, sim_port = free_port(), free_port()
    first = _Run(tmp_path, port, sim_port, "first")
    try:
        _run_a_chain(f"http://127.0.0.1:{port}", first.token, first.org_id)
        # when: ./scripts/manage from another plain shell, while the run is up
        audit = _manage(tmp_path, "provisioning_audit", "--json")
    finally:
        first.stop()
    # then it reached this run's simulator (not the default port) and found nothing wrong
    assert first.process.returncode == 0, first.out_path.read_text()
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert json.loads((tmp_path / "var" / "run.json").read_text()) == {
        "apiUrl": f"http://127.0.0.1:{port}",
        "semrushBaseUrl": f"http://127.0.0.1:{sim_port}",
    }
    # when: the run is started again (same var/, same simulator port)
    second = _Run(tmp_path, port, sim_port, "second")
    try:
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {second.token}"
        brands = session.get(f"http://127.0.0.1:{port}/v2/orgs/{second.org_id}/brands", timeout=30)
        state = requests.get(f"http://127.0.0.1:{sim_port}/__sim/state", timeout=30).json()
        audit_again = _manage(tmp_path, "provisioning_audit", "--json")
    finally:
        second.stop()
    # then the brand's workspace and project are still upstream, and the audit is still clean
    assert brands.status_code == 200, brands.text
    [brand] = brands.json()["brands"]
    assert second.org_id == first.org_id
    assert [ws["id"] for ws in state["workspaces"]] == [brand["semrushSubWorkspaceId"]]
    assert [ws["status"] for ws in state["workspaces"]] == ["created"]
    assert [(p["workspaceId"], p["publishStatus"]) for p in state["projects"]] == [
        (brand["semrushSubWorkspaceId"], "live")
    ]
    assert audit_again.returncode == 0, audit_again.stdout + audit_again.stderr


def test_manage_without_a_run_file_keeps_the_default_simulator(tmp_path):
    # given no run ever started in this var/
    code = "from django.conf import settings; print(settings.SEMRUSH_BASE_URL)"
    # when
    completed = _manage(tmp_path, "shell", "-c", code)
    # then
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines()[-1] == "http://127.0.0.1:8765"
