"""The service as an operator runs it in production (SPEC §10.4): gunicorn with DEBUG off, a
Celery worker and beat (tests/harness.py, as real processes), and nothing extra set.

- the admin is styled: whitenoise serves the static files;
- `/metrics` counts what every process did (the multiprocess folder needs no setting);
- gunicorn's, Celery's and beat's own lines are JSON, and beat's per-tick lines are DEBUG;
- the admin works in a real browser (headless Chromium from Debian's packages, driven by
  Selenium): log in, the jobs and attempts lists, a chain, Cancel on a pending attempt; each
  page is styled (its stylesheets loaded) and saved as a screenshot: in a temporary folder,
  or under docs/admin/ with SERENITY_REFRESH_SCREENSHOTS=1 (so that `./scripts/test` leaves
  the tree as it found it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.harness import PYTHON, ROOT, Stack, StackConfig, wait_for

DOCS_SCREENSHOTS = ROOT / "docs" / "admin"
ADMIN_PASSWORD = "operator-password-17"


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with Stack(StackConfig(api_workers=2, api_threads=2), name="operators") as running:
        yield running


@pytest.fixture(scope="module")
def chain(stack: Stack) -> dict[str, str]:
    """An async brand create with a market, run to its end by the stack's worker."""
    org_id, token = stack.create_org_and_token()
    api = stack.client(token, org_id)
    accepted = api.post(
        api.brands_path,
        {
            "name": "Operated Brand",
            "baseUrl": "https://operated.example",
            "semrushMarket": {"market": "US", "languageCode": "en"},
            "async": True,
        },
    )
    assert accepted.status == 202, accepted.body
    stack.wait_until_quiet()
    job = api.job(accepted.body["id"], accepted.body["jobId"]).body
    assert job["status"] == "COMPLETED", job
    return {"org_id": org_id, "brand_id": accepted.body["id"], "job_id": accepted.body["jobId"]}


