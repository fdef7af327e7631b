"""The harness as users reach for it: the behaviours docs/harness.md lists, and the page itself."""

from __future__ import annotations

import inspect
import itertools
import re
from pathlib import Path

import pytest

from lifecycle import testing
from lifecycle.core.values import ResultKind
from lifecycle.kube.errors import Conflict, TooManyRequests
from lifecycle.kube.ratelimit import ItemExponentialBackoff
from lifecycle.machines.claim import DATABASE_BINDING
from lifecycle.machines.database import DatabaseInstance
from lifecycle.machines.managed import ManagedResourceMachine
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import (
    claim_environment,
    database_manifest,
    simulated_environment,
)
from lifecycle.testing import (
    Backoff,
    Environment,
    History,
    NotSettled,
    claim_manifest,
    class_manifest,
)
from lifecycle.testing.plugin import build_environment

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
KIND = "DatabaseInstance"


def ready_env(*names: str, **options) -> tuple[Environment, SimCloud]:
    env, cloud = simulated_environment(**options)
    for name in names:
        env.apply(database_manifest(name))
    env.run_until_idle()
    return env, cloud


def waits(steps) -> list[float]:
    return [(b.time - a.time).total_seconds() for a, b in itertools.pairwise(steps)]


# --------------------------------------------------------------- the page itself
def undocumented(page: str, names: list[str]) -> list[str]:
    """The names the page never mentions in backticks (as `name`, `x.name` or `name(...)`)."""
    return [n for n in names
            if not re.search(rf"`(?:[\w.]*\.)?{re.escape(n)}(?:\(|`|\s|=|\[)", page)]


def public_names() -> list[str]:
    names = [*testing.__all__, "lifecycle_env", "build_environment"]
    names += [n for n, _ in inspect.getmembers(Environment) if not n.startswith("_")]
    names += ["steps", "faults", "operator_api", "clock", "api", "kinds", "reconcilers",
              "backoff", "cloud"]
    names += [n for n, _ in inspect.getmembers(SimCloud) if not n.startswith("_")]
    names += ["calls", "Result", "ResultKind", "Condition", "Step", "Queued"]
    return sorted(set(names))


def test_every_public_name_of_the_harness_is_in_the_reference():
    page = (DOCS / "harness.md").read_text()
    assert undocumented(page, public_names()) == []


def test_the_name_check_catches_a_missing_name():
    page = (DOCS / "harness.md").read_text()
    broken = re.sub(r"`(env\.)?retrying(\(\))?`", "the retry list", page)
    assert undocumented(broken, public_names()) == ["retrying"]


def behaviour_rows(page: str) -> list[list[str]]:
    section = page.split("## What you can test, and how")[1].split("\n## ")[0]
    return [[c.strip() for c in line.strip("|").split("|")]
            for line in section.splitlines() if re.match(r"\| \d+ \|", line)]


def slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def broken_anchors(page: str) -> list[str]:
    anchors = {slug(h) for h in re.findall(r"^#+ (.+)$", page, re.M)}
    targets = re.findall(r"\]\(#([^)]+)\)", page)
    return [t for t in targets if t not in anchors]


def test_the_reference_lists_twenty_behaviours_with_their_names_and_examples():
    page = (DOCS / "harness.md").read_text()
    rows = behaviour_rows(page)
    assert len(rows) >= 20
    assert [int(r[0]) for r in rows] == list(range(1, len(rows) + 1))
    assert all(r[2].startswith("`") and "](#" in r[3] for r in rows)
    assert broken_anchors(page) == []
    assert broken_anchors(page + "\nsee [x](#no-such-section)\n") == ["no-such-section"]


def concepts_ready_table(text: str) -> dict[str, tuple[str, str]]:
    section = text.split("## States")[1].split("\n## ")[0]
    found = {}
    for line in section.splitlines():
        match = re.match(r"\| `(\w+)`[^|]*\|[^|]*\| (\w+), `(\w+)` \|", line)
        if match:
            found[match.group(1)] = (match.group(2), match.group(3))
    return found


