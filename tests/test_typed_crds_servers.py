"""The typed CRD of a user's kind, on the embedded API and on the real kube-apiserver.

The same CRD (a Literal field, an Enum, a bounded integer, a pattern, documented
fields, an immutable field and an optional immutable one) is installed on both
servers; ``kubectl explain`` shows each description, a value out of its enum or
range is refused naming the field, and a change of an immutable field is
refused, with the same field paths on both: the generated rules are ones the
real server accepts and evaluates as the embedded API does.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from envtest_helpers import kubectl, kubectl_kubeconfig, wait_established
from test_typed_crds import Topic, topic

from lifecycle.schema.crds import crd


@pytest.fixture(params=["embedded", "envtest"])
def kubeconfig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A kubeconfig for each server in turn: the embedded API, then the real one."""
    yield from kubectl_kubeconfig(request, tmp_path)


def test_the_crd_explains_and_refuses_the_same_on_both_servers(kubeconfig: Path) -> None:
    installed = kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(crd(Topic)))
    assert installed.returncode == 0, installed.stderr
    wait_established(kubeconfig, "topics.broker.example.org")
    namespace = f"typed-{uuid.uuid4().hex[:8]}"
    assert kubectl(kubeconfig, "create", "namespace", namespace).returncode == 0

    def manifest(name: str, **fields: Any) -> str:
        doc = topic(name, **fields)
        doc["metadata"]["namespace"] = namespace
        return yaml.safe_dump(doc)

    explained = ""
    for _ in range(30):  # the real server publishes the OpenAPI of a new CRD a moment later
        done = kubectl(kubeconfig, "explain", "topics.spec.forProvider")
        explained = " ".join(done.stdout.split())
        if "How many partitions the topic has." in explained:
            break
        subprocess.run(["sleep", "1"], check=True)
    for words in ("How many partitions the topic has.", "Where the topic lives. Set once.",
                  "How old messages go: delete after the retention, compact by key"):
        assert words in explained, explained
    for fields, field in (({"partitions": 0}, "spec.forProvider.partitions"),
                          ({"partitions": 20000}, "spec.forProvider.partitions"),
                          ({"cleanup": "shred"}, "spec.forProvider.cleanup"),
                          ({"retention": "1y"}, "spec.forProvider.retention"),
                          ({"region": "EU"}, "spec.forProvider.region")):
        bad = kubectl(kubeconfig, "apply", "-f", "-", stdin=manifest("bad", **fields))
        assert bad.returncode != 0 and f"{field}:" in bad.stderr, (fields, bad.stderr)
    good = kubectl(kubeconfig, "apply", "-f", "-", stdin=manifest("t", region="eu-1"))
    assert good.returncode == 0, good.stderr
    moved = kubectl(kubeconfig, "apply", "-f", "-", stdin=manifest("t", region="us-1"))
    assert moved.returncode != 0
    assert "spec.forProvider.region: Invalid value" in moved.stderr
    assert "region is immutable" in moved.stderr
    owned = kubectl(kubeconfig, "apply", "-f", "-", stdin=manifest("t", owner="me"))
    assert owned.returncode != 0 and "owner is immutable" in owned.stderr, owned.stderr
    grown = kubectl(kubeconfig, "apply", "-f", "-", stdin=manifest("t", partitions=8))
    assert grown.returncode == 0, grown.stderr  # a mutable field changes
