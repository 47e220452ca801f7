"""The simulator's control routes are a table (provisioning/simulator/control/): a module of routes
of its own plugs in with a `ControlRoute` whose `{name}` segments reach its handler."""

from __future__ import annotations

import json

from provisioning.simulator import SemrushSimulator
from provisioning.simulator.control import ROUTES
from provisioning.simulator.control.routing import ControlRoute, handle_control
from provisioning.simulator.wire import _json


def _answer(routes, method, path, body=b""):
    response = handle_control(SemrushSimulator(port=0), routes, method, path, body)
    return response.status, json.loads(response.body)


def _echo(sim, params, data):
    return _json(200, {"params": params, "data": data})


def test_a_route_with_a_segment_hands_the_segment_and_the_body_to_its_handler():
    # given a module's route beside the simulator's own
    routes = (*ROUTES, ControlRoute("things/{id}", {"POST": _echo}))
    # when / then
    assert _answer(routes, "POST", "/__sim/things/t-1", b'{"a": 1}') == (
        200,
        {"params": {"id": "t-1"}, "data": {"a": 1}},
    )
    assert _answer(routes, "GET", "/__sim/things/t-1") == (405, {"message": "method not allowed"})
    assert _answer(routes, "POST", "/__sim/things/t-1/more") == (
        404,
        {"message": "unknown control route /__sim/things/t-1/more"},
    )
    # the simulator's own routes still answer
    assert _answer(routes, "GET", "/__sim/health") == (200, {"status": "ok"})


def test_a_segment_never_matches_a_literal_route_by_regex():
    # given a path with regex characters: matched literally
    routes = (ControlRoute("a.b", {"GET": _echo}),)
    # then
    assert _answer(routes, "GET", "/__sim/axb")[0] == 404
    assert _answer(routes, "GET", "/__sim/a.b") == (200, {"params": {}, "data": None})