def reference_ready_table(text: str) -> dict[str, tuple[str, str]]:
    section = text.split("## States")[1].split("\n## ")[0]
    return {m.group(1): (m.group(2), m.group(3))
            for m in re.finditer(r"^\| `(\w+)` \|.*?Ready=(\w+) \((\w+)\)", section, re.M)}


def disagreements(concepts: str, reference: str) -> list[str]:
    ours, generated = concepts_ready_table(concepts), reference_ready_table(reference)
    problems = [f"{state}: concepts say {ours.get(state)}, reference {ready}"
                for state, ready in generated.items() if ours.get(state) != ready]
    limit = re.search(r"the last transitions \((\d+) by default\)", concepts)
    if limit is None or int(limit.group(1)) != ManagedResourceMachine.history_limit:
        problems.append("history limit")
    stuck = re.search(r"`max_in_state` \((\d+) min by default for ([\w, ]+)\)", concepts)
    timing = ManagedResourceMachine.timing
    said = set(re.findall(r"[A-Z]\w+", stuck.group(2))) if stuck else set()
    if stuck is None or {s.capitalize() for s in timing.max_in_state} != said or any(
            f"`{state}` |" in reference and f"Stuck after {stuck.group(1)} min" not in
            reference.split(f"| `{state}` |")[1].split("\n")[0]
            for state in timing.max_in_state):
        problems.append("Stuck threshold")
    return problems


def test_concepts_agree_with_the_generated_reference_page():
    concepts = (DOCS / "concepts.md").read_text()
    reference = (DOCS / "reference" / "ManagedResourceMachine.md").read_text()
    assert len(reference_ready_table(reference)) == len(ManagedResourceMachine.table().states)
    assert disagreements(concepts, reference) == []
    wrong = concepts.replace("| True, `Available` |", "| True, `Ready` |")
    assert disagreements(wrong, reference) == [
        "ready: concepts say ('True', 'Ready'), reference ('True', 'Available')"]
    slower = concepts.replace("(30 min by default for", "(45 min by default for")
    assert disagreements(slower, reference) == ["Stuck threshold"]


# ------------------------------------------------------------ API faults, backoff
def test_backoff_is_the_operators_rule():
    limiter, ours = ItemExponentialBackoff(0.5, 45.0), Backoff(0.5, 45.0)
    assert [limiter.when("k") for _ in range(80)] == [ours.delay(n) for n in range(1, 81)]
    with pytest.raises(ValueError, match="0 < base <= cap"):
        Backoff(base=0)


def test_a_staged_api_failure_is_retried_with_the_operators_backoff():
    env, _ = ready_env("orders", backoff=Backoff(base=2, cap=10))
    fault = env.faults.fail("get", KIND, "orders", times=5)
    env.enqueue(KIND, "orders")
    steps = [s for s in env.run_until_idle() if s.name == "orders"]
    assert [s.failed for s in steps] == [True] * 5 + [False]
    assert all("injected fault: get" in s.error for s in steps[:5])
    assert waits(steps) == [2.0, 4.0, 8.0, 10.0, 10.0]
    assert fault.fired == 5 and env.queued(KIND, "orders").attempts == 0


@pytest.mark.parametrize("verb", ["get", "update", "update_status", "create"])
def test_each_verb_of_the_managed_reconciler_surfaces_as_a_step_error(verb):
    env, _ = simulated_environment()
    fault = env.faults.fail(verb, times=1)
    env.apply(database_manifest("orders"))
    steps = env.run_until_idle()
    assert fault.fired == 1
    failed = [s for s in steps if s.error]
    assert len(failed) == 1 and "injected fault" in failed[0].error
    assert env.state(KIND, "orders") == "ready"


