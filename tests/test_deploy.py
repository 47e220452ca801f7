"""The documented production deploy (SPEC §10.4, §12.4 "Deploy as written"): deploy/Procfile runs
gunicorn, a worker and beat; deploy/production.env.example (the template of the git-ignored
deploy/production.env) lists every variable they need; `manage.py check --deploy` is clean with
it; deploy/systemd/ runs the Procfile's commands, one unit each; deploy/nginx/ sets the headers
the service believes. The README's production section, run as written in a fresh clone, is
tests/test_production_check.py (`-m live`)."""

from __future__ import annotations

import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import free_port

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
# The README's layout: the checkout in /opt/serenity, its venv from scripts/bootstrap-venv.
CHECKOUT = "/opt/serenity"
VENV_BIN = f"{CHECKOUT}/.venv/bin/"
# The tools that check the deploy files (scripts/install-deploy-tools), in /usr/sbin for nginx.
NGINX = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/sbin")
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")


def _production_env(tmp_path: Path) -> dict[str, str]:
    """deploy/production.env.example with its placeholders filled, and nothing else but PATH."""
    env: dict[str, str] = {"PATH": "/usr/bin:/bin", "SERENITY_VAR_DIR": str(tmp_path)}
    for line in (DEPLOY / "production.env.example").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, _, value = line.partition("=")
        env[name] = re.sub(r"<[^>]*>", secrets.token_urlsafe(50), value)
    env["FIELD_ENCRYPTION_KEY"] = env["FIELD_ENCRYPTION_KEYS"].split(",")[0]
    env["SERENITY_VAR_DIR"] = str(tmp_path)
    return env


def _manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_procfile_runs_gunicorn_a_worker_a_webhook_worker_and_beat():
    # when
    processes = dict(
        line.split(": ", 1)
        for line in (DEPLOY / "Procfile").read_text().splitlines()
        if line and not line.startswith("#")
    )
    # then
    assert set(processes) == {"release", "web", "worker", "webhooks", "beat"}
    assert processes["web"].startswith("gunicorn -c config/gunicorn.py config.wsgi ")
    assert processes["worker"].startswith("celery -A config worker ")
    # deliveries have their own worker: the provisioning one excludes their queue
    assert " -X serenity.webhooks" in processes["worker"]
    assert processes["webhooks"].startswith("celery -A config worker ")
    assert " -Q serenity.webhooks " in processes["webhooks"]
    assert processes["beat"].startswith("celery -A config -q beat ")
    assert "collectstatic --no-input" in processes["release"]
    assert "migrate --no-input" in processes["release"]
    assert (ROOT / "config" / "gunicorn.py").exists()


def test_every_production_variable_is_documented_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Production deploy") :]
    for line in (DEPLOY / "production.env.example").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            assert f"`{line.split('=', 1)[0]}`" in section


def test_check_deploy_is_clean_with_the_production_variables(tmp_path):
    # given deploy/production.env.example, filled in
    env = _production_env(tmp_path)
    # when
    checked = _manage(env, "check", "--deploy", "--fail-level", "WARNING")
    # then nothing at all
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout == "System check identified no issues (0 silenced).\n"


def test_check_deploy_with_a_placeholder_left_names_the_variable_without_a_traceback(tmp_path):
    # given deploy/production.env.example copied as is: every <...> still in place
    env: dict[str, str] = {"PATH": "/usr/bin:/bin"}
    for line in (DEPLOY / "production.env.example").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, value = line.partition("=")
            env[name] = value
    env["SERENITY_VAR_DIR"] = str(tmp_path)
    # when
    checked = _manage(env, "check", "--deploy")
    # then one line naming the first variable still holding one (SPEC §13.6)
    assert checked.returncode == 1
    assert checked.stdout == ""
    assert checked.stderr == (
        "error: SECRET_KEY still holds a placeholder (<...>) of deploy/production.env: "
        "replace it with the real value; refusing to start.\n"
    )


def _procfile() -> dict[str, str]:
    return dict(
        line.split(": ", 1)
        for line in (DEPLOY / "Procfile").read_text().splitlines()
        if line and not line.startswith("#")
    )


