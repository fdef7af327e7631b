"""The embedded API's Python face validates fields like a strict request: an unknown field
is refused by default.

``EmbeddedAPI.create``, ``replace`` and ``patch`` refuse a field the kind's
schema does not declare with the API server's strict decoding error, naming
each field, and store nothing; ``field_validation`` (per call or per API) is
``Warn`` (logged, pruned) or ``Ignore`` (pruned silently). The engine's own
writes, through ``shared()``, are pruned, as a real server prunes them for the
official client, which names no ``fieldValidation``. The HTTP face keeps
applying each request's own ``fieldValidation``.
"""

from __future__ import annotations

import http.client
import json
import logging
from typing import Any

import pytest

from lifecycle.kube.errors import BadRequest
from lifecycle.kube.resources import ResourceType
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.http import APIServerHTTP

SCHEMA = {"type": "object", "properties": {
    "spec": {"type": "object", "properties": {
        "size": {"type": "integer"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}},
    "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}
WIDGET = ResourceType("example.test", "v1", "Widget", "widgets", True, schema=SCHEMA)
REFUSED = ('Widget in version "v1" cannot be handled as a Widget: strict decoding error: '
           'unknown field "spec.sise"')


def widget(name: str = "w", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.test/v1", "kind": "Widget",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"size": 1, **spec}}


def api_with_widgets(**options: Any) -> EmbeddedAPI:
    api = EmbeddedAPI(**options)
    api.register(WIDGET)
    return api


def test_create_refuses_an_unknown_field_names_it_and_stores_nothing() -> None:
    api = api_with_widgets()
    with pytest.raises(BadRequest) as refused:
        api.create(widget(sise=3, extra={"a": 1}))
    assert refused.value.status == 400
    assert str(refused.value).startswith(REFUSED + ', unknown field "spec.extra"')
    assert 'field_validation="Ignore"' in str(refused.value)  # says how to opt out
    assert api.list("example.test/v1", "Widget", "default")[0] == []
    # declared maps and preserved subtrees take any key; the object's metadata is checked
    made = api.create(widget(labels={"any": "x"}, free={"any": {"thing": 1}}))
    assert made["spec"]["free"] == {"any": {"thing": 1}}
    with pytest.raises(BadRequest, match=r'unknown field "metadata\.lables"'):
        api.create({**widget("v"), "metadata": {"name": "v", "namespace": "default",
                                               "lables": {"a": "b"}}})


def test_replace_and_patch_refuse_and_keep_the_stored_object() -> None:
    api = api_with_widgets()
    stored = api.create(widget())
    with pytest.raises(BadRequest, match=REFUSED):
        api.replace({**stored, "spec": {"size": 2, "sise": 3}})
    with pytest.raises(BadRequest, match=REFUSED):
        api.patch("example.test/v1", "Widget", "default", "w", {"spec": {"sise": 3}})
    assert api.get("example.test/v1", "Widget", "default", "w") == stored
    # a status the status subresource owns is not the main resource's to check
    changed = api.replace({**stored, "spec": {"size": 2}, "status": {"whatever": 1}})
    assert changed["spec"] == {"size": 2}
    patched = api.patch("example.test/v1", "Widget", "default", "w", {"spec": {"size": 3}})
    assert patched["spec"]["size"] == 3


def test_a_status_patch_is_checked_against_the_status_schema() -> None:
    api = api_with_widgets()
    api.create(widget())
    with pytest.raises(BadRequest, match=r'unknown field "status\.phaze"'):
        api.patch("example.test/v1", "Widget", "default", "w", {"status": {"phaze": "Up"}},
                  subresource="status")
    done = api.patch("example.test/v1", "Widget", "default", "w", {"status": {"phase": "Up"}},
                     subresource="status")
    assert done["status"] == {"phase": "Up"}


def test_the_opt_outs_per_call_and_per_api(caplog: pytest.LogCaptureFixture) -> None:
    api = api_with_widgets()
    quiet = api.create(widget(sise=3), field_validation="Ignore")
    assert quiet["spec"] == {"size": 1}
    loose = api_with_widgets(field_validation="Warn")
    with caplog.at_level(logging.WARNING, logger="lifecycle.sim.apiserver"):
        made = loose.create(widget(sise=3))
    assert made["spec"] == {"size": 1}
    assert "Widget: unknown field 'spec.sise' is pruned" in caplog.text
    assert api_with_widgets(field_validation="Ignore").create(widget(sise=3))["spec"] == {
        "size": 1}
    with pytest.raises(BadRequest):  # a call may be stricter than its API
        loose.create(widget("x", sise=3), field_validation="Strict")


def test_an_unknown_mode_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="field_validation must be one of Strict, Warn, Ignore"):
        EmbeddedAPI(field_validation="strict")
    with pytest.raises(ValueError, match="not 'Loose'"):
        api_with_widgets().create(widget(), field_validation="Loose")


def test_the_engines_view_prunes_as_a_real_server_does_for_its_client() -> None:
    api = api_with_widgets()
    view = api.shared()
    made = view.create(widget(sise=3))
    assert made["spec"] == {"size": 1}
    replaced = view.replace({**made, "spec": {"size": 2, "sise": 4}})
    assert replaced["spec"] == {"size": 2}
    with pytest.raises(BadRequest, match=REFUSED):
        view.create(widget("v", sise=3), field_validation="Strict")


def test_http_requests_keep_their_own_field_validation() -> None:
    api = api_with_widgets()  # Strict for Python callers
    with APIServerHTTP(api) as face:
        conn = http.client.HTTPConnection("127.0.0.1", face.port, timeout=10)
        path = "/apis/example.test/v1/namespaces/default/widgets"
        conn.request("POST", path, body=json.dumps(widget(sise=3)),
                     headers={"Content-Type": "application/json"})
        answer = conn.getresponse()
        body = json.loads(answer.read())
        assert answer.status == 201, body  # no fieldValidation: Warn, as a real server
        assert answer.getheader("Warning") == '299 - "unknown field \\"spec.sise\\""'
        assert body["spec"] == {"size": 1}
        conn.request("POST", path + "?fieldValidation=Strict", body=json.dumps(
            widget("v", sise=3)), headers={"Content-Type": "application/json"})
        answer = conn.getresponse()
        assert answer.status == 400 and REFUSED in json.loads(answer.read())["message"]
        conn.close()
    api.close()