@pytest.mark.parametrize("verb", ["list", "delete"])
def test_the_claim_reconcilers_verbs_surface_as_step_errors(verb):
    claims = claim_environment(DATABASE_BINDING)
    claims.apply_class(class_manifest("standard", default=True))
    claims.apply(claim_manifest("app", secret_name="app"))
    if verb == "delete":
        claims.run()
        fault = claims.env.faults.fail("delete", KIND, times=2)
        claims.env.delete("DatabaseClaim", "app")
    else:
        fault = claims.env.faults.fail("list", "DatabaseInstanceClass", times=2)
    steps = claims.run()
    failed = [s for s in steps if s.error]
    assert fault.fired == 2 and [s.kind for s in failed] == ["DatabaseClaim"] * 2
    assert waits(failed) == [1.0]


def test_a_fault_aimed_at_one_object_leaves_the_others_alone():
    env, _ = ready_env("orders", "users")
    env.faults.fail("*", KIND, "orders", times=2)
    for name in ("orders", "users"):
        env.enqueue(KIND, name)
    steps = env.run_until_idle()
    assert [s.name for s in steps if s.error] == ["orders", "orders"]
    assert env.state(KIND, "users") == "ready"


def test_probability_faults_are_reproducible_by_seed():
    def run(seed: int) -> list[tuple[str, str | None]]:
        env, _ = simulated_environment(seed=seed)
        env.faults.fail("*", KIND, error=Conflict, probability=0.2)
        for name in ("a", "b", "c"):
            env.apply(database_manifest(name))
        return [(s.name, s.error) for s in env.run_until_idle()]

    first = run(5)
    assert first == run(5) and any(error for _, error in first)
    assert first != run(6)


def test_the_apis_429_is_retried_no_sooner_than_retry_after():
    env, _ = ready_env("orders")
    env.faults.fail("get", KIND, "orders", error=TooManyRequests(retry_after=42), times=1)
    step = env.reconcile(KIND, "orders")
    assert step.result.kind is ResultKind.BACKOFF and step.result.after == 42
    queued = env.queued(KIND, "orders")
    assert (queued.delay, queued.reason, queued.attempts) == (42.0, "Backoff", 1)


def test_bad_fault_rules_are_one_line_errors():
    env, _ = simulated_environment()
    with pytest.raises(ValueError, match=r"^unknown verb 'frobnicate'; expected one of"):
        env.faults.fail("frobnicate")
    with pytest.raises(ValueError, match="times must be"):
        env.faults.fail("get", times=0)
    with pytest.raises(ValueError, match="probability"):
        env.faults.fail("get", probability=2)


# ---------------------------------------------------------------- the queue view
def test_attempts_and_next_due_time_are_visible_per_object():
    env, _ = ready_env("orders", "users")
    env.faults.fail("get", KIND, "orders")
    env.enqueue(KIND, "orders")
    env.enqueue(KIND, "users")
    env.advance(10)  # attempts at 0, 1, 3 and 7 s; the next at 15 s
    queued = env.queued(KIND, "orders")
    assert queued.attempts == 4 and queued.reason == "Backoff"
    assert queued.delay == 5.0
    assert (queued.due - env.clock.now()).total_seconds() == 5.0
    assert "injected fault: get" in queued.error
    assert [q.name for q in env.retrying()] == ["orders"]
    assert env.queued(KIND, "users").attempts == 0
    assert env.queued(KIND, "nobody") is None


def test_waiting_on_the_provider_does_not_grow_the_backoff():
    env, _ = simulated_environment(cloud=SimCloud(create_polls=12))
    env.apply(database_manifest("orders"))
    steps = env.run_until_idle()
    creating = [s for s in steps if s.after == "creating" and
                s.result.kind is ResultKind.REQUEUE_AFTER]
    assert len(creating) >= 10
    assert {s.result.after for s in creating} == {creating[0].result.after}
    assert set(waits(creating)) == {creating[0].result.after}
    assert not any(s.failed for s in steps)


