"""Tests of the simulated cloud and the database kind's client built on it."""

from __future__ import annotations

import threading
import time

import attrs
import pytest

from lifecycle.core.contract import ExternalClient, ManagedResource, ProviderConfig
from lifecycle.core.errors import (
    CredentialsError,
    ExternalError,
    HandledError,
    Severity,
    TerminalError,
    Throttled,
)
from lifecycle.core.values import ProviderStatus
from lifecycle.providers.simcloud import (
    CloudAlreadyExists,
    CloudAuthError,
    CloudBusy,
    CloudCall,
    CloudError,
    CloudInvalidParameter,
    CloudNotFound,
    CloudThrottled,
    CloudUnavailable,
    DatabaseClient,
    DatabaseConnector,
    DatabaseParameters,
    SimCloud,
)

CREDS = ("AKIDEXAMPLE", "s3cr3t-key-value")
PG = {"engine": "postgres", "storage_gb": 20}
PASSWORD = "hunter2-very-secret"


class FakeClock:
    """A manually advanced clock."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def resource(
    name: str = "db1",
    parameters: object | None = None,
    *,
    password: str | None = PASSWORD,
    key: str = "uid-1/1",
) -> ManagedResource:
    """A managed resource of the database kind."""
    return ManagedResource(
        kind="Database",
        namespace="default",
        name=name,
        uid="uid-1",
        generation=1,
        external_name=name,
        parameters=parameters if parameters is not None else DatabaseParameters(),
        idempotency_key=key,
        password=password,
    )


def settle(cloud: SimCloud, name: str, limit: int = 20) -> dict:
    """Describe until the instance leaves its transitional state."""
    for _ in range(limit):
        desc = cloud.describe_instance(CREDS, name)
        if desc["state"] not in ("creating", "modifying"):
            return desc
    raise AssertionError("instance never settled")


# -- asynchronous progression ----------------------------------------------


def test_create_progresses_by_polls() -> None:
    cloud = SimCloud(create_polls=2)
    desc = cloud.create_instance(CREDS, "db1", PG)
    assert desc["state"] == "creating"
    assert cloud.describe_instance(CREDS, "db1")["state"] == "creating"
    desc = cloud.describe_instance(CREDS, "db1")
    assert desc["state"] == "available"
    assert desc["status_message"] == ""
    assert cloud.describe_instance(CREDS, "db1")["state"] == "available"


def test_create_with_zero_polls_is_available_immediately() -> None:
    cloud = SimCloud(create_polls=0)
    assert cloud.create_instance(CREDS, "db1", PG)["state"] == "available"


def test_snapshot_does_not_count_as_a_poll() -> None:
    cloud = SimCloud(create_polls=1)
    cloud.create_instance(CREDS, "db1", PG)
    for _ in range(3):
        assert cloud.instances()["db1"]["state"] == "creating"
    assert cloud.describe_instance(CREDS, "db1")["state"] == "available"


def test_create_progresses_by_clock() -> None:
    clock = FakeClock()
    cloud = SimCloud(create_seconds=30.0, clock=clock)
    cloud.create_instance(CREDS, "db1", PG)
    for _ in range(5):
        assert cloud.describe_instance(CREDS, "db1")["state"] == "creating"
    clock.advance(29.9)
    assert cloud.describe_instance(CREDS, "db1")["state"] == "creating"
    clock.advance(0.1)
    assert cloud.describe_instance(CREDS, "db1")["state"] == "available"


def test_modify_and_delete_progress_by_clock() -> None:
    clock = FakeClock()
    cloud = SimCloud(create_polls=0, modify_seconds=5.0, delete_seconds=10.0, clock=clock)
    cloud.create_instance(CREDS, "db1", PG)
    cloud.modify_instance(CREDS, "db1", {"storage_gb": 40})
    assert cloud.describe_instance(CREDS, "db1")["state"] == "modifying"
    clock.advance(5.0)
    desc = cloud.describe_instance(CREDS, "db1")
    assert (desc["state"], desc["storage_gb"]) == ("available", 40)
    cloud.delete_instance(CREDS, "db1")
    clock.advance(9.0)
    assert cloud.describe_instance(CREDS, "db1")["state"] == "deleting"
    clock.advance(1.0)
    with pytest.raises(CloudNotFound):
        cloud.describe_instance(CREDS, "db1")


def test_description_fields_and_server_defaults() -> None:
    cloud = SimCloud(create_polls=0)
    pg = cloud.create_instance(CREDS, "pg", PG)
    assert pg == {
        "name": "pg",
        "state": "available",
        "engine": "postgres",
        "version": "15",
        "storage_gb": 20,
        "size": "small",
        "endpoint": "pg.db.simcloud.internal",
        "port": 5432,
        "status_message": "",
        "tags": {},
    }
    my = cloud.create_instance(CREDS, "my", {"engine": "mysql", "storage_gb": 10, "size": "large"})
    assert (my["version"], my["port"], my["size"]) == ("8.0", 3306, "large")
    explicit = cloud.create_instance(CREDS, "pg16", {**PG, "version": "16"})
    assert explicit["version"] == "16"


def test_modify_progression_applies_changes_after_polls() -> None:
    cloud = SimCloud(create_polls=0, modify_polls=2)
    cloud.create_instance(CREDS, "db1", PG)
    desc = cloud.modify_instance(CREDS, "db1", {"storage_gb": 50, "size": "medium"})
    assert desc["state"] == "modifying"
    assert desc["storage_gb"] == 20
    desc = cloud.describe_instance(CREDS, "db1")
    assert (desc["state"], desc["storage_gb"]) == ("modifying", 20)
    desc = cloud.describe_instance(CREDS, "db1")
    assert (desc["state"], desc["storage_gb"], desc["size"]) == ("available", 50, "medium")


def test_modify_without_changes_is_a_no_op() -> None:
    cloud = SimCloud(create_polls=0)
    cloud.create_instance(CREDS, "db1", PG)
    desc = cloud.modify_instance(CREDS, "db1", {"engine": "postgres", "storage_gb": 20})
    assert desc["state"] == "available"


def test_delete_progression() -> None:
    cloud = SimCloud(create_polls=0, delete_polls=2)
    cloud.create_instance(CREDS, "db1", PG)
    assert cloud.delete_instance(CREDS, "db1") is False  # not gone yet: deleting
    assert cloud.describe_instance(CREDS, "db1")["state"] == "deleting"
    cloud.delete_instance(CREDS, "db1")  # repeated request while deleting is accepted
    with pytest.raises(CloudNotFound):
        cloud.describe_instance(CREDS, "db1")
    with pytest.raises(CloudNotFound):
        cloud.delete_instance(CREDS, "db1")
    assert cloud.instances() == {}


# -- idempotency ---------------------------------------------------------------


def test_create_with_same_client_token_is_idempotent() -> None:
    cloud = SimCloud(create_polls=1)
    first = cloud.create_instance(CREDS, "db1", PG, client_token="tok-1")
    again = cloud.create_instance(CREDS, "db1", PG, client_token="tok-1")
    assert again == first
    assert cloud.creations("db1") == 1
    assert cloud.count("create", "db1", ok=True) == 2


def test_create_with_other_or_no_token_is_already_exists() -> None:
    cloud = SimCloud()
    cloud.create_instance(CREDS, "db1", PG, client_token="tok-1")
    with pytest.raises(CloudAlreadyExists):
        cloud.create_instance(CREDS, "db1", PG, client_token="tok-2")
    with pytest.raises(CloudAlreadyExists):
        cloud.create_instance(CREDS, "db1", PG)
    assert cloud.creations("db1") == 1
    assert cloud.count("create", ok=False) == 2


def test_recreate_after_delete_counts_two_creations() -> None:
    cloud = SimCloud(create_polls=0, delete_polls=0)
    cloud.create_instance(CREDS, "db1", PG)
    cloud.delete_instance(CREDS, "db1")
    cloud.create_instance(CREDS, "db1", PG)
    assert cloud.creations("db1") == 2
    assert cloud.creations("other") == 0


# -- busy and invalid --------------------------------------------------------------


@pytest.mark.parametrize("state", ["creating", "modifying", "deleting", "failed"])
def test_modify_when_not_available_is_busy(state: str) -> None:
    cloud = SimCloud(create_polls=0 if state != "creating" else 5)
    cloud.create_instance(CREDS, "db1", PG)
    if state == "modifying":
        cloud.modify_instance(CREDS, "db1", {"storage_gb": 30})
    elif state == "deleting":
        cloud.delete_instance(CREDS, "db1")
    elif state == "failed":
        cloud.fail_instance("db1", "disk broke")
    with pytest.raises(CloudBusy) as info:
        cloud.modify_instance(CREDS, "db1", {"storage_gb": 40})
    assert isinstance(info.value, CloudUnavailable)
    assert cloud.instances()["db1"]["state"] == state


def test_reset_password_busy_and_applied() -> None:
    cloud = SimCloud(create_polls=1)
    cloud.create_instance(CREDS, "db1", PG, password="first-password")
    with pytest.raises(CloudBusy):
        cloud.reset_password(CREDS, "db1", "second-password")
    cloud.describe_instance(CREDS, "db1")
    cloud.reset_password(CREDS, "db1", "second-password")
    assert cloud.password_of("db1") == "second-password"
    with pytest.raises(CloudNotFound):
        cloud.reset_password(CREDS, "nope", "third-password")


@pytest.mark.parametrize(
    "params",
    [
        {"engine": "oracle", "storage_gb": 20},
        {"storage_gb": 20},
        {"engine": "postgres"},
        {"engine": "postgres", "storage_gb": 5},
        {"engine": "postgres", "storage_gb": 1001},
        {"engine": "postgres", "storage_gb": "20"},
        {"engine": "postgres", "storage_gb": True},
        {"engine": "postgres", "storage_gb": 20, "size": "huge"},
        {"engine": "postgres", "storage_gb": 20, "version": "8.0"},
        {"engine": "postgres", "storage_gb": 20, "version": 15},
        {"engine": "postgres", "storage_gb": 20, "colour": "blue"},
    ],
)
def test_create_rejects_invalid_parameters(params: dict) -> None:
    cloud = SimCloud()
    with pytest.raises(CloudInvalidParameter):
        cloud.create_instance(CREDS, "db1", params)
    assert cloud.instances() == {}
    assert cloud.creations("db1") == 0


def test_storage_bounds_are_inclusive() -> None:
    cloud = SimCloud()
    cloud.create_instance(CREDS, "a", {"engine": "postgres", "storage_gb": 10})
    cloud.create_instance(CREDS, "b", {"engine": "postgres", "storage_gb": 1000})
    assert set(cloud.instances()) == {"a", "b"}


def test_modify_rejects_engine_change_and_bad_values() -> None:
    cloud = SimCloud(create_polls=0)
    cloud.create_instance(CREDS, "db1", PG)
    with pytest.raises(CloudInvalidParameter):
        cloud.modify_instance(CREDS, "db1", {"engine": "mysql"})
    with pytest.raises(CloudInvalidParameter):
        cloud.modify_instance(CREDS, "db1", {"storage_gb": 5000})
    with pytest.raises(CloudNotFound):
        cloud.modify_instance(CREDS, "nope", {"storage_gb": 30})
    assert cloud.instances()["db1"]["state"] == "available"


def test_short_password_rejected_without_echoing_it() -> None:
    cloud = SimCloud()
    with pytest.raises(CloudInvalidParameter) as info:
        cloud.create_instance(CREDS, "db1", PG, password="short")
    assert "short" not in str(info.value).replace("characters", "")


# -- credentials -----------------------------------------------------------------


def test_auth_rejects_unknown_key_wrong_secret_and_empty() -> None:
    cloud = SimCloud(credentials={"AKIDEXAMPLE": "s3cr3t-key-value"})
    cloud.create_instance(CREDS, "db1", PG)
    for creds in [("OTHER", "s3cr3t-key-value"), ("AKIDEXAMPLE", "wrong-secret"), ("", "")]:
        with pytest.raises(CloudAuthError) as info:
            cloud.describe_instance(creds, "db1")
        assert creds[1] == "" or creds[1] not in str(info.value)
    with pytest.raises(CloudAuthError):
        cloud.describe_instance(None, "db1")  # type: ignore[arg-type]
    assert cloud.count("describe", ok=False) == 4
    assert {c.error_code for c in cloud.calls if not c.ok} >= {
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
    }


def test_auth_failure_prevents_mutation() -> None:
    cloud = SimCloud(credentials={"AKIDEXAMPLE": "s3cr3t-key-value"})
    with pytest.raises(CloudAuthError):
        cloud.create_instance(("AKIDEXAMPLE", "nope"), "db1", PG)
    assert cloud.creations("db1") == 0


def test_no_credentials_map_accepts_any_non_empty_pair() -> None:
    cloud = SimCloud()
    cloud.create_instance(("anything", "goes"), "db1", PG)
    with pytest.raises(CloudAuthError):
        cloud.create_instance(("anything", ""), "db2", PG)


# -- faults ----------------------------------------------------------------------


def outcomes(seed: int, calls: int = 60) -> list[str]:
    """The sequence of describe outcomes under random faults."""
    cloud = SimCloud(seed=seed, create_polls=0, error_rate=0.3, throttle_rate=0.2)
    cloud.set_faults(error_rate=0.0, throttle_rate=0.0)
    cloud.create_instance(CREDS, "db1", PG)
    cloud.set_faults(error_rate=0.3, throttle_rate=0.2)
    result = []
    for _ in range(calls):
        try:
            cloud.describe_instance(CREDS, "db1")
            result.append("ok")
        except CloudError as err:
            result.append(err.code)
    return result


def test_random_faults_are_deterministic_per_seed() -> None:
    first = outcomes(7)
    assert first == outcomes(7)
    assert first != outcomes(8)
    assert set(first) == {"ok", "Throttling", "ServiceUnavailable"}


def test_fault_rates_of_zero_and_one() -> None:
    cloud = SimCloud(create_polls=0, error_rate=1.0)
    with pytest.raises(CloudUnavailable):
        cloud.create_instance(CREDS, "db1", PG)
    assert cloud.creations("db1") == 0  # faults strike before anything changes
    cloud.set_faults(error_rate=0.0, throttle_rate=1.0, retry_after=7.5)
    with pytest.raises(CloudThrottled) as info:
        cloud.create_instance(CREDS, "db1", PG)
    assert info.value.retry_after == 7.5
    assert cloud.creations("db1") == 0
    cloud.set_faults(throttle_rate=0.0)
    cloud.create_instance(CREDS, "db1", PG)
    assert cloud.creations("db1") == 1
    with pytest.raises(ValueError):
        cloud.set_faults(error_rate=1.5)


def test_fail_next_targets_an_operation_n_times() -> None:
    cloud = SimCloud(create_polls=0)
    cloud.create_instance(CREDS, "db1", PG)
    cloud.fail_next("describe", CloudThrottled("slow down", retry_after=3.0), times=2)
    cloud.modify_instance(CREDS, "db1", {"storage_gb": 20})  # other operations unaffected
    for _ in range(2):
        with pytest.raises(CloudThrottled) as info:
            cloud.describe_instance(CREDS, "db1")
        assert info.value.retry_after == 3.0
        assert info.value.message == "slow down"
    assert cloud.describe_instance(CREDS, "db1")["state"] == "available"
    assert cloud.calls[-3:] == [
        CloudCall("describe", "db1", False, "Throttling"),
        CloudCall("describe", "db1", False, "Throttling"),
        CloudCall("describe", "db1", True, None),
    ]
    with pytest.raises(ValueError):
        cloud.fail_next("explode", CloudUnavailable())


def test_counting_an_operation_the_cloud_does_not_have_is_refused() -> None:
    cloud = SimCloud(create_polls=0)
    cloud.create_instance(CREDS, "db1", PG)
    assert cloud.count("create") == 1
    assert cloud.count("create", name="db1", ok=True) == 1
    with pytest.raises(ValueError, match="unknown operation 'create_instance'"):
        cloud.count("create_instance")


def test_fail_next_on_create_prevents_creation() -> None:
    cloud = SimCloud()
    cloud.fail_next("create", CloudUnavailable())
    with pytest.raises(CloudUnavailable):
        cloud.create_instance(CREDS, "db1", PG)
    assert cloud.creations("db1") == 0
    cloud.create_instance(CREDS, "db1", PG)
    assert cloud.creations("db1") == 1


def test_count_filters() -> None:
    cloud = SimCloud(create_polls=0)
    cloud.create_instance(CREDS, "a", PG)
    cloud.describe_instance(CREDS, "a")
    with pytest.raises(CloudNotFound):
        cloud.describe_instance(CREDS, "b")
    assert cloud.count("describe") == 2
    assert cloud.count("describe", "a") == 1
    assert cloud.count("describe", ok=False) == 1
    assert cloud.count("describe", "b", ok=True) == 0
    assert cloud.count("create") == 1


def test_latency_overlaps_concurrent_calls() -> None:
    cloud = SimCloud(create_polls=0, latency=0.05)
    cloud.create_instance(CREDS, "db1", PG)
    threads = [
        threading.Thread(target=cloud.describe_instance, args=(CREDS, "db1")) for _ in range(8)
    ]
    start = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - start
    assert 0.05 <= elapsed < 0.3  # serialised, eight calls would need 0.4 s
    assert cloud.count("describe", ok=True) == 8


def test_concurrent_creates_materialise_once() -> None:
    cloud = SimCloud()
    errors: list[Exception] = []

    def create() -> None:
        try:
            cloud.create_instance(CREDS, "db1", PG, client_token="same")
        except CloudError as err:  # pragma: no cover - asserted below
            errors.append(err)

    threads = [threading.Thread(target=create) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert cloud.creations("db1") == 1


# -- hooks ---------------------------------------------------------------------


def test_fail_and_recover_hooks() -> None:
    cloud = SimCloud(create_polls=3)
    cloud.create_instance(CREDS, "db1", PG)
    cloud.fail_instance("db1", "storage full")
    for _ in range(4):
        desc = cloud.describe_instance(CREDS, "db1")
        assert (desc["state"], desc["status_message"]) == ("failed", "storage full")
    cloud.recover_instance("db1")
    desc = cloud.describe_instance(CREDS, "db1")
    assert (desc["state"], desc["status_message"]) == ("available", "")


def test_drift_and_remove_hooks() -> None:
    cloud = SimCloud(create_polls=0)
    cloud.create_instance(CREDS, "db1", PG)
    cloud.drift("db1", storage_gb=99, size="large")
    desc = cloud.describe_instance(CREDS, "db1")
    assert (desc["storage_gb"], desc["size"], desc["state"]) == (99, "large", "available")
    with pytest.raises(ValueError):
        cloud.drift("db1", colour="red")
    cloud.remove_instance("db1")
    with pytest.raises(CloudNotFound):
        cloud.describe_instance(CREDS, "db1")
    with pytest.raises(KeyError):
        cloud.remove_instance("db1")
    assert cloud.count("delete") == 0  # hooks are not API calls


def test_error_classes_carry_codes() -> None:
    assert CloudNotFound().code == "InstanceNotFound"
    assert CloudBusy().code == "InvalidInstanceState"
    assert issubclass(CloudBusy, CloudUnavailable)
    err = CloudInvalidParameter("bad", code="Custom")
    assert (err.code, err.message, str(err)) == ("Custom", "bad", "Custom: bad")
    assert CloudThrottled(retry_after=2).retry_after == 2.0


# -- the database client -----------------------------------------------------------


@pytest.fixture
def cloud() -> SimCloud:
    """A cloud whose operations each complete after one poll."""
    return SimCloud(create_polls=1, modify_polls=1, delete_polls=1)


@pytest.fixture
def client(cloud: SimCloud) -> DatabaseClient:
    """A database client on the ``cloud`` fixture."""
    return DatabaseClient(cloud, CREDS)


def test_client_satisfies_protocol(client: DatabaseClient) -> None:
    assert isinstance(client, ExternalClient)


def test_parameters_validate_types() -> None:
    with pytest.raises(TypeError):
        DatabaseParameters(storageGB="20")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        DatabaseParameters(storageGB=True)
    with pytest.raises(TypeError):
        DatabaseParameters(version=15)  # type: ignore[arg-type]
    assert DatabaseParameters().version is None


def test_observe_absent(client: DatabaseClient) -> None:
    obs = client.observe(resource())
    assert (obs.exists, obs.up_to_date) == (False, False)


def test_client_lifecycle_pending_available_late_init(
    cloud: SimCloud, client: DatabaseClient
) -> None:
    res = resource()
    creation = client.create(res)
    assert creation.connection == {"username": "admin", "password": PASSWORD}
    # The cloud's answer, as an observation: still creating.
    assert creation.observation is not None and creation.observation.exists
    assert creation.observation.status is ProviderStatus.PENDING
    assert cloud.password_of("db1") == PASSWORD
    assert cloud.creations("db1") == 1
    assert cloud.instances()["db1"]["state"] == "creating"

    obs = client.observe(res)  # this poll completes the creation
    assert obs.exists and obs.status is ProviderStatus.AVAILABLE
    assert obs.up_to_date
    assert obs.late_init == {"version": "15"}
    assert obs.connection == {
        "endpoint": "db1.db.simcloud.internal",
        "port": "5432",
        "username": "admin",
    }
    assert obs.observed == {
        "state": "available",
        "version": "15",
        "endpoint": "db1.db.simcloud.internal",
    }

    pinned = attrs.evolve(res, parameters=DatabaseParameters(version="15"))
    assert client.observe(pinned).late_init == {}


def test_observe_pending_while_creating() -> None:
    cloud = SimCloud(create_polls=3)
    client = DatabaseClient(cloud, CREDS)
    client.create(resource())
    obs = client.observe(resource())
    assert obs.exists
    assert obs.status is ProviderStatus.PENDING
    assert obs.message == "creating the instance"


def test_observe_failed(cloud: SimCloud, client: DatabaseClient) -> None:
    client.create(resource())
    cloud.fail_instance("db1", "the host was lost")
    obs = client.observe(resource())
    assert obs.status is ProviderStatus.FAILED
    assert obs.message == "the host was lost"


def test_up_to_date_detects_drift_and_spec_changes(cloud: SimCloud, client: DatabaseClient) -> None:
    client.create(resource())
    assert client.observe(resource()).up_to_date
    cloud.drift("db1", size="large")
    assert not client.observe(resource()).up_to_date
    cloud.drift("db1", size="small", storage_gb=30)
    assert not client.observe(resource()).up_to_date
    cloud.drift("db1", storage_gb=20)
    assert client.observe(resource()).up_to_date
    newer = resource(parameters=DatabaseParameters(version="16"))
    assert not client.observe(newer).up_to_date
    other_engine = resource(parameters=DatabaseParameters(engine="mysql"))
    assert not client.observe(other_engine).up_to_date


def test_update_brings_instance_to_spec(cloud: SimCloud, client: DatabaseClient) -> None:
    client.create(resource())
    client.observe(resource())
    wanted = resource(parameters=DatabaseParameters(storageGB=80, size="medium"))
    client.update(wanted)
    obs = client.observe(wanted)  # the poll that completes the modification
    assert obs.up_to_date and obs.status is ProviderStatus.AVAILABLE
    assert cloud.instances()["db1"]["storage_gb"] == 80
    client.update(wanted)  # running it twice is harmless
    assert cloud.instances()["db1"]["state"] == "available"


def test_create_of_existing_instance_is_success(cloud: SimCloud, client: DatabaseClient) -> None:
    client.create(resource(key="first"))
    creation = client.create(resource(key="second"))
    assert creation.connection["username"] == "admin"
    assert cloud.creations("db1") == 1
    assert cloud.count("create", "db1", ok=False) == 1


def test_create_passes_idempotency_key_and_drops_none(cloud: SimCloud) -> None:
    client = DatabaseClient(cloud, CREDS)
    client.create(resource(key="k1"))
    assert cloud.instances()["db1"]["version"] == "15"
    assert cloud.create_instance(CREDS, "db1", PG, client_token="k1")["name"] == "db1"
    with pytest.raises(CloudAlreadyExists):
        cloud.create_instance(CREDS, "db1", PG, client_token="k2")


def test_create_without_password_or_key() -> None:
    cloud = SimCloud()
    client = DatabaseClient(cloud, CREDS)
    creation = client.create(resource(password=None, key=""))
    assert creation.connection == {"username": "admin", "password": ""}
    assert cloud.password_of("db1") is None


def test_create_accepts_mapping_parameters(cloud: SimCloud, client: DatabaseClient) -> None:
    client.create(resource(parameters={"engine": "mysql", "storage_gb": 15, "version": None}))
    assert cloud.instances()["db1"]["engine"] == "mysql"
    assert cloud.instances()["db1"]["version"] == "8.0"


def test_delete_and_delete_of_missing(cloud: SimCloud, client: DatabaseClient) -> None:
    client.delete(resource())  # missing: success
    client.create(resource())
    client.observe(resource())
    client.delete(resource())
    obs = client.observe(resource())  # the poll that finishes the deletion
    assert not obs.exists
    client.delete(resource())
    assert cloud.count("delete", ok=False) == 2


@pytest.mark.parametrize(
    ("error", "expected", "reason"),
    [
        (CloudThrottled(retry_after=4.0), Throttled, "Throttled"),
        (CloudUnavailable(), ExternalError, "ProviderUnavailable"),
        (CloudBusy(), ExternalError, "ProviderBusy"),
        (CloudInvalidParameter(), TerminalError, "InvalidParameter"),
        (CloudAuthError(), CredentialsError, "InvalidCredentials"),
        (CloudError(), ExternalError, "ProviderError"),
    ],
)
@pytest.mark.parametrize("operation", ["describe", "create", "modify", "delete"])
def test_error_mapping(
    cloud: SimCloud,
    error: CloudError,
    expected: type[HandledError],
    reason: str,
    operation: str,
) -> None:
    client = DatabaseClient(cloud, CREDS)
    cloud.create_instance(CREDS, "db1", PG)
    cloud.describe_instance(CREDS, "db1")
    cloud.fail_next(operation, error)
    call = {
        "describe": client.observe,
        "create": client.create,
        "modify": client.update,
        "delete": client.delete,
    }[operation]
    with pytest.raises(HandledError) as info:
        call(resource(parameters=DatabaseParameters(storageGB=40)))
    assert type(info.value) is expected
    assert info.value.reason == reason
    assert error.code in info.value.message
    if expected is Throttled:
        assert info.value.retry_after == 4.0
    if expected is TerminalError:
        assert info.value.severity is Severity.TERMINAL
    else:
        assert info.value.severity is Severity.RETRYABLE


def test_update_of_invalid_spec_is_terminal(cloud: SimCloud, client: DatabaseClient) -> None:
    client.create(resource())
    client.observe(resource())
    with pytest.raises(TerminalError) as info:
        client.update(resource(parameters=DatabaseParameters(engine="mysql")))
    assert info.value.reason == "InvalidParameter"
    with pytest.raises(TerminalError):
        client.create(resource("db2", DatabaseParameters(storageGB=2)))


def test_update_while_busy_is_retryable(cloud: SimCloud, client: DatabaseClient) -> None:
    client.create(resource())
    with pytest.raises(ExternalError) as info:
        client.update(resource(parameters=DatabaseParameters(storageGB=40)))
    assert info.value.reason == "ProviderBusy"
    assert not isinstance(info.value, TerminalError)


def test_no_secret_in_any_error_message() -> None:
    secret = CREDS[1]
    cloud = SimCloud(credentials={CREDS[0]: secret})
    good = DatabaseClient(cloud, CREDS)
    bad = DatabaseClient(cloud, (CREDS[0], "wrong-" + secret))
    messages: list[str] = []
    attempts = [
        lambda: bad.observe(resource()),
        lambda: bad.create(resource()),
        lambda: good.create(resource("z", password="short")),
        lambda: good.create(resource("x", DatabaseParameters(engine="oracle"))),
        lambda: good.update(resource(parameters=DatabaseParameters(size="huge"))),
    ]
    good.create(resource())
    for attempt in attempts:
        with pytest.raises(HandledError) as info:
            attempt()
        messages.append(info.value.message)
        messages.append(str(info.value.__cause__))
    cloud.fail_next("create", CloudInvalidParameter(f"bad password {PASSWORD}"))
    with pytest.raises(TerminalError) as leaked:
        good.create(resource("y"))
    messages.append(leaked.value.message)
    assert "***" in leaked.value.message  # the client redacts as a last resort
    for message in messages:
        assert PASSWORD not in message
        assert secret not in message
        assert "short" not in message.replace("characters", "")
    assert secret not in repr(good) and secret not in repr(bad)


def test_closed_client_refuses_calls(client: DatabaseClient) -> None:
    client.close()
    client.close()
    with pytest.raises(RuntimeError):
        client.observe(resource())


# -- the connector ---------------------------------------------------------------


def config(credentials: dict[str, str]) -> ProviderConfig:
    """A provider config holding ``credentials``."""
    return ProviderConfig(name="default", spec={}, credentials=credentials)


def test_connector_builds_working_client() -> None:
    cloud = SimCloud(credentials={CREDS[0]: CREDS[1]})
    connector = DatabaseConnector(cloud)
    client = connector.connect(
        resource(), config({"accessKeyId": CREDS[0], "secretAccessKey": CREDS[1]})
    )
    assert isinstance(client, DatabaseClient)
    client.create(resource())
    assert cloud.creations("db1") == 1


@pytest.mark.parametrize(
    ("credentials", "missing"),
    [
        ({"secretAccessKey": "topsecret-value"}, ["accessKeyId"]),
        ({"accessKeyId": "AKID-VALUE"}, ["secretAccessKey"]),
        ({"accessKeyId": "", "secretAccessKey": ""}, ["accessKeyId", "secretAccessKey"]),
    ],
)
def test_connector_missing_keys(credentials: dict[str, str], missing: list[str]) -> None:
    with pytest.raises(CredentialsError) as info:
        DatabaseConnector(SimCloud()).connect(resource(), config(credentials))
    assert info.value.reason == "CredentialsMissing"
    for key in missing:
        assert key in info.value.message
    for value in credentials.values():
        if value:
            assert value not in info.value.message


def test_wrong_credentials_map_to_credentials_error() -> None:
    cloud = SimCloud(credentials={CREDS[0]: CREDS[1]})
    client = DatabaseConnector(cloud).connect(
        resource(), config({"accessKeyId": "OTHER", "secretAccessKey": "nope-nope"})
    )
    with pytest.raises(CredentialsError) as info:
        client.observe(resource())
    assert info.value.reason == "InvalidCredentials"
    assert "nope-nope" not in info.value.message
