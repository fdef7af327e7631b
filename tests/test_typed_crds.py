"""Typed CRDs from a kind's declaration, and the embedded API enforcing them.

A user's kind with a ``Literal`` field, an ``Enum``, a bounded integer, a
pattern, documented fields and an immutable one gets a CRD whose schema says
all of it in plain text; the embedded API (in process and through kubectl)
refuses an out-of-enum or out-of-range value with a 422 naming the field and a
change of an immutable field; CEL rules run through cel-python; an unsupported
type is an error naming the field, from the library and from ``lifecycle crds``.
"""

from __future__ import annotations

import datetime
import enum
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Literal

import attrs
import pytest
import yaml

from lifecycle.core.kind import Kind, spec_field
from lifecycle.kube.errors import Invalid
from lifecycle.machines.managed import ManagedResourceMachine
from lifecycle.schema.crds import SchemaError, check_crd, crd, schema_for_type
from lifecycle.schema.openapi import plain_text
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.crds import apply_crd

#: Schema errors after which a real server does not evaluate CEL rules.
_BLOCKING = ("FieldValueNotSupported", "FieldValueRequired", "FieldValueTooLong",
             "FieldValueTooMany", "FieldValueTypeInvalid")


class Retention(enum.Enum):
    """How long messages are kept."""

    DAY = "1d"
    WEEK = "7d"


@attrs.frozen
class TopicParameters:
    """A topic on the broker, as ``spec.forProvider`` declares it.

    This second paragraph is not part of the schema's description.
    """

    partitions: int = spec_field(default=1, minimum=1, maximum=16384,
                                 description="How many partitions the topic has.")
    cleanup: Literal["delete", "compact"] = "delete"
    """How old messages go: ``delete`` after the retention, ``compact`` by key
    (see :class:`~broker.Topic`)."""
    #: How long messages are kept;
    #: one day or one week.
    retention: Retention = Retention.WEEK
    region: str = spec_field(default="eu-1", immutable=True, pattern=r"^[a-z]+-[0-9]$",
                             description="Where the topic lives. Set once.")
    owner: str | None = spec_field(default=None, immutable=True, max_length=63)
    labels: dict[str, str] = attrs.Factory(dict)


class TopicMachine(ManagedResourceMachine):
    """The standard lifecycle (this docstring is about the engine, not the kind)."""


Topic = Kind(group="broker.example.org", version="v1", kind="Topic", plural="topics",
             machine=TopicMachine, parameters=TopicParameters,
             description="A topic on the message broker, created and kept as the spec says.")


def for_provider(kind: Kind = Topic) -> dict[str, Any]:
    schema = crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema["properties"]["spec"]["properties"]["forProvider"]


# ------------------------------------------------------------------ the schema
def test_a_literal_field_is_an_enum_and_an_enum_class_gives_its_values() -> None:
    fields = for_provider()["properties"]
    assert fields["cleanup"]["type"] == "string"
    assert fields["cleanup"]["enum"] == ["delete", "compact"]
    assert fields["cleanup"]["default"] == "delete"
    assert fields["retention"] == {"type": "string", "enum": ["1d", "7d"], "default": "7d",
                                   "description": "How long messages are kept; one day or "
                                                  "one week."}
    assert schema_for_type(Literal[1, 2, 3]) == {"type": "integer", "enum": [1, 2, 3]}
    assert schema_for_type(Literal["a", None]) == {"type": "string", "enum": ["a"],
                                                   "nullable": True}
    assert schema_for_type(Literal["a"] | None)["nullable"] is True


def test_descriptions_come_from_metadata_docstrings_and_comments_as_plain_text() -> None:
    schema = for_provider()
    fields = schema["properties"]
    assert schema["description"] == "A topic on the broker, as spec.forProvider declares it."
    assert fields["partitions"]["description"] == "How many partitions the topic has."
    assert fields["cleanup"]["description"] == (
        "How old messages go: delete after the retention, compact by key (see Topic).")
    assert "description" not in fields["labels"]
    text = yaml.safe_dump(crd(Topic))
    assert "``" not in text and ":class:" not in text


def test_plain_text_takes_out_restructured_text_markup() -> None:
    assert plain_text("The ``spec.forProvider`` of :class:`~a.b.Kind`.") == (
        "The spec.forProvider of Kind.")
    assert plain_text(":attr:`name <a.b.c>` and :func:`a.b.c` and `x` and **bold**") == (
        "name and a.b.c and x and bold")
    assert plain_text("One\n    line.\n\n    Two::\n") == "One line.\n\nTwo:"


