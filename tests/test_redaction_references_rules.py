"""Rules of credential redaction and of the reference resolution's write and reads.

Redaction (:mod:`lifecycle.runtime.redaction`), on its public functions:

- Longer credential values are replaced first, whatever their text: a value
  containing another is replaced whole, never leaving the longer value's
  remainder around a mark.
- A line of a multi-line value is replaced on its own only when it is at least
  ``MIN_LENGTH`` characters long (stripped): a line of exactly ``MIN_LENGTH``
  is replaced, a shorter one (a PEM's short last line) never blanks ordinary
  words.
- A status without conditions is copied unchanged, with or without secrets.

References (:mod:`lifecycle.runtime.references`): each test drives
:class:`~lifecycle.runtime.references.References` on a real
:class:`~lifecycle.runtime.passes.Pass` over the embedded API serving the
PostgreSQL kinds' CRDs (no server is needed: references are resolved before
the pass connects). The rules:

- The reference write carries what the pass has staged: a metadata change
  staged before the references are resolved is stored with the resolved
  values, and the pass has nothing left staged.
- The write observes the generation it produced only when the object was at
  the pass's own generation: written over someone else's newer edit, the
  pass keeps its generation and observes none.
- A selector lists only what its labels match: the read of the referenced
  kind asks the API for the selector's labels (every one of them), never the
  whole namespace; an empty selector lists the namespace.
- A reference write that conflicts reads the object afresh and resolves again
  (the other writer's change kept); one that keeps conflicting ends with
  ``ConflictsExhausted`` naming the reference write.
- A selector writes the reference it chose only when the kind declares a
  reference field: a kind whose field has a selector and no ``<field>Ref``
  gets the value alone, and a strictly validating API accepts the write.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from lifecycle.core.kind import FINALIZER, Kind
from lifecycle.core.references import declared, selector_field
from lifecycle.kube.conflict import ConflictsExhausted
from lifecycle.kube.errors import Conflict
from lifecycle.machines.managed import ManagedResourceMachine
from lifecycle.machines.postgres import Grant
from lifecycle.providers.postgres.fields import API_VERSION
from lifecycle.providers.postgres.scenarios.testing import manifest, postgres_environment
from lifecycle.runtime.passes import Pass
from lifecycle.runtime.redaction import MARK, MIN_LENGTH, credential_values, redact, redact_status
from lifecycle.runtime.references import References
from lifecycle.runtime.secrets import ConnectionSecrets
from lifecycle.schema.crds import crd
from lifecycle.sim.crds import apply_crd
from lifecycle.testing import Environment

NS = "team-a"
READY = {"type": "Ready", "status": "True", "reason": "Available", "message": "",
         "lastTransitionTime": "2026-01-01T00:00:00Z"}


# ------------------------------------------------------------------ redaction
def test_a_value_containing_another_is_replaced_whole_whatever_its_text() -> None:
    # "zzzz" sorts after the longer value as text: only the length decides the order.
    secrets = credential_values({"username": "zzzz", "password": "pass-zzzz-word"})
    assert secrets == ("pass-zzzz-word", "zzzz")
    assert redact("login pass-zzzz-word as zzzz", secrets) == f"login {MARK} as {MARK}"
    longest = credential_values({"a": "aaaaaaaa", "b": "zzzzz", "c": "mmmmmmm"})
    assert [len(v) for v in longest] == [8, 7, 5]


def test_a_line_of_a_multi_line_value_is_replaced_from_min_length() -> None:
    assert MIN_LENGTH == 4
    pem = "-----BEGIN KEY-----\nwxyz\nab\n-----END KEY-----"
    assert redact("line wxyz rejected", (pem,)) == f"line {MARK} rejected"
    # A two-character line ("ab") is no credential: "tab" and "about" are left alone.
    assert redact("a tab about it", (pem,)) == "a tab about it"
    assert redact("indented   ab", ("x\n   ab",)) == "indented   ab"


def test_a_status_without_conditions_is_copied_unchanged() -> None:
    status = {"atProvider": {"host": "db"}, "externalName": "x"}
    for secrets in (("s3cr3t-value",), ()):
        copied = redact_status(status, secrets)
        assert copied == status and copied is not status
    odd = {"conditions": {"Ready": "s3cr3t-value"}}  # not a list: not conditions at all
    assert redact_status(odd, ("s3cr3t-value",)) == odd


# ------------------------------------------------------------------ references
def environment() -> Environment:
    """The PostgreSQL kinds served by the embedded API; the server is never reached."""
    env = postgres_environment("127.0.0.1", 1, "admin", "never-used", "disable", seed=7)
    env.namespace(NS)
    return env


def ready_role(env: Environment, name: str, external: str,
               labels: dict[str, str] | None = None) -> None:
    """A Role of ``NS`` that is Ready under the external name ``external``."""
    doc = manifest("Role", name, namespace=NS)
    if labels:
        doc["metadata"]["labels"] = labels
    env.apply(doc)
    role = env.api.get(API_VERSION, "Role", NS, name)
    role["status"] = {"externalName": external, "conditions": [READY]}
    env.api.replace_status(role)


def grant(env: Environment, name: str, **forprovider: Any) -> dict[str, Any]:
    """A Grant of ``NS`` on the database ``db`` whose role comes from ``forprovider``."""
    doc = manifest("Grant", name, namespace=NS, privileges=["CONNECT"], database="db")
    doc["spec"]["forProvider"].update(forprovider)
    env.apply(doc)
    return env.api.get(API_VERSION, "Grant", NS, name)


def a_pass(env: Environment, obj: dict[str, Any], api: Any = None,
           generation: int | None = None) -> Pass:
    """A pass of the Grant ``obj`` at ``generation`` (the object's own by default), on the
    API as the reconcilers see it (or ``api``)."""
    return Pass(obj=obj, state="", generation=generation or obj["metadata"]["generation"],
                secrets=ConnectionSecrets(env.operator_api, Grant),
                api=api or env.operator_api, kind=Grant)


class ListedLabels:
    """The embedded API, remembering the label selector of every list call."""

    def __init__(self, api: Any) -> None:
        self.api = api
        self.selectors: list[str | None] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.api, name)

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | None = None) -> tuple[list[dict[str, Any]], str]:
        """List through the embedded API, noting ``label_selector``."""
        self.selectors.append(label_selector)
        listed: tuple[list[dict[str, Any]], str] = self.api.list(
            api_version, kind, namespace, label_selector)
        return listed


def test_the_reference_write_carries_what_the_pass_staged() -> None:
    env = environment()
    ready_role(env, "app", "app_pg")
    run = a_pass(env, grant(env, "g", roleRef={"name": "app"}))
    run.stage_change(lambda meta: meta.setdefault("finalizers", []).append(FINALIZER))

    assert References(Grant).resolve(run) is None
    stored = env.api.get(API_VERSION, "Grant", NS, "g")
    assert stored["spec"]["forProvider"]["role"] == "app_pg"
    assert FINALIZER in stored["metadata"]["finalizers"]
    assert run.staged == [] and not run.pressing
    assert run.obj["metadata"]["finalizers"] == stored["metadata"]["finalizers"]


def test_a_write_over_a_newer_edit_observes_no_generation() -> None:
    env = environment()
    ready_role(env, "app", "app_pg")
    first = grant(env, "g", roleRef={"name": "app"})
    assert first["metadata"]["generation"] == 1
    # The user edits the spec after the pass began at generation 1: the pass works on
    # the object it read afresh (generation 2), as after a conflict.
    edited = {**first, "spec": {**first["spec"], "forProvider": {
        **first["spec"]["forProvider"], "privileges": ["CONNECT", "TEMPORARY"]}}}
    edited = env.api.replace(edited)
    assert edited["metadata"]["generation"] == 2
    run = a_pass(env, edited, generation=1)

    assert References(Grant).resolve(run) is None
    assert run.obj["metadata"]["generation"] == 3
    assert run.obj["spec"]["forProvider"]["role"] == "app_pg"
    assert run.generation == 1 and run.observed is None  # generation 2 was never seen

    # At the pass's own generation, the write's generation is the pass's and observed.
    ready_role(env, "other", "other_pg")
    mine = grant(env, "h", roleRef={"name": "other"})
    run = a_pass(env, mine)
    assert References(Grant).resolve(run) is None
    assert run.generation == run.observed == mine["metadata"]["generation"] + 1


def test_a_selector_lists_only_what_its_labels_match() -> None:
    env = environment()
    ready_role(env, "app", "app_pg", labels={"team": "a", "tier": "db"})
    ready_role(env, "half", "half_pg", labels={"team": "a"})
    spy = ListedLabels(env.operator_api)
    run = a_pass(env, grant(env, "g", roleSelector={"matchLabels": {"tier": "db",
                                                                    "team": "a"}}), spy)

    assert References(Grant).resolve(run) is None
    assert spy.selectors == ["team=a,tier=db"]  # both labels, sorted, the API's syntax
    params = env.api.get(API_VERSION, "Grant", NS, "g")["spec"]["forProvider"]
    assert params["role"] == "app_pg" and params["roleRef"] == {"name": "app"}

    # An empty selector lists the namespace: it is resolved only when one Role is there.
    spy.selectors.clear()
    run = a_pass(env, grant(env, "all", roleSelector={"matchLabels": {}}), spy)
    refused = References(Grant).resolve(run)
    assert spy.selectors == [None]
    assert refused is not None and "2 Roles in namespace 'team-a' match (app, half)" in str(
        refused.message)


@attrs.define(frozen=True)
class OwnerParameters:
    """An owner role filled by a selector only: the kind declares no ``ownerRef``."""

    owner: str | None = attrs.field(default=None)
    owner_selector: Any = selector_field("owner", API_VERSION, "Role")  # noqa: RUF009


OWNED = Kind(group="example.lifecycle.dev", version="v1alpha1", kind="Owned",
             plural="owneds", machine=ManagedResourceMachine, parameters=OwnerParameters,
             description="A test kind whose owner is chosen by a selector only.")


def test_a_selector_without_a_reference_field_writes_the_value_alone() -> None:
    assert [(d.field, d.ref_key, d.selector_key) for d in declared(OwnerParameters)] == [
        ("owner", "", "ownerSelector")]
    env = environment()
    apply_crd(env.api, crd(OWNED))
    ready_role(env, "app", "app_pg", labels={"team": "a"})
    obj = env.api.create({
        "apiVersion": OWNED.api_version, "kind": "Owned",
        "metadata": {"name": "o", "namespace": NS},
        "spec": {"providerConfigRef": {"name": "default"},
                 "forProvider": {"ownerSelector": {"matchLabels": {"team": "a"}}}}})
    # The API refusing any field its schema does not declare (fieldValidation Strict).
    run = Pass(obj=obj, state="", generation=obj["metadata"]["generation"],
               secrets=ConnectionSecrets(env.api, OWNED), api=env.api, kind=OWNED)

    assert References(OWNED).resolve(run) is None
    stored = env.api.get(OWNED.api_version, "Owned", NS, "o")["spec"]["forProvider"]
    assert stored == {"ownerSelector": {"matchLabels": {"team": "a"}}, "owner": "app_pg"}


def test_a_conflicting_reference_write_reads_afresh_and_resolves_again() -> None:
    env = environment()
    ready_role(env, "app", "app_pg")
    stale = grant(env, "g", roleRef={"name": "app"})
    # Another writer labels the Grant after the pass read it: the pass's write conflicts.
    labelled = {**stale, "metadata": {**stale["metadata"], "labels": {"owner": "ops"}}}
    env.api.replace(labelled)
    run = a_pass(env, stale)

    assert References(Grant).resolve(run) is None
    stored = env.api.get(API_VERSION, "Grant", NS, "g")
    assert stored["metadata"]["labels"] == {"owner": "ops"}
    assert stored["spec"]["forProvider"]["role"] == "app_pg"


def test_a_reference_write_that_keeps_conflicting_is_named() -> None:
    env = environment()
    ready_role(env, "app", "app_pg")
    run = a_pass(env, grant(env, "g", roleRef={"name": "app"}))
    env.faults.fail("update", "Grant", error=Conflict)

    with pytest.raises(ConflictsExhausted) as exhausted:
        References(Grant).resolve(run)
    assert str(exhausted.value) == "reference write kept conflicting (5 attempts)"
    assert "role" not in env.api.get(API_VERSION, "Grant", NS, "g")["spec"]["forProvider"]