def test_run_until_idle_reports_stuck_objects_instead_of_spinning():
    env, _ = ready_env("orders", "users")
    env.faults.fail("get", KIND, "orders")
    env.enqueue(KIND, "orders")
    start = env.clock.now()
    with pytest.raises(NotSettled) as raised:
        env.run_until_idle()
    message = str(raised.value)
    assert message.splitlines()[0] == (
        "queue did not settle: DatabaseInstance orders failed 20 reconciles in a row; "
        "still queued:")
    assert "DatabaseInstance default/orders: Backoff in 60s after 20 failed attempts" in message
    assert "users" not in message  # a Ready poll is not a problem
    assert (env.clock.now() - start).total_seconds() < 1200
    with pytest.raises(NotSettled, match="within 300s"):
        env.run_until_idle(max_attempts=None, horizon=300)
    with pytest.raises(AssertionError, match="did not settle in 3 steps"):
        env.run_until_idle(max_attempts=None, max_steps=3)


# ---------------------------------------------------------------------- apply
def test_apply_keeps_late_initialised_fields_and_changes_nothing_else():
    env, cloud = ready_env("orders")
    stored = env.get(KIND, "orders")
    assert stored["spec"]["forProvider"]["version"] == "15"
    generation = stored["metadata"]["generation"]
    env.apply(database_manifest("orders"))
    after = env.get(KIND, "orders")
    assert after["spec"] == stored["spec"]
    assert after["metadata"]["generation"] == generation
    env.run_until_idle()
    assert cloud.count("modify") == 0


def test_apply_merges_like_kubectl_apply():
    env, _ = simulated_environment()
    first = database_manifest("orders", size="medium")
    first["metadata"]["labels"] = {"team": "a", "tier": "db"}
    env.apply(first)
    obj = env.get(KIND, "orders")
    obj["metadata"]["labels"]["added-by-someone"] = "yes"
    env.api.replace(obj)
    second = database_manifest("orders")  # no size, one label fewer
    second["metadata"]["labels"] = {"team": "b"}
    second["metadata"]["annotations"] = {"note": "x"}
    env.apply(second)
    obj = env.get(KIND, "orders")
    assert obj["spec"]["forProvider"]["size"] == "small"  # removed, so the CRD default again
    assert obj["metadata"]["labels"] == {"team": "b", "added-by-someone": "yes"}
    env.apply({**second, "metadata": {**second["metadata"], "annotations": {"note": None}}})
    # (an empty annotations map is omitted, as a real server omits it)
    assert "note" not in env.get(KIND, "orders")["metadata"].get("annotations", {})
    env.apply("apiVersion: db.lifecycle.dev/v1alpha1\nkind: DatabaseInstance\n"
              "metadata: {name: orders, labels: {team: c}}\n"
              "spec: {forProvider: {engine: postgres}}\n")
    assert env.get(KIND, "orders")["metadata"]["labels"]["team"] == "c"


# -------------------------------------------------------------- fixture, history
def test_custom_kinds_get_the_same_provider_config_as_the_default():
    default = build_environment()
    custom = build_environment(kinds=[(DatabaseInstance, DatabaseConnector(SimCloud()))])
    for env in (default, custom):
        assert env.api.get("lifecycle.dev/v1alpha1", "ProviderConfig", None, "default")
        assert env.secret("default-credentials")
    config = [env.api.get("lifecycle.dev/v1alpha1", "ProviderConfig", None, "default")["spec"]
              for env in (default, custom)]
    assert config[0] == config[1]
    custom.provider_config()  # again: replaced, not refused
    custom.apply(database_manifest("orders"))
    custom.run_until_idle()
    assert custom.state(KIND, "orders") == "ready"


def test_status_history_leaves_out_self_transitions_that_steps_keep():
    env, _ = ready_env("orders")
    env.advance(300)
    assert [t[:2] for t in env.history(KIND, "orders")] == [("unclaimed", "creating"),
                                                            ("creating", "ready")]
    assert sum(s.before == s.after == "ready" for s in env.steps) >= 5