def readme_production_commands() -> list[str]:
    """The shell lines of the README's production run, in order, without their comments."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Production deploy") :]
    block = section[section.index("```sh\n") + 6 :]
    block = block[: block.index("```")]
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


def test_web_listens_where_only_the_proxy_reaches_it():
    # then gunicorn is on loopback, and the file declares the one proxy in front of it
    assert "--bind 127.0.0.1:${PORT:-8000}" in _procfile()["web"]
    assert "0.0.0.0" not in (DEPLOY / "Procfile").read_text()
    example = (DEPLOY / "production.env.example").read_text().splitlines()
    assert "SERENITY_NUM_PROXIES=1" in example


def test_the_readme_runs_release_to_its_end_before_the_processes_with_the_env_file():
    # when
    commands = readme_production_commands()
    # then: the secrets go to the git-ignored copy of the template, the database is created
    # before release runs alone (`honcho run`), the first org, token and admin follow, and only
    # then the long-running processes start
    release = f"honcho -e deploy/production.env run sh -c {shlex.quote(_procfile()['release'])}"
    assert commands[1] == ("install -m 600 deploy/production.env.example deploy/production.env")
    assert commands.index(release) > commands.index(
        "runuser -u postgres -- createdb --owner serenity serenity"
    )
    order = ["create_org", "create_api_token", "createsuperuser"]
    positions = [next(i for i, c in enumerate(commands) if name in c) for name in order]
    assert commands.index(release) < positions[0] < positions[1] < positions[2]
    assert commands[-1] == (
        "honcho -e deploy/production.env -f deploy/Procfile start -p 8000 web worker webhooks beat"
    )


def test_the_production_section_runs_as_root_without_sudo_and_creates_its_user():
    # given the README's production section (SPEC §13.6: it assumed sudo and a user no step made)
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Production deploy") : readme.index("## Architecture")]
    commands = readme_production_commands()
    # then no line (nor the systemd paragraph) runs sudo
    assert re.findall(r"\bsudo [-\w]", section) == []
    # and the user the units run as is created before anything runs, once however often run
    units = [_unit(p.name) for p in sorted((DEPLOY / "systemd").glob("*.service"))]
    assert {user for unit in units for user in unit["Service"]["User"]} == {"serenity"}
    useradd = next(c for c in commands if "useradd" in c)
    assert useradd == (
        "id -u serenity >/dev/null 2>&1 || useradd --system --user-group --no-create-home "
        "--home-dir /var/lib/serenity --shell /usr/sbin/nologin serenity"
    )
    assert commands.index(useradd) < next(i for i, c in enumerate(commands) if "honcho" in c)


def test_git_ignores_the_secrets_file_and_tracks_its_template():
    # when
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "deploy/production.env"], cwd=ROOT, check=False
    )
    tracked = subprocess.run(
        ["git", "ls-files", "--error-unmatch", "deploy/production.env.example"],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    # then
    assert ignored.returncode == 0
    assert tracked.returncode == 0


def _unit(name: str) -> dict[str, dict[str, list[str]]]:
    """A systemd unit's sections, each key with all its values (ExecStart= may repeat)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for line in (DEPLOY / "systemd" / name).read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key, []).append(value.replace("%%", "%"))  # systemd's escape
    return sections


