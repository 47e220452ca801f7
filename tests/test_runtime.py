"""`config.runtime.ready_to_serve`: the garbage-collector tuning of the server processes."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from django.urls import clear_url_caches, get_resolver, resolve

from api.health import healthz
from config import runtime


@pytest.fixture
def pristine_collector(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    threshold = gc.get_threshold()
    gc.unfreeze()
    monkeypatch.setattr(runtime, "_done", False)
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def test_ready_to_serve_freezes_the_startup_heap_and_raises_the_young_threshold(
    pristine_collector,
):
    # given the settings' defaults
    _, older, oldest = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    # when
    runtime.ready_to_serve()
    # then
    frozen = gc.get_freeze_count()
    assert frozen > 10_000  # the test process's modules, classes and settings at least
    assert gc.get_threshold() == (10_000, older, oldest)
    # and a second call (gunicorn and Celery may both reach it) changes nothing: no threshold
    # set again, no second freeze (which would take in these new objects; the count itself
    # may drop by a few, as frozen objects can still be freed)
    gc.set_threshold(700, older, oldest)
    newcomers = [[index] for index in range(5_000)]  # lists: always tracked by the collector
    runtime.ready_to_serve()
    assert gc.get_threshold() == (700, older, oldest)
    assert gc.get_freeze_count() <= frozen
    assert len(newcomers) == 5_000


def test_the_young_threshold_is_configurable(pristine_collector, settings):
    # given
    settings.SERVER_GC_THRESHOLD = 2500
    # when
    runtime.ready_to_serve()
    # then
    assert gc.get_threshold()[0] == 2500
    assert gc.get_freeze_count() > 0


def test_the_collector_is_left_as_python_configures_it_when_turned_off(
    pristine_collector, settings
):
    # given
    settings.SERVER_GC_FREEZE = False
    before = gc.get_threshold()
    # when
    runtime.ready_to_serve()
    # then
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before


@pytest.mark.parametrize("freeze", [True, False])
def test_the_iso_tables_are_loaded_before_the_first_request(
    pristine_collector, monkeypatch, settings, freeze
):
    # given
    import serenity.slices

    settings.SERVER_GC_FREEZE = freeze
    loads: list[bool] = []
    monkeypatch.setattr(serenity.slices, "load_iso_tables", lambda: loads.append(True))
    # when: twice (a prefork child may run it again)
    runtime.ready_to_serve()
    runtime.ready_to_serve()
    # then
    assert loads == [True]


def test_load_iso_tables_loads_pycountrys_tables():
    # given
    import pycountry

    from serenity.slices import load_iso_tables

    # when
    load_iso_tables()
    # then
    assert pycountry.countries._is_loaded and pycountry.languages._is_loaded


def test_a_web_server_loads_its_urlconf_before_its_first_request(pristine_collector):
    # given a URLconf not loaded yet
    clear_url_caches()
    assert not get_resolver()._populated
    # when
    runtime.ready_to_serve(web=True)
    # then: the views are imported and the reverse lookups filled
    assert get_resolver()._populated
    assert resolve("/healthz").func is healthz


def test_a_worker_does_not_load_the_urlconf(pristine_collector):
    # given
    clear_url_caches()
    # when
    runtime.ready_to_serve()
    # then
    assert not get_resolver()._populated