def test_bounds_patterns_lengths_and_immutable_fields_are_declared() -> None:
    fields = for_provider()["properties"]
    assert (fields["partitions"]["minimum"], fields["partitions"]["maximum"]) == (1, 16384)
    assert fields["region"]["pattern"] == r"^[a-z]+-[0-9]$"
    assert fields["region"]["x-kubernetes-validations"] == [
        {"rule": "self == oldSelf", "message": "region is immutable"}]
    assert fields["owner"]["maxLength"] == 63
    # an optional immutable field may not be added or removed either
    assert for_provider()["x-kubernetes-validations"] == [
        {"rule": "has(self.owner) == has(oldSelf.owner)", "message": "owner is immutable"}]
    assert check_crd(crd(Topic)) == []


def test_the_crd_says_what_the_kind_manages_not_the_machine_docstring() -> None:
    schema = crd(Topic)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert schema["description"] == Topic.description
    plain = attrs.evolve(Topic, description="")
    described = crd(plain)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"]
    assert described.startswith("Topic: an external resource managed through this object")
    assert "engine" not in described


def test_an_unsupported_type_is_an_error_naming_the_field() -> None:
    @attrs.frozen
    class Dated:
        created_at: datetime.datetime = attrs.field(alias="createdAt")

    with pytest.raises(SchemaError) as refused:
        crd(attrs.evolve(Topic, parameters=Dated))
    assert str(refused.value).startswith(
        "spec.forProvider.createdAt (test_an_unsupported_type_is_an_error_naming_the_field."
        "<locals>.Dated.created_at): no OpenAPI schema for type datetime.datetime (supported: ")
    assert isinstance(refused.value, TypeError)  # callers catching TypeError still do

    @attrs.frozen
    class Mixed:
        choice: Literal["a", 1] = "a"

    with pytest.raises(SchemaError, match=r"spec.forProvider.choice .*must all be strings"):
        crd(attrs.evolve(Topic, parameters=Mixed))

    @attrs.frozen
    class Misplaced:
        name: str = spec_field(default="x", minimum=1)

    with pytest.raises(SchemaError, match=r"spec.forProvider.name .*minimum applies to integer"):
        crd(attrs.evolve(Topic, parameters=Misplaced))


USER_MODULE = '''
from typing import Literal
import datetime
import attrs
from lifecycle.core.kind import Kind, spec_field
from lifecycle.machines.managed import ManagedResourceMachine


@attrs.frozen
class Params:
    """What the topic should be."""

    partitions: int = spec_field(default=1, minimum=1, maximum=16384,
                                 description="Partitions of the topic.")
    cleanup: Literal["delete", "compact"] = "delete"


@attrs.frozen
class Dated:
    created: datetime.datetime


class M(ManagedResourceMachine):
    """Machine."""


Topic = Kind(group="broker.example.org", version="v1", kind="Topic", plural="topics",
             machine=M, parameters=Params)
Broken = Kind(group="broker.example.org", version="v1", kind="Broken", plural="brokens",
              machine=M, parameters=Dated)
'''


def _crds_cli(tmp_path: Path, spec: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "usertopic.py").write_text(textwrap.dedent(USER_MODULE))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    return subprocess.run([sys.executable, "-m", "lifecycle", "crds", "--kinds", spec],
                          capture_output=True, text=True, env=env, timeout=120)


def test_lifecycle_crds_prints_a_literal_field_and_names_an_unsupported_one(
        tmp_path: Path) -> None:
    done = _crds_cli(tmp_path, "usertopic:Topic")
    assert done.returncode == 0, done.stderr
    topic = [d for d in yaml.safe_load_all(done.stdout) if d["spec"]["names"]["kind"] == "Topic"]
    fields = topic[0]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
        "spec"]["properties"]["forProvider"]["properties"]
    assert fields["cleanup"]["enum"] == ["delete", "compact"]
    assert fields["partitions"]["description"] == "Partitions of the topic."
    broken = _crds_cli(tmp_path, "usertopic:Broken")
    assert broken.returncode == 2, broken.stderr
    assert broken.stderr.strip().splitlines() == [
        "lifecycle crds: spec.forProvider.created (Dated.created): no OpenAPI schema for type "
        "datetime.datetime (supported: str, int, float, bool, Literal[...], an enum.Enum, "
        "X | None, list[X], tuple[X, ...], set[X], dict[str, X], an attrs class, Any)"]