def _procfile_command(name: str) -> str:
    """The Procfile's command with its defaults (PORT 8000, WEB_CONCURRENCY 2, …) filled in."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", _procfile()[name])


def test_each_systemd_unit_runs_the_procfiles_command_with_the_secrets_file():
    # when
    units = {
        name: _unit(f"serenity-{name}.service")
        for name in ("release", "web", "worker", "webhooks", "beat")
    }
    # then
    assert sorted(p.name for p in (DEPLOY / "systemd").iterdir()) == [
        "serenity-beat.service",
        "serenity-release.service",
        "serenity-web.service",
        "serenity-webhooks.service",
        "serenity-worker.service",
    ]
    for name in ("web", "worker", "webhooks", "beat"):
        service = units[name]["Service"]
        # the venv's executable by its absolute path: systemd does not search the unit's PATH
        assert service["ExecStart"] == [VENV_BIN + _procfile_command(name)]
        assert units[name]["Unit"]["Requires"] == ["serenity-release.service"]
        assert "serenity-release.service" in units[name]["Unit"]["After"][0].split()
        assert units[name]["Install"]["WantedBy"] == ["multi-user.target"]
    release = units["release"]["Service"]
    assert release["Type"] == ["oneshot"]
    assert " && ".join(release["ExecStart"]) == _procfile_command("release").replace(
        "python ", VENV_BIN + "python "
    )
    for unit in units.values():
        service = unit["Service"]
        assert service["EnvironmentFile"] == ["/opt/serenity/deploy/production.env"]
        assert service["WorkingDirectory"] == ["/opt/serenity"]
        assert service["StateDirectory"] == ["serenity"]
        assert service["User"] == ["serenity"]
    example = (DEPLOY / "production.env.example").read_text().splitlines()
    assert "SERENITY_VAR_DIR=/var/lib/serenity" in example  # StateDirectory=serenity


def test_the_nginx_snippet_sets_the_headers_the_service_believes():
    # when
    conf = (DEPLOY / "nginx" / "serenity.conf").read_text()
    directives = {" ".join(line.split()).rstrip(";") for line in conf.splitlines()}
    # then: one proxy appending X-Forwarded-For (SERENITY_NUM_PROXIES=1), the scheme in
    # SECURE_PROXY_SSL_HEADER, the host for ALLOWED_HOSTS, to where `web` listens
    example = (DEPLOY / "production.env.example").read_text().splitlines()
    assert "SERENITY_TLS=true" in example  # X-Forwarded-Proto is trusted with TLS on
    assert {
        "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for",
        "proxy_set_header X-Forwarded-Proto $scheme",
        "proxy_set_header Host $host",
        "proxy_pass http://serenity",
        "server 127.0.0.1:8000",
        "listen 443 ssl http2",
    } <= directives
    assert "--bind 127.0.0.1:8000" in _procfile_command("web")


def test_gunicorns_control_socket_lives_in_the_var_dir(tmp_path):
    # given (a folder of the test's own: the suite leaves none behind)
    code = "import runpy; print(runpy.run_path('config/gunicorn.py')['control_socket'])"
    env = {**os.environ, "SERENITY_VAR_DIR": str(tmp_path / "var")}
    # when
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    # then
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines()[-1] == f"{tmp_path}/var/gunicorn.ctl"


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="no systemd-analyze here")
def test_the_systemd_units_pass_systemd_analyze_verify(tmp_path):
    # given the README's layout under a folder of the test's own: /opt/serenity, its venv's
    # executables (this venv's), and the units with that folder for /opt/serenity
    checkout = tmp_path / CHECKOUT.lstrip("/")
    (checkout / ".venv" / "bin").mkdir(parents=True)
    for name in ("python", "celery", "gunicorn"):
        (checkout / ".venv" / "bin" / name).symlink_to(Path(sys.executable).parent / name)
    units = tmp_path / "units"
    units.mkdir()
    for unit in sorted((DEPLOY / "systemd").glob("*.service")):
        (units / unit.name).write_text(unit.read_text().replace(CHECKOUT, str(checkout)))
    # when
    verified = subprocess.run(
        [str(SYSTEMD_ANALYZE), "verify", *sorted(str(p) for p in units.iterdir())],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # then not a word about them (found from outside: "Command celery is not executable")
    said = verified.stdout + verified.stderr
    assert verified.returncode == 0, said
    assert [line for line in said.splitlines() if "serenity" in line] == []


@pytest.mark.skipif(NGINX is None, reason="no nginx here (.ci/run installs it)")
def test_the_nginx_snippet_passes_nginx_t(tmp_path):
    # given the snippet as the README says (server_name and the certificate paths set: a
    # self-signed certificate of the test's own), inside an http block as Debian's nginx.conf
    # includes sites-enabled/
    key, cert = tmp_path / "privkey.pem", tmp_path / "fullchain.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=serenity.example.com", "-keyout", str(key), "-out", str(cert)),
        ],
        capture_output=True,
        timeout=60,
        check=True,
    )
    live = "/etc/letsencrypt/live/serenity.example.com/"
    site = (DEPLOY / "nginx" / "serenity.conf").read_text()
    assert f"{live}fullchain.pem" in site and f"{live}privkey.pem" in site
    site = site.replace(f"{live}fullchain.pem", str(cert)).replace(f"{live}privkey.pem", str(key))
    # nginx -t binds the ports it listens on: free ones of the test's own, for 80 and 443 (so
    # that it runs without root, beside whatever holds 80 here)
    ports = {"80": str(free_port()), "443": str(free_port())}
    site = re.sub(
        r"(listen (?:\[::\]:)?)(80|443)\b", lambda m: m.group(1) + ports[m.group(2)], site
    )
    (tmp_path / "site.conf").write_text(site)
    (tmp_path / "nginx.conf").write_text(
        f"pid {tmp_path}/nginx.pid;\n"
        f"error_log {tmp_path}/error.log;\n"
        "events {}\n"
        "http {\n"
        f"    client_body_temp_path {tmp_path}/body;\n"
        f"    proxy_temp_path {tmp_path}/proxy;\n"
        f"    access_log {tmp_path}/access.log;\n"
        f"    include {tmp_path}/site.conf;\n"
        "}\n"
    )
    # when
    tested = subprocess.run(
        [
            *(str(NGINX), "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")),
            *("-e", str(tmp_path / "error.log")),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # then (found from outside: `http2 on;` is unknown to Debian 12's nginx 1.22)
    assert tested.returncode == 0, tested.stderr
    assert "test is successful" in tested.stderr
    assert "[warn]" not in tested.stderr and "[emerg]" not in tested.stderr


def test_the_readme_states_the_connection_budget_of_the_procfiles_processes():
    # given the Procfile's sizes: each thread serving a request or running a step holds a
    # connection; each worker's main process and beat one more (SPEC §13.6)
    web = _procfile_command("web")
    threads = {
        name: _number(r" -c (\d+)", _procfile_command(name)) for name in ("worker", "webhooks")
    }
    workers, api_threads = _number(r"--workers (\d+)", web), _number(r"--threads (\d+)", web)
    budget = workers * api_threads + sum(t + 1 for t in threads.values()) + 1
    # when
    readme = (ROOT / "README.md").read_text()
    section = " ".join(readme[readme.index("## Production deploy") :].split())
    # then the README says that number, how to pool, and what a refused connection answers
    assert f"`web` {workers} workers \N{MULTIPLICATION SIGN} {api_threads} threads" in section
    assert f"that is **{budget}**" in section
    assert "PgBouncer in transaction mode" in section
    assert "`DB_PREPARED_STATEMENTS=false`" in section
    assert "503 `databaseUnavailable` with `Retry-After: 5`" in section


def _number(pattern: str, text: str) -> int:
    found = re.search(pattern, text)
    assert found is not None, (pattern, text)
    return int(found[1])
