"""The simulator's own control routes: reset, seed parents and tokens, configure, script
faults, read the state and the logs, health."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from provisioning.simulator.control.routing import ControlRoute
from provisioning.simulator.wire import SimulatorConfigError, _json, _Response

if TYPE_CHECKING:
    from provisioning.simulator.control.api import ControlAPI


def _reset(sim: ControlAPI, params: dict[str, str], data: Any) -> _Response:
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise SimulatorConfigError("reset body must be a JSON object")
    parents = data.get("parentWorkspaces")
    if parents is not None and (
        not isinstance(parents, list) or not all(isinstance(item, str) and item for item in parents)
    ):
        raise SimulatorConfigError("parentWorkspaces must be a list of non-empty strings")
    token = data.get("token")
    if token is not None and (not isinstance(token, str) or not token):
        raise SimulatorConfigError("token must be a non-empty string")
    sim.reset(parents=parents, token=token)
    return _json(200, {"parentWorkspaces": sim.state()["parentWorkspaces"]})


def _add_parent(sim: ControlAPI, params: dict[str, str], data: Any) -> _Response:
    if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not data["id"]:
        raise SimulatorConfigError("body must be {id: <non-empty string>}")
    title = data.get("title")
    if title is not None and not isinstance(title, str):
        raise SimulatorConfigError("title must be a string")
    sim.add_parent(data["id"], title)
    return _json(200, {"id": data["id"]})


def _add_token(sim: ControlAPI, params: dict[str, str], data: Any) -> _Response:
    if not isinstance(data, dict) or not isinstance(data.get("token"), str):
        raise SimulatorConfigError("body must be {token: <non-empty string>}")
    if not data["token"] or data["token"] != data["token"].strip():
        raise SimulatorConfigError("body must be {token: <non-empty string>}")
    sim.add_token(data["token"])
    return _json(200, {"token": data["token"]})


def _get_config(sim: ControlAPI, params: dict[str, str], data: Any) -> _Response:
    return _json(200, sim.config())


def _set_config(sim: ControlAPI, params: dict[str, str], data: Any) -> _Response:
    return _json(200, sim.configure(data if data is not None else {}))


def _list_faults(sim: ControlAPI, params: dict[str, str], data: Any) -> _Response:
    return _json(200, sim.faults())


def _add_fault(sim: ControlAPI, params: dict[str, str], data: Any) -> _Response:
    return _json(201, sim.add_fault(data if data is not None else {}))


def _clear_faults(sim: ControlAPI, params: dict[str, str], data: Any) -> _Response:
    sim.clear_faults()
    return _json(200, [])


def _state(sim: ControlAPI, params: dict[str, str], data: Any) -> _Response:
    return _json(200, sim.state())


def _requests(sim: ControlAPI, params: dict[str, str], data: Any) -> _Response:
    return _json(200, sim.requests_log())


def _exchanges(sim: ControlAPI, params: dict[str, str], data: Any) -> _Response:
    return _json(200, sim.exchanges())


def _health(sim: ControlAPI, params: dict[str, str], data: Any) -> _Response:
    return _json(200, {"status": "ok"})


ROUTES = [
    ControlRoute("reset", {"POST": _reset}),
    ControlRoute("parents", {"POST": _add_parent}),
    ControlRoute("tokens", {"POST": _add_token}),
    ControlRoute("config", {"GET": _get_config, "POST": _set_config}),
    ControlRoute("faults", {"GET": _list_faults, "POST": _add_fault, "DELETE": _clear_faults}),
    ControlRoute("state", {"GET": _state}),
    ControlRoute("requests", {"GET": _requests}),
    ControlRoute("exchanges", {"GET": _exchanges}),
    ControlRoute("health", {"GET": _health}),
]