# ------------------------------------------------------------- the embedded API
def topic(called: str = "t", **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "broker.example.org/v1", "kind": "Topic",
            "metadata": {"name": called, "namespace": "default"},
            "spec": {"forProvider": fields}}


@pytest.fixture
def api() -> EmbeddedAPI:
    served = EmbeddedAPI()
    apply_crd(served, crd(Topic))
    return served


@pytest.mark.parametrize(("fields", "field", "text"), [
    ({"cleanup": "shred"}, "spec.forProvider.cleanup",
     'Unsupported value: "shred": supported values: "delete", "compact"'),
    ({"retention": "1y"}, "spec.forProvider.retention", 'Unsupported value: "1y"'),
    ({"partitions": 0}, "spec.forProvider.partitions", "should be greater than or equal to 1"),
    ({"partitions": 20000}, "spec.forProvider.partitions", "should be less than or equal to "
                                                           "16384"),
    ({"region": "EU"}, "spec.forProvider.region", "should match"),
    ({"owner": "x" * 64}, "spec.forProvider.owner", "may not be more than 63 bytes"),
])
def test_the_api_refuses_a_bad_value_naming_the_field(api: EmbeddedAPI, fields: dict[str, Any],
                                                     field: str, text: str) -> None:
    with pytest.raises(Invalid) as refused:
        api.create(topic(**fields))
    assert refused.value.status == 422
    # as a real server: the CEL rules are not evaluated after a blocking schema error (a
    # value not in its enum, too long, of the wrong type, a required field missing), and a
    # cause says so (field <nil>) because the schema has rules; a bound or a pattern does
    # not block them (tests/test_differential.py compares this with kube-apiserver)
    blocked = any(c["reason"] in _BLOCKING for c in refused.value.causes)
    # causes are ordered by field, as kube-apiserver orders them: <nil> first
    assert [c["field"] for c in refused.value.causes] == (
        ["<nil>", field] if blocked else [field])
    assert text in str(refused.value)


def test_an_immutable_field_cannot_change_and_others_can(api: EmbeddedAPI) -> None:
    stored = api.create(topic(region="eu-1", partitions=3))
    stored["spec"]["forProvider"]["partitions"] = 6  # a mutable field changes
    stored = api.replace(stored)
    stored["metadata"]["labels"] = {"team": "a"}  # an unrelated write passes the rule too
    stored = api.replace(stored)
    changed = {**stored, "spec": {"forProvider": {**stored["spec"]["forProvider"],
                                                  "region": "us-1"}}}
    with pytest.raises(Invalid) as refused:
        api.replace(changed)
    assert refused.value.causes == [{"reason": "FieldValueInvalid",
                                     "field": "spec.forProvider.region",
                                     "message": 'Invalid value: "string": region is immutable'}]
    assert str(refused.value) == ('Topic.broker.example.org "t" is invalid: '
                                  'spec.forProvider.region: Invalid value: "string": region '
                                  'is immutable')


def test_an_optional_immutable_field_cannot_be_added_or_removed(api: EmbeddedAPI) -> None:
    stored = api.create(topic())
    added = {**stored, "spec": {"forProvider": {**stored["spec"]["forProvider"], "owner": "me"}}}
    with pytest.raises(Invalid, match="owner is immutable"):
        api.replace(added)
    owned = api.create(topic("o", owner="me"))
    removed = {**owned, "spec": {"forProvider": {
        k: v for k, v in owned["spec"]["forProvider"].items() if k != "owner"}}}
    with pytest.raises(Invalid, match="owner is immutable"):
        api.replace(removed)


@attrs.frozen
class RuledParameters:
    """Parameters with a CEL rule of their own."""

    name: str = spec_field(default="t-a", validations=[
        {"rule": "self.startsWith('t-')", "message": "name must start with t-"}])
    replicas: int = spec_field(default=1, validations=[
        {"rule": "self >= oldSelf", "message": "replicas may only grow"}])
    # the metadata spelled directly, as attrs.field takes it
    ports: list[int] = attrs.field(factory=list, metadata={
        "validations": [{"rule": "self.all(p, p > 1024)"}]})


