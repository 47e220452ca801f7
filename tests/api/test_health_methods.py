"""The token-free routes answer GET (and HEAD) only; another method is 405 in the envelope
(found by schemathesis: TRACE /healthz answered 200)."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
@pytest.mark.parametrize("method", ["post", "put", "delete", "trace"])
def test_other_methods_are_405(db, path, method):
    # when (CSRF enforced, as for a real client)
    response = getattr(Client(enforce_csrf_checks=True), method)(path)
    # then
    assert response.status_code == 405
    assert response.json() == {"error": "methodNotAllowed", "message": "Method not allowed."}
    assert response.headers["Allow"] == "GET, HEAD"


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
def test_get_and_head_answer(anonymous, db, path):
    # then
    assert anonymous.get(path).status_code == 200
    assert anonymous.head(path).status_code == 200