def screenshot_folder(environ: dict[str, str] | os._Environ[str], temporary: Path) -> Path:
    """docs/admin/ when asked to refresh the docs' screenshots, else `temporary`."""
    return DOCS_SCREENSHOTS if environ.get("SERENITY_REFRESH_SCREENSHOTS") == "1" else temporary


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = screenshot_folder(os.environ, tmp_path_factory.mktemp("admin-screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _lines(path: Path) -> list[str]:
    return path.read_text(errors="replace").splitlines()


def _json_lines(lines: list[str]) -> list[dict[str, object]]:
    """Every line the process wrote, decoded; fails on a line that is not JSON (a banner
    included: SPEC §12.4). The harness's own `=== start …` line, one per start, is skipped."""
    return [json.loads(line) for line in lines if line.strip() and not line.startswith("=== ")]


def test_the_admins_static_files_are_served_by_gunicorn_with_debug_off(stack):
    # when
    css = requests.get(f"{stack.api_url}/static/admin/css/base.css", timeout=10)
    login = requests.get(f"{stack.api_url}/admin/login/", timeout=10)
    # then
    assert css.status_code == 200
    assert css.headers["Content-Type"].startswith("text/css")
    assert "/static/admin/css/base.css" in login.text


def test_metrics_count_every_process_with_nothing_set(stack, chain):
    # given no PROMETHEUS_MULTIPROC_DIR in the stack's environment
    assert "PROMETHEUS_MULTIPROC_DIR" not in stack.env
    # when: the API (gunicorn) serves what the worker recorded
    text = requests.get(f"{stack.api_url}/metrics", timeout=10).text
    # then
    assert (
        'serenity_upstream_call_duration_seconds_count{operation="create_subworkspace",'
        'status="200"}' in text
    )
    assert 'serenity_job_steps_total{outcome="ok",step="provisionWorkspace"}' in text
    assert 'serenity_job_steps_total{outcome="ok",step="createMarket"}' in text
    assert "serenity_jobs_runnable 0.0" in text
    assert "serenity_jobs_oldest_runnable_age_seconds 0.0" in text
    assert 'serenity_http_requests_total{method="POST",status="202"}' in text


def test_gunicorn_celery_and_beat_write_json_lines_and_beat_ticks_are_debug(stack, chain):
    # given beat has ticked many times (the dispatcher runs every 0.5 s)
    time.sleep(2)
    # when
    api = _json_lines(_lines(stack.log_dir / "api.log"))
    worker = _json_lines(_lines(stack.log_dir / "worker-1.log"))
    beat = _json_lines(_lines(stack.log_dir / "beat.log"))
    # then: gunicorn's own lines and its access log, Celery's worker and beat lines are JSON
    assert any(line["logger"] == "gunicorn.error" for line in api)
    assert any(
        line["logger"] == "gunicorn.access" and "/v2/orgs/" in str(line["message"]) for line in api
    )
    assert any(line["logger"] == "celery.apps.worker" for line in worker)
    assert any(line["logger"] == "celery.beat" for line in beat)
    # and the banners' facts are lines of their own, the broker's password never in them
    assert [line["message"] for line in worker if line["logger"] == "serenity.celery"] == [
        "worker starting"
    ]
    assert [line["message"] for line in beat if line["logger"] == "serenity.celery"] == [
        "beat starting"
    ]
    # and beat's "Sending due task" of every tick is not written at INFO
    assert not [line for line in beat if "Sending due task" in str(line["message"])]


BROWSER_MISSING = (
    "Debian's chromium and chromium-driver are missing: install them with "
    "scripts/install-browser (./scripts/test does so itself unless given --no-browser-install)"
)


def chromium(*, install: bool) -> tuple[str, str]:
    """The browser and its driver; installed first (scripts/install-browser) when missing and
    `install`, else the test fails naming the installer."""
    if install and not (shutil.which("chromium") and shutil.which("chromedriver")):
        subprocess.run([ROOT / "scripts" / "install-browser"], check=True)
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (browser and driver):
        pytest.fail(BROWSER_MISSING, pytrace=False)
    return browser, driver


@pytest.fixture(scope="module")
def browser(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver = chromium(install=request.config.getoption("--install-browser"))
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,1000",
    ):
        options.add_argument(argument)
    session = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    session.set_page_load_timeout(30)
    yield session
    session.quit()


def _pending_attempt(stack: Stack, brand_id: str) -> str:
    """A pending attempt on the brand, as a request in flight would hold it."""
    code = (
        "from provisioning.models import ProvisioningAttempt as A;"
        f"print(A.objects.create(brand_id='{brand_id}', started_by='activate',"
        " started_by_actor='someone (token t)', started_request_id='req-pending').id)"
    )
    output = stack.manage("shell", "-c", code, check=True).stdout
    return output.strip().splitlines()[-1]


def _styled(session) -> bool:  # type: ignore[no-untyped-def]
    """The page's stylesheets loaded (rules readable) and the admin's header is painted."""
    return bool(
        session.execute_script(
            "const sheets = [...document.styleSheets].filter(s => s.href);"
            "const loaded = sheets.filter(s => s.cssRules.length > 0);"
            "const header = document.querySelector('#header');"
            "const paint = header && getComputedStyle(header).backgroundColor;"
            "return loaded.length > 0 && loaded.length === sheets.length"
            " && !!paint && paint !== 'rgba(0, 0, 0, 0)';"
        )
    )


def _visit(session, url: str, shot: Path) -> None:  # type: ignore[no-untyped-def]
    session.get(url)
    wait_for(
        lambda: session.execute_script("return document.readyState") == "complete",
        timeout=10,
        what=f"{url} to load",
    )
    assert _styled(session), f"{url} is not styled"
    session.save_screenshot(str(shot))


@pytest.mark.browser
def test_the_admin_in_a_real_browser(stack, chain, browser, screenshots):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    # given an operator account and a pending attempt
    subprocess.run(
        [
            PYTHON,
            "manage.py",
            "createsuperuser",
            "--noinput",
            "--username",
            "operator",
            "--email",
            "operator@example.com",
        ],
        cwd=ROOT,
        env={**stack.env, "DJANGO_SUPERUSER_PASSWORD": ADMIN_PASSWORD},
        check=True,
        capture_output=True,
    )
    attempt_id = _pending_attempt(stack, chain["brand_id"])
    admin = f"{stack.api_url}/admin"
    # when the operator logs in
    _visit(browser, f"{admin}/login/", screenshots / "login.png")
    browser.find_element(By.NAME, "username").send_keys("operator")
    browser.find_element(By.NAME, "password").send_keys(ADMIN_PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    wait_for(lambda: "/admin/login/" not in browser.current_url, timeout=10, what="login")
    # then the jobs list shows the chain, with its brand and effective status
    _visit(browser, f"{admin}/jobs/asyncjob/", screenshots / "jobs.png")
    rows = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
    assert len(rows) == 1
    assert "Operated Brand" in rows[0].text and "COMPLETED" in rows[0].text
    # in a 1400 px window, without scrolling sideways, under the service's own header
    assert browser.execute_script("return window.innerWidth") <= 1400
    assert browser.execute_script(
        "const results = document.querySelector('#changelist .results');"
        "return results.scrollWidth <= results.clientWidth"
        " && document.documentElement.scrollWidth <= window.innerWidth;"
    )
    assert "Serenity administration" in browser.find_element(By.ID, "header").text
    # and the chain's page shows its steps
    rows[0].find_element(By.CSS_SELECTOR, "th a, td a").click()
    wait_for(lambda: chain["job_id"] in browser.current_url, timeout=10, what="the chain")
    _visit(browser, browser.current_url, screenshots / "chain.png")
    page = browser.find_element(By.TAG_NAME, "body").text
    assert "provisionWorkspace" in page and "createMarket" in page
    # when the operator cancels the pending attempt from the attempts list
    _visit(browser, f"{admin}/provisioning/provisioningattempt/", screenshots / "attempts.png")
    checkbox = f"input[name='_selected_action'][value='{attempt_id}']"
    browser.find_element(By.CSS_SELECTOR, checkbox).click()
    Select(browser.find_element(By.NAME, "action")).select_by_value("cancel_attempts")
    browser.find_element(By.CSS_SELECTOR, "button[name=index], input[name=index]").click()
    wait_for(
        lambda: "Cancelled 1 attempt(s)." in browser.page_source, timeout=10, what="the cancel"
    )
    browser.save_screenshot(str(screenshots / "attempts-cancelled.png"))
    # then its page shows its timeline and who started and cancelled it
    _visit(
        browser,
        f"{admin}/provisioning/provisioningattempt/{attempt_id}/change/",
        screenshots / "attempt.png",
    )
    page = browser.find_element(By.TAG_NAME, "body").text
    for text in ("Timeline", "someone (token t)", "req-pending", "admin: operator", "cancelled"):
        assert text in page
    status = stack.query(
        "SELECT status, reason FROM provisioning_provisioningattempt WHERE id = %s", (attempt_id,)
    )
    assert status == [{"status": "failed", "reason": "cancelled"}]


def test_the_onboarding_page_in_a_real_browser(stack, browser, screenshots):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    # given an onboarding of five brands whose workspaces take a minute to settle, one of
    # them refused (its name exists: that brand's sync create waited for its own workspace
    # before the minute-long settles were configured), and an operator
    org_id, token = stack.create_org_and_token()
    api = stack.client(token, org_id)
    existing = api.post(api.brands_path, {"name": "Existing", "baseUrl": "https://e.example"})
    assert existing.status == 201, existing.body
    stack.sim_config(settleSeconds=60)
    names = ["Northwind", "Contoso", "Fabrikam", "Existing", "Tailspin"]
    accepted = api.post(
        f"/v2/orgs/{org_id}/serenity/onboardings",
        {"brands": [{"name": n, "baseUrl": "https://x.example"} for n in names]},
    )
    assert accepted.status == 202, accepted.body
    onboarding_id = accepted.body["onboardingId"]
    subprocess.run(
        [
            PYTHON,
            "manage.py",
            "createsuperuser",
            "--noinput",
            "--username",
            "onboarder",
            "--email",
            "onboarder@example.com",
        ],
        cwd=ROOT,
        env={**stack.env, "DJANGO_SUPERUSER_PASSWORD": ADMIN_PASSWORD},
        check=True,
        capture_output=True,
    )
    admin = f"{stack.api_url}/admin"
    browser.delete_all_cookies()
    browser.get(f"{admin}/login/")
    browser.find_element(By.NAME, "username").send_keys("onboarder")
    browser.find_element(By.NAME, "password").send_keys(ADMIN_PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    wait_for(lambda: "/admin/login/" not in browser.current_url, timeout=10, what="login")
    # when the operator opens the onboardings list
    _visit(browser, f"{admin}/provisioning/onboarding/", screenshots / "onboardings.png")
    # then the onboarding is there with its progress bar: the refused item has ended
    row = browser.find_element(By.CSS_SELECTOR, "#result_list tbody tr")
    assert onboarding_id in row.text and "1 / 5" in row.text and "IN_PROGRESS" in row.text
    assert row.find_elements(By.CSS_SELECTOR, ".onboarding-progress span")
    # and its page lists the items, linked to their brands and chains
    _visit(
        browser,
        f"{admin}/provisioning/onboarding/{onboarding_id}/change/",
        screenshots / "onboarding.png",
    )
    page = browser.find_element(By.TAG_NAME, "body").text
    assert "FAILED (brandExists)" in page and "Northwind" in page
    assert browser.find_elements(By.CSS_SELECTOR, "a[href*='/admin/jobs/asyncjob/']")
    # when the operator cancels it from the list
    browser.get(f"{admin}/provisioning/onboarding/")
    checkbox = f"input[name='_selected_action'][value='{onboarding_id}']"
    browser.find_element(By.CSS_SELECTOR, checkbox).click()
    Select(browser.find_element(By.NAME, "action")).select_by_value("cancel_onboardings")
    browser.find_element(By.CSS_SELECTOR, "button[name=index], input[name=index]").click()
    wait_for(lambda: "Cancelled 1 onboarding(s)." in browser.page_source, timeout=10, what="cancel")
    # then every open item is cancelled and the onboarding is CANCELLED
    _visit(
        browser,
        f"{admin}/provisioning/onboarding/{onboarding_id}/change/",
        screenshots / "onboarding-cancelled.png",
    )
    page = browser.find_element(By.TAG_NAME, "body").text
    assert "0 completed, 1 failed, 4 cancelled, 0 in progress" in page
    assert "CANCELLED" in page
    stack.sim_config(settleSeconds=0.3)


def test_screenshots_go_to_a_temporary_folder_unless_asked_to_refresh_the_docs(tmp_path):
    # (SPEC §11.4: `./scripts/test` leaves the tree clean.)
    assert screenshot_folder({}, tmp_path) == tmp_path
    assert screenshot_folder({"SERENITY_REFRESH_SCREENSHOTS": "0"}, tmp_path) == tmp_path
    assert screenshot_folder({"SERENITY_REFRESH_SCREENSHOTS": "1"}, tmp_path) == DOCS_SCREENSHOTS
