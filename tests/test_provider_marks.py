"""The providers' own mark checks compare the operator id as well as the uid, as the
engine's rule does: a resource marked by another operator for an object of the same uid
is not this object's (PostgreSQL's comments, the simulated cloud's tags)."""

from __future__ import annotations

import attrs
import pytest

from lifecycle.core.contract import ManagedResource
from lifecycle.core.ownership import NotOwnedError, owner_mark
from lifecycle.providers.postgres import marks
from lifecycle.providers.simcloud import OWNER_TAG, SimCloud
from lifecycle.providers.simcloud.client import DatabaseClient

OURS = owner_mark("lifecycle", "uid-1")


def comment(mark: str) -> str:
    return f"{marks.PREFIX}{mark}\nnamespace: team-a\nproviderConfig: default"


@pytest.mark.parametrize(("found", "same"), [
    (OURS, True),
    (owner_mark("other-operator", "uid-1"), False),  # this uid, another operator
    (owner_mark("lifecycle", "uid-2"), False),
    ("uid-1", False),  # a bare uid names no operator
    ("", False),
])
def test_postgres_marks_are_ours_only_with_both_uid_and_operator(found: str,
                                                                 same: bool) -> None:
    assert marks.same_owner(found, OURS) is same
    if same:
        marks.check_ours("role", "app", comment(found), OURS)
    else:
        with pytest.raises(NotOwnedError, match="'app' already exists and is not this"):
            marks.check_ours("role", "app", comment(found), OURS)


def resource(mark: str) -> ManagedResource:
    return ManagedResource(kind="DatabaseInstance", namespace="team-a", name="db",
                           uid="uid-1", generation=1, external_name="theirs",
                           parameters={"engine": "postgres", "storage_gb": 20},
                           password="pw-1234567890", owner_mark=mark)


CREDS = ("AKIDEXAMPLE", "s3cr3t")


def test_simcloud_create_refuses_an_instance_another_operator_marked_with_this_uid() -> None:
    cloud = SimCloud(seed=3, create_polls=0)
    cloud.create_instance(CREDS, "theirs", {"engine": "postgres", "storage_gb": 20},
                          tags={OWNER_TAG: owner_mark("other-operator", "uid-1")})
    client = DatabaseClient(cloud, CREDS)
    with pytest.raises(NotOwnedError):
        client.create(resource(OURS))
    # The same instance under this operator's own mark is its earlier create.
    cloud.create_instance(CREDS, "mine", {"engine": "postgres", "storage_gb": 20},
                          tags={OWNER_TAG: OURS})
    client.create(attrs.evolve(resource(OURS), external_name="mine"))