def test_history_is_bounded_by_default_and_configurable():
    env, cloud = ready_env(*[f"db-{i}" for i in range(20)], history=50,
                           cloud=SimCloud(call_log=40))
    env.advance(3600)
    assert len(env.steps) == 50 and env.steps.total > 1000
    assert env.steps.dropped == env.steps.total - 50
    assert env.steps[-1] == list(env.steps)[-1] and env.steps[-2:] == list(env.steps)[-2:]
    assert len(cloud.calls) == 40
    assert cloud.count("describe") > 1000  # counts stay exact beyond the log
    assert cloud.count("create", ok=True) == 20
    default, _ = simulated_environment()
    assert default.steps.limit == testing.DEFAULT_LIMIT == SimCloud().calls.limit
    unbounded, _ = ready_env("a", history=None, cloud=SimCloud(call_log=None))
    unbounded.advance(600)
    assert len(unbounded.steps) == unbounded.steps.total


def test_history_reads_like_a_list_and_refuses_a_bad_limit():
    log = History(3)
    for n in range(5):
        log.append(n)
    assert log == [2, 3, 4] and log[0] == 2 and log[1:] == [3, 4] and list(log) == [2, 3, 4]
    assert log.since(3) == [3, 4] and log.since(0) == [2, 3, 4]
    assert log != [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="history limit"):
        History(-1)
    with pytest.raises(ValueError, match="history limit"):
        build_environment(history="lots")


def test_the_harness_queue_and_the_operators_schedule_the_same_delays():
    from lifecycle.core.errors import UnhandledError
    from lifecycle.core.values import Result
    from lifecycle.driver.manager import Controller
    from lifecycle.driver.queue import WorkQueue

    script = [Result.backoff("Failed"), Result.backoff("Throttled", at_least=30),
              UnhandledError("API error"), Result.later(5, "Waiting"),
              Result.backoff("Failed"), Result.backoff("Failed"), Result.now("Changed"),
              Result.backoff("Failed")]

    class Scripted:
        def __init__(self) -> None:
            self.left = list(script)

        def reconcile(self, namespace, name):
            outcome = self.left.pop(0)
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome

    now = [0.0]
    queue = WorkQueue("x", rate_limiter=ItemExponentialBackoff(1.0, 60.0), clock=lambda: now[0])
    controller = Controller("x", Scripted(), source=None, queue=queue)
    env, _ = simulated_environment()
    env.reconcilers[KIND] = Scripted()
    operator, harness = [], []
    key = ("default", "orders")
    queue.add(key)
    for _ in script:
        now[0] += operator[-1] if operator else 0.0  # the worker takes the key once due
        assert queue.get(timeout=0) == key
        controller.process(key)
        queue.done(key)
        due = queue.due(key)
        operator.append(0.0 if due is None else due)
        env.reconcile(KIND, "orders")
        harness.append(env.queued(KIND, "orders").delay)
    assert operator == [1.0, 30.0, 4.0, 5.0, 1.0, 2.0, 0.0, 1.0]
    assert harness == operator


def test_run_until_idle_stops_at_a_stuck_operation():
    env, _ = simulated_environment(cloud=SimCloud(create_polls=10**6))
    env.apply(database_manifest("orders"))
    start = env.clock.now()
    with pytest.raises(NotSettled) as raised:
        env.run_until_idle()
    assert str(raised.value).splitlines() == [
        "queue did not settle: DatabaseInstance orders is Stuck; still queued:",
        "  DatabaseInstance default/orders: Waiting in 2s "
        "(Stuck: in creating for 1802s, longer than 1800s)"]
    assert 1800 <= (env.clock.now() - start).total_seconds() < 1900
    ran = env.advance(60)  # the test may still run it on
    assert ran and env.queued(KIND, "orders").stuck is not None
    with pytest.raises(NotSettled, match="within 600s"):
        env.run_until_idle(stop_when_stuck=False, horizon=600)