def test_cel_rules_are_evaluated_on_create_and_update(api: EmbeddedAPI) -> None:
    apply_crd(api, crd(attrs.evolve(Topic, parameters=RuledParameters)))
    with pytest.raises(Invalid) as refused:
        api.create(topic(name="x-a"))
    assert refused.value.causes == [{"reason": "FieldValueInvalid",
                                     "field": "spec.forProvider.name",
                                     "message": 'Invalid value: "string": name must start '
                                                'with t-'}]
    with pytest.raises(Invalid, match=r"failed rule: self.all\(p, p > 1024\)"):
        api.create(topic(ports=[80]))
    stored = api.create(topic(replicas=3, ports=[8080]))
    stored["spec"]["forProvider"]["replicas"] = 2
    with pytest.raises(Invalid, match="replicas may only grow"):
        api.replace(stored)
    stored["spec"]["forProvider"]["replicas"] = 4
    assert api.replace(stored)["spec"]["forProvider"]["replicas"] == 4


def test_a_crd_whose_rule_does_not_compile_is_refused(api: EmbeddedAPI) -> None:
    doc = crd(attrs.evolve(Topic, parameters=RuledParameters))
    props = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]["forProvider"]["properties"]
    props["name"]["x-kubernetes-validations"] = [{"rule": "self.startsWith("}]
    with pytest.raises(Invalid) as refused:
        apply_crd(api, doc)
    assert refused.value.causes[0]["field"].endswith(
        "properties[name].x-kubernetes-validations[0].rule")
    assert "compilation failed" in refused.value.causes[0]["message"]


def test_the_bundled_database_instance_has_an_engine_enum_and_storage_bounds() -> None:
    from lifecycle.machines.database import DatabaseInstance
    from lifecycle.providers.simcloud import MAX_STORAGE_GB, MIN_STORAGE_GB
    from lifecycle.providers.simcloud.scenarios.harness import (
        database_manifest,
        simulated_environment,
    )

    fields = for_provider(DatabaseInstance)["properties"]
    assert fields["engine"]["enum"] == ["postgres", "mysql"]
    assert (fields["storageGB"]["minimum"], fields["storageGB"]["maximum"]) == (
        MIN_STORAGE_GB, MAX_STORAGE_GB)
    assert all(f.get("description") for f in fields.values())
    env, _ = simulated_environment()
    for bad, field in (({"engine": "oracle"}, "engine"), ({"storage_gb": 5}, "storageGB"),
                       ({"storage_gb": 5000}, "storageGB")):
        with pytest.raises(Invalid) as refused:
            env.apply(database_manifest("bad", **bad))
        blocked = any(c["reason"] in _BLOCKING for c in refused.value.causes)
        assert [c["field"] for c in refused.value.causes] == (
            ["<nil>", f"spec.forProvider.{field}"] if blocked else [f"spec.forProvider.{field}"])
    env.apply(database_manifest("orders"))
    env.run_until_idle()
    with pytest.raises(Invalid, match="engine is immutable"):
        env.apply(database_manifest("orders", engine="mysql"))
    env.apply(database_manifest("orders", storage_gb=40))
    env.run_until_idle()
    assert env.state("DatabaseInstance", "orders") == "ready"


# ------------------------------------------------------------------------ kubectl
def test_kubectl_explains_each_field_and_the_server_refuses_bad_values(tmp_path: Path) -> None:
    import shutil

    from lifecycle.sim.http import APIServerHTTP

    kubectl = shutil.which("kubectl")
    if kubectl is None:  # a missing client is a failure to fix, never a quiet skip
        pytest.fail("kubectl is not on PATH (install the kubectl package)")
    api = EmbeddedAPI()
    apply_crd(api, crd(Topic))
    config = tmp_path / "kubeconfig"

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([kubectl, "--kubeconfig", str(config), "--cache-dir",
                               str(tmp_path / "cache"), *args], input=stdin,
                              capture_output=True, text=True, timeout=60)

    with APIServerHTTP(api) as server:
        config.write_text(yaml.safe_dump(server.kubeconfig()))
        explained = run("explain", "topics.spec.forProvider")
        assert explained.returncode == 0, explained.stderr
        text = " ".join(explained.stdout.split())
        for words in ("A topic on the broker, as spec.forProvider declares it.",
                      "How many partitions the topic has.",
                      "How old messages go: delete after the retention, compact by key",
                      "Where the topic lives. Set once."):
            assert words in text, explained.stdout
        assert "<no description>" not in explained.stdout.split("FIELDS:")[-1].split(
            "labels")[0]
        kind_text = " ".join(run("explain", "topics").stdout.split())
        assert Topic.description in kind_text
        bad = run("apply", "-f", "-", stdin=yaml.safe_dump(topic(partitions=0, cleanup="x")))
        assert bad.returncode != 0
        assert "spec.forProvider.partitions" in bad.stderr
        assert 'spec.forProvider.cleanup: Unsupported value: "x"' in bad.stderr
        good = run("apply", "-f", "-", stdin=yaml.safe_dump(topic(region="eu-1")))
        assert good.returncode == 0, good.stderr
        moved = run("apply", "-f", "-", stdin=yaml.safe_dump(topic(region="us-1")))
        assert moved.returncode != 0
        assert "spec.forProvider.region: Invalid value" in moved.stderr
        assert "region is immutable" in moved.stderr
    api.close()


