"""The `serenity` command (SPEC §13.6), a client of the API like any other.

End to end against a running stack (tests/harness.py: gunicorn, a Celery worker, the
simulator as real processes): a CSV of 20 brands of which two fail (the simulator refuses two
workspace creates) is onboarded with progress shown, its failed rows are written to a CSV,
the redrive completes them, and a job is watched to its end. Without a stack: clear errors and
exit codes for a command that is not configured, cannot reach the API, or is refused.
"""

from __future__ import annotations

import csv
import io
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import BIN, Stack, StackConfig

SERENITY = str(BIN / "serenity")


def run(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SERENITY, "--interval", "0.3", *args],
        env={**os.environ, "COLUMNS": "200", **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with Stack(
        StackConfig(api_workers=1, api_threads=4, settle_seconds=0.5), name="cli"
    ) as running:
        yield running


def test_onboard_a_csv_write_the_failed_rows_and_redrive_them(stack, tmp_path):
    # given a CSV of 20 brands, and Semrush refusing the next two workspace creates
    org_id, token = stack.create_org_and_token()
    env = {"SERENITY_API_URL": stack.api_url, "SERENITY_TOKEN": token, "SERENITY_ORG_ID": org_id}
    rows = "".join(f"Cli Brand {n},https://cli-{n}.example,,US:en\n" for n in range(20))
    brands = tmp_path / "brands.csv"
    brands.write_text("name,baseUrl,aliases,markets\n" + rows, encoding="utf-8")
    stack.sim_fault(
        method="POST", path_regex="/child$", status=400, body={"message": "no"}, times=2
    )
    # when the command onboards it
    first = run("onboard", str(brands), env=env, cwd=tmp_path)
    # then it followed the onboarding to its end, with a progress bar, and says what ended how
    assert first.returncode == 1, (first.stdout, first.stderr)
    assert "20/20" in first.stderr and "completed" in first.stderr, first.stderr
    lines = first.stdout.splitlines()
    onboarding_id = lines[0].rsplit(" ", 1)[1]
    assert lines[0] == f"Onboarding 20 brands: {onboarding_id}"
    assert f"Onboarding {onboarding_id} COMPLETED: 18 completed, 2 failed, 0 cancelled" in lines
    # and the two failed rows are written beside the input, with their reasons
    failed_out = tmp_path / "brands.failed.csv"
    assert f"Failed rows written to {failed_out}" in lines
    failed = list(csv.DictReader(io.StringIO(failed_out.read_text(encoding="utf-8"))))
    assert [(r["status"], r["markets"]) for r in failed] == [("FAILED", "US:en")] * 2
    assert all(r["errorCode"] and r["brandId"] for r in failed), failed
    # when the command redrives the onboarding
    again = run("onboard", "--retry", onboarding_id, env=env, cwd=tmp_path)
    # then the two complete, on the brands the first run created, and nothing is left failed
    assert again.returncode == 0, (again.stdout, again.stderr)
    assert "2/2" in again.stderr
    redrive_id = again.stdout.splitlines()[0].rsplit(" ", 1)[1]
    assert f"Onboarding {redrive_id} COMPLETED: 2 completed, 0 failed, 0 cancelled" in again.stdout
    assert len(stack.brands()) == 20
    titles = [ws["title"] for ws in stack.sim_state()["workspaces"]]
    assert sorted(titles) == sorted(f"Cli Brand {n}" for n in range(20))
    # and a job of it can be watched to its end
    api = stack.client(token, org_id)
    item = api.get(f"/v2/orgs/{org_id}/serenity/onboardings/{redrive_id}/items").body["items"][0]
    watched = run("jobs", "watch", item["jobId"], env=env, cwd=tmp_path)
    assert watched.returncode == 0, (watched.stdout, watched.stderr)
    assert watched.stdout.startswith(f"Job {item['jobId']} (provisionWorkspace) COMPLETED: HTTP")


def test_a_refusal_is_said_with_the_api_s_code(stack, tmp_path):
    org_id, token = stack.create_org_and_token()
    env = {"SERENITY_API_URL": stack.api_url, "SERENITY_TOKEN": token, "SERENITY_ORG_ID": org_id}
    bad = tmp_path / "bad.csv"
    bad.write_text("name,baseUrl\nA,https://a.example\nB,not-a-url\n", encoding="utf-8")
    refused = run("onboard", str(bad), env=env, cwd=tmp_path)
    assert refused.returncode == 3
    assert "invalidRequest: rows[2].baseUrl: must be an absolute http(s) URL." in " ".join(
        refused.stderr.split()
    )
    unknown = run(
        "onboard", "--retry", "00000000-0000-4000-8000-000000000000", env=env, cwd=tmp_path
    )
    assert unknown.returncode == 3 and "onboardingNotFound" in unknown.stderr


@pytest.mark.parametrize(
    ("env", "args", "code", "said"),
    [
        ({}, ("onboard", "x.csv"), 2, "SERENITY_API_URL is not set"),
        ({"SERENITY_API_URL": "http://h"}, ("onboard", "x.csv"), 2, "SERENITY_TOKEN is not set"),
        (
            {"SERENITY_API_URL": "http://h", "SERENITY_TOKEN": "t"},
            ("jobs", "watch", "j"),
            2,
            "--org ORG_ID or set SERENITY_ORG_ID",
        ),
        (
            {"SERENITY_API_URL": "http://127.0.0.1:9", "SERENITY_TOKEN": "t"},
            ("--org", "o", "jobs", "watch", "j"),
            4,
            "cannot reach http://127.0.0.1:9",
        ),
        ({}, ("onboard",), 2, "onboard takes a CSV file or --retry ONBOARDING_ID"),
    ],
)
def test_an_unconfigured_or_unreachable_command_says_why(tmp_path, env, args, code, said):
    clean = {k: "" for k in ("SERENITY_API_URL", "SERENITY_TOKEN", "SERENITY_ORG_ID")}
    completed = run(*args, env={**clean, **env}, cwd=tmp_path)
    assert completed.returncode == code, completed.stderr
    assert said in " ".join(completed.stderr.split())
