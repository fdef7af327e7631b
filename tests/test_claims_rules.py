"""The pure claim model and ownership rules: names, references, the status a pass leaves."""

from __future__ import annotations

from lifecycle.core.claims import claim_secret_name, dynamic_name


def test_dynamic_name_is_namespace_name_and_uid_prefix() -> None:
    claim = {"metadata": {"namespace": "team", "name": "db", "uid": "0123456789"}}
    assert dynamic_name(claim) == "team-db-01234567"
    long = {"metadata": {"namespace": "n", "name": "a" * 300, "uid": "u" * 10}}
    assert dynamic_name(long) == "n-" + "a" * 238 + "-uuuuuuuu"
    trailing = {"metadata": {"namespace": "n", "name": "a" * 237 + "-.x", "uid": "uid"}}
    assert dynamic_name(trailing) == "n-" + "a" * 237 + "-uid"
    assert dynamic_name({"metadata": {"name": "db", "uid": "u"}}) == "-db-u"


def test_claim_secret_name() -> None:
    meta = {"name": "db"}
    assert claim_secret_name({"metadata": meta}) == "db-connection"
    for ref in (None, "x", {}, {"name": ""}, {"name": 5}):
        assert claim_secret_name({"metadata": meta,
                                  "spec": {"writeConnectionSecretToRef": ref}}) == "db-connection"
    assert claim_secret_name({"metadata": meta,
                              "spec": {"writeConnectionSecretToRef": {"name": "s"}}}) == "s"