def test_every_bundled_kind_says_what_it_manages() -> None:
    from lifecycle import registry
    from lifecycle.core.claims import ClassKind

    for registration in registry.registrations():
        kind = registration.kind
        if isinstance(kind, ClassKind):
            continue
        schema = crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert kind.description, f"{kind.kind} has no description"
        assert schema["description"] == kind.description
        assert (kind.machine.__doc__ or "").strip().splitlines()[0] not in schema["description"]


@attrs.frozen
class Port:
    """A port of a listener."""

    number: int = spec_field(default=80, immutable=True)


@attrs.frozen
class Listeners:
    """Parameters holding a list of objects."""

    ports: list[Port] = attrs.Factory(list)


def test_an_immutable_field_inside_a_list_is_refused_as_the_server_refuses_it(
        api: EmbeddedAPI) -> None:
    with pytest.raises(SchemaError, match=r"spec.forProvider.ports\[\].number .*cannot be "
                                          r"inside a list"):
        crd(attrs.evolve(Topic, parameters=Listeners))
    doc = crd(attrs.evolve(Topic, parameters=RuledParameters))
    props = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]["forProvider"]["properties"]
    props["ports"]["items"]["x-kubernetes-validations"] = [{"rule": "self == oldSelf"}]
    with pytest.raises(Invalid, match="oldSelf cannot be used on the uncorrelatable portion"):
        apply_crd(api, doc)
    props["ports"]["x-kubernetes-list-type"] = "map"  # map lists pair items by key
    props["ports"]["items"] = {"type": "object", "properties": {"n": {"type": "integer"}},
                               "required": ["n"], "x-kubernetes-validations": [
                                   {"rule": "self == oldSelf"}]}
    props["ports"]["x-kubernetes-list-map-keys"] = ["n"]
    props["ports"].pop("x-kubernetes-validations")
    apply_crd(api, doc)
    # and the rule holds on an update: an item keeps its value under its key
    stored = api.create(topic(ports=[{"n": 1}, {"n": 2}]))
    stored["spec"]["forProvider"]["ports"] = [{"n": 2}, {"n": 1}, {"n": 3}]
    api.replace(stored)


def test_transition_rules_pair_map_list_items_by_key_and_skip_other_lists() -> None:
    from lifecycle.sim.celrules import evaluate

    item = {"type": "object", "properties": {"n": {"type": "integer"}, "v": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.v >= oldSelf.v", "message": "v shrank"}]}
    mapped = {"type": "object", "properties": {"ports": {
        "type": "array", "items": item, "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["n"]}}}
    old = {"ports": [{"n": 1, "v": 5}, {"n": 2, "v": 5}]}
    assert evaluate({"ports": [{"n": 2, "v": 6}, {"n": 1, "v": 5}, {"n": 3, "v": 0}]}, old,
                    mapped) == []
    assert evaluate({"ports": [{"n": 2, "v": 4}, {"n": 1, "v": 5}]}, old, mapped) == [
        {"reason": "FieldValueInvalid", "field": "ports[0]",
         "message": "Invalid value: v shrank"}]  # an object's value is not shown
    plain = {"type": "object", "properties": {"ports": {"type": "array", "items": item}}}
    assert evaluate({"ports": [{"n": 2, "v": 4}]}, old, plain) == []  # not paired: not checked
