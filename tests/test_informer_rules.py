"""The informer's rules, driven by a scripted list-and-watch source and a recorded sleep:
re-list diffs, watch events and bookmarks, errors and their backoff, 410 and unknown
versions, re-listing after failed watches, the resync loop, and stopping."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import lifecycle.driver.informer as informer_module
from lifecycle.driver.informer import Informer, InformerOptions, object_key
from lifecycle.kube.errors import ApiError, Gone, ResourceVersionTooLarge


def obj(name: str, rv: str, uid: str | None = None, namespace: str | None = "ns") -> dict:
    meta: dict[str, Any] = {"name": name, "resourceVersion": rv, "uid": uid or f"uid-{name}"}
    if namespace:
        meta["namespace"] = namespace
    return {"metadata": meta}


class Recorder:
    """Every notification, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def on_add(self, o: dict) -> None:
        self.calls.append(("add", o["metadata"]["name"], o["metadata"]["resourceVersion"]))

    def on_update(self, old: dict, new: dict) -> None:
        self.calls.append(("update", new["metadata"]["name"], old["metadata"]["resourceVersion"],
                           new["metadata"]["resourceVersion"]))

    def on_delete(self, o: dict) -> None:
        self.calls.append(("delete", o["metadata"]["name"], o["metadata"]["resourceVersion"]))

    def on_resync(self, o: dict) -> None:
        self.calls.append(("resync", o["metadata"]["name"]))


class Script:
    """A source whose lists and watches follow a script; ends the informer when it runs out.

    ``lists`` are ``(items, resourceVersion)``; ``watches`` are lists of events or an
    exception to raise. ``from_versions`` records the version each watch started at.
    """

    def __init__(self, lists: list, watches: list, informer_ref: list) -> None:
        self.lists = list(lists)
        self.watches = list(watches)
        self.from_versions: list[str] = []
        self.timeouts: list[tuple[float, float]] = []
        self.stops = 0
        self._ref = informer_ref

    def _end(self) -> None:
        self._ref[0]._stop.set()

    def list(self) -> tuple[list[dict], str]:
        if not self.lists:
            self._end()
            raise ApiError("script ended")
        return self.lists.pop(0)

    def watch(self, resource_version: str, *, timeout: float,
              inactivity: float) -> Iterator[tuple[str, Any]]:
        self.from_versions.append(resource_version)
        self.timeouts.append((timeout, inactivity))
        if not self.watches:
            self._end()
            return
        step = self.watches.pop(0)
        if isinstance(step, BaseException):
            raise step
        yield from step

    def stop(self) -> None:
        self.stops += 1


NO_RESYNC = InformerOptions(resync=0)


def run(lists: list, watches: list, options: InformerOptions = NO_RESYNC,
        ) -> tuple[Informer, Script, Recorder, list[float]]:
    """Run the informer's loop in this thread until the script ends; returns the sleeps."""
    ref: list[Informer] = []
    source = Script(lists, watches, ref)
    handler = Recorder()
    slept: list[float] = []

    def sleep(event: threading.Event, seconds: float) -> bool:
        if event.is_set():  # the script ended: the wait that follows is not recorded
            return True
        slept.append(seconds)
        return False

    informer = Informer("things", source, handler, options, sleep=sleep)
    ref.append(informer)
    informer._run()
    return informer, source, handler, slept


@pytest.fixture(autouse=True)
def no_jitter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(informer_module.random, "random", lambda: 0.0)


def test_object_key_is_namespace_and_name_and_none_for_cluster_scope() -> None:
    assert object_key(obj("a", "1")) == ("ns", "a")
    assert object_key(obj("a", "1", namespace=None)) == (None, "a")
    assert object_key({"metadata": {"namespace": "", "name": "b"}}) == (None, "b")


def test_the_first_list_adds_everything_then_the_watch_applies_events_in_order() -> None:
    informer, source, handler, _ = run(
        [([obj("a", "5"), obj("b", "6")], "10")],
        [[("ADDED", obj("c", "11")), ("MODIFIED", obj("a", "12")), ("DELETED", obj("b", "13"))]],
    )
    assert handler.calls == [("add", "a", "5"), ("add", "b", "6"), ("add", "c", "11"),
                             ("update", "a", "5", "12"), ("delete", "b", "13")]
    assert source.from_versions == ["10", "13"]  # the second watch resumes after the last event
    assert sorted(o["metadata"]["name"] for o in informer.items()) == ["a", "c"]
    assert informer.get(("ns", "a"))["metadata"]["resourceVersion"] == "12"
    assert informer.get(("ns", "b")) is None and len(informer) == 2
    assert informer.synced.is_set() and informer.resource_version == "13"
    assert (informer.stats.lists, informer.stats.watches, informer.stats.events) == (1, 2, 3)


def test_a_bookmark_moves_the_version_without_an_event() -> None:
    informer, source, handler, slept = run(
        [([], "10")],
        [[("BOOKMARK", {"metadata": {"resourceVersion": "20"}})],
         [("BOOKMARK", {"metadata": {}})]],
    )
    assert handler.calls == [] and informer.stats.events == 0
    assert source.from_versions == ["10", "20", "20"]  # a bookmark without a version keeps it
    assert slept == []  # a watch that delivered a bookmark is not a failure


def test_watch_timeouts_are_jittered_from_the_options() -> None:
    opts = InformerOptions(resync=0, watch_timeout=40.0, inactivity_timeout=7.0)
    _, source, _, _ = run([([], "1")], [[("BOOKMARK", {"metadata": {"resourceVersion": "2"}})]],
                          opts)
    assert source.timeouts[0] == (40.0, 7.0)  # random() is 0 here: no jitter


def test_a_watch_that_ends_without_any_event_backs_off_like_an_error() -> None:
    opts = InformerOptions(resync=0, backoff_base=0.5, backoff_cap=3.0)
    informer, source, _, slept = run([([], "1")], [[], [], [], [], []], opts)
    assert slept == [0.5, 1.0, 2.0, 3.0, 3.0]  # doubling, capped
    assert informer.stats.errors == 0  # not counted as errors
    assert source.from_versions == ["1"] * 6


def test_errors_back_off_and_a_delivering_watch_resets_the_backoff() -> None:
    opts = InformerOptions(resync=0, backoff_base=1.0, backoff_cap=100.0, relist_after_errors=0)
    informer, _, _, slept = run(
        [([], "1")],
        [ApiError("boom"), ApiError("boom"), [("ADDED", obj("a", "2"))], ApiError("boom")],
        opts,
    )
    assert slept == [1.0, 2.0, 1.0]
    assert informer.stats.errors == 3
    assert informer.stats.lists == 1  # relist_after_errors=0: never re-lists for errors


def test_backoff_jitter_adds_up_to_a_fifth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(informer_module.random, "random", lambda: 0.5)
    opts = InformerOptions(resync=0, backoff_base=2.0, backoff_cap=30.0)
    _, _, _, slept = run([([], "1")], [[]], opts)
    assert slept == [pytest.approx(2.2)]


def test_the_backoff_exponent_stops_growing_and_the_cap_holds() -> None:
    informer = Informer("x", None, Recorder(), InformerOptions(backoff_base=1e-9,  # type: ignore[arg-type]
                                                              backoff_cap=1e9))
    assert informer._backoff(1) == pytest.approx(1e-9)
    assert informer._backoff(3) == pytest.approx(4e-9)
    assert informer._backoff(21) == pytest.approx(1e-9 * 2 ** 20)
    assert informer._backoff(40) == pytest.approx(1e-9 * 2 ** 20)  # exponent capped at 20
    capped = Informer("y", None, Recorder(), InformerOptions(backoff_base=1.0,  # type: ignore[arg-type]
                                                            backoff_cap=5.0))
    assert capped._backoff(10) == 5.0


def test_gone_relists_and_delivers_the_difference() -> None:
    informer, source, handler, slept = run(
        [([obj("a", "5"), obj("b", "6"), obj("c", "7")], "10"),
         ([obj("a", "5"), obj("b", "16"), obj("c", "17", uid="new-c"), obj("d", "18")], "20")],
        [Gone("too old")],
    )
    assert handler.calls[3:] == [
        ("delete", "c", "7"),          # replaced by another object of that name
        ("update", "b", "6", "16"),    # changed meanwhile
        ("add", "c", "17"), ("add", "d", "18"),
    ]
    assert ("delete", "a", "5") not in handler.calls and ("update", "a", "5", "5") not in \
        handler.calls  # unchanged: nothing delivered
    assert informer.stats.relists_after_gone == 1 and informer.stats.lists == 2
    assert slept == [] and source.from_versions == ["10", "20"]


def test_a_vanished_object_is_deleted_by_a_relist() -> None:
    _, _, handler, _ = run([([obj("a", "5")], "10"), ([], "20")], [Gone("too old")])
    assert handler.calls == [("add", "a", "5"), ("delete", "a", "5")]


def test_an_unknown_version_relists_at_once() -> None:
    informer, _, _, slept = run([([], "10"), ([], "3")],
                                [ResourceVersionTooLarge("too large")])
    assert informer.stats.relists_after_unknown_version == 1 and informer.stats.lists == 2
    assert informer.stats.errors == 0 and slept == []


def test_an_error_event_is_raised_as_its_status() -> None:
    status = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    informer, _, _, _ = run([([], "10"), ([], "20")], [[("ERROR", status)]])
    assert informer.stats.relists_after_gone == 1
    informer, _, _, slept = run([([], "10")], [[("ERROR", "not a status")]])
    assert informer.stats.errors == 1 and len(slept) == 1


def test_watches_failing_before_any_event_relist_after_the_limit() -> None:
    opts = InformerOptions(resync=0, backoff_base=1.0, relist_after_errors=2)
    informer, source, _, slept = run(
        [([], "10"), ([], "30")],
        [ApiError("a"), ApiError("b"), ApiError("c")],
        opts,
    )
    assert informer.stats.relists_after_errors == 1 and informer.stats.lists == 2
    assert source.from_versions == ["10", "10", "30", "30"]
    assert slept == [1.0, 2.0, 4.0]  # the failure count keeps growing across the re-list


def test_a_watch_that_delivered_before_failing_does_not_count_towards_relisting() -> None:
    def failing_after(event: tuple) -> Iterator:
        yield event
        raise ApiError("cut")

    opts = InformerOptions(resync=0, relist_after_errors=2)
    informer, _, _, _ = run(
        [([], "10")],
        [failing_after(("ADDED", obj("a", "11"))), ApiError("x"),
         failing_after(("ADDED", obj("b", "12"))), ApiError("y")],
        opts,
    )
    assert informer.stats.relists_after_errors == 0 and informer.stats.errors == 4


def test_a_failed_list_is_retried_with_backoff() -> None:
    opts = InformerOptions(resync=0, backoff_base=1.0, relist_after_errors=1)

    class FailsOnce(Script):
        failed = False

        def list(self) -> tuple[list[dict], str]:
            if not self.failed:
                self.failed = True
                raise ApiError("list failed")
            return super().list()

    ref: list[Informer] = []
    source = FailsOnce([([obj("a", "1")], "5")], [], ref)
    slept: list[float] = []
    informer = Informer("t", source, Recorder(), opts,
                        sleep=lambda e, s: e.is_set() or bool(slept.append(s)))
    ref.append(informer)
    informer._run()
    assert slept == [1.0] and informer.stats.errors == 1
    assert informer.stats.relists_after_errors == 0  # a failed list is not a failed watch
    assert informer.stats.lists == 1 and informer.synced.is_set()


def test_the_error_message_in_the_log_is_its_first_line_cut_to_200(
        caplog: pytest.LogCaptureFixture) -> None:
    assert informer_module._short(ApiError("first\nsecond")) == "first"
    assert informer_module._short(ApiError("x" * 300)) == "x" * 200
    assert informer_module._short(ApiError("")) == ""
    with caplog.at_level("WARNING", logger="lifecycle.driver.informer"):
        run([([], "1")], [ApiError("line one\nline two")],
            InformerOptions(resync=0, backoff_base=1.0, relist_after_errors=0))
    assert any("(ApiError: line one); retrying in 1.00s" in r.getMessage()
               for r in caplog.records)


def test_stopping_during_the_wait_ends_the_loop() -> None:
    ref: list[Informer] = []
    source = Script([([], "1")], [[], []], ref)
    waits: list[float] = []

    def sleep(event: threading.Event, seconds: float) -> bool:
        waits.append(seconds)
        return True  # stopped while waiting

    informer = Informer("t", source, Recorder(), InformerOptions(resync=0), sleep=sleep)
    ref.append(informer)
    informer._run()
    assert len(waits) == 1 and source.from_versions == ["1"]


def test_resync_offers_every_cached_object_once_synced() -> None:
    ref: list[Informer] = []
    handler = Recorder()
    rounds: list[float] = []
    informer: Informer

    def sleep(event: threading.Event, seconds: float) -> bool:
        rounds.append(seconds)
        if len(rounds) == 2:  # synced only after the first round
            informer._cache = {("ns", n): informer._pack(obj(n, v))
                               for n, v in (("a", "1"), ("b", "2"))}
            informer.synced.set()
        return len(rounds) > 4

    informer = Informer("t", Script([], [], ref), handler, InformerOptions(resync=30.0),
                        sleep=sleep)
    ref.append(informer)
    informer._resync_loop()
    assert rounds == [30.0] * 5
    assert informer.stats.resyncs == 3  # rounds 2, 3 and 4; round 1 was not synced
    assert handler.calls == [("resync", "a"), ("resync", "b")] * 3


def test_resync_stops_between_objects_when_stopped() -> None:
    handler = Recorder()
    informer = Informer("t", Script([], [], []), handler, InformerOptions(resync=1.0),
                        sleep=lambda e, s: e.is_set())
    informer._cache = {("ns", n): informer._pack(obj(n, v))
                       for n, v in (("a", "1"), ("b", "2"))}
    informer.synced.set()
    handler.on_resync = lambda o: (handler.calls.append(("resync", o["metadata"]["name"])),
                                   informer._stop.set())  # type: ignore[method-assign]
    informer._resync_loop()
    assert handler.calls == [("resync", "a")]


def test_start_runs_a_resync_thread_only_when_resync_is_on() -> None:
    class Blocking:
        def __init__(self) -> None:
            self.stopped = threading.Event()

        def list(self) -> tuple[list, str]:
            return [], "1"

        def watch(self, rv: str, *, timeout: float, inactivity: float) -> Iterator:
            self.stopped.wait(5)
            return iter(())

        def stop(self) -> None:
            self.stopped.set()

    for resync, threads in ((0, ["informer-w"]), (60.0, ["informer-w", "resync-w"])):
        source = Blocking()
        informer = Informer("w", source, Recorder(), InformerOptions(resync=resync)).start()
        assert [t.name for t in informer._threads] == threads
        assert informer.wait_synced(5)
        informer.stop()
        assert source.stopped.is_set()
        assert not any(t.is_alive() for t in informer._threads)


def test_stop_gives_up_on_a_thread_that_does_not_end_within_its_timeout() -> None:
    release = threading.Event()

    class Stuck:
        def list(self) -> tuple[list, str]:
            return [], "1"

        def watch(self, rv: str, *, timeout: float, inactivity: float) -> Iterator:
            release.wait(30)  # ignores stop()
            return iter(())

        def stop(self) -> None:
            pass

    informer = Informer("s", Stuck(), Recorder(), InformerOptions(resync=0)).start()
    assert informer.wait_synced(5)
    started = time.monotonic()
    informer.stop(timeout=0.2)
    assert time.monotonic() - started < 5
    release.set()


def test_an_object_without_a_name_keys_as_the_empty_name() -> None:
    assert object_key({"metadata": {"namespace": "ns"}}) == ("ns", "")


def test_a_delete_of_an_object_never_cached_is_still_delivered() -> None:
    informer, _, handler, _ = run([([], "1")], [[("DELETED", obj("ghost", "2"))]])
    assert handler.calls == [("delete", "ghost", "2")] and len(informer) == 0


def test_every_relist_is_counted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="lifecycle.driver.informer"):
        informer, _, _, _ = run(
            [([], "10"), ([], "20"), ([], "30"), ([], "40"), ([], "50")],
            [Gone("a"), Gone("b"), ResourceVersionTooLarge("c"), ResourceVersionTooLarge("d")],
        )
    assert informer.stats.relists_after_gone == 2
    assert informer.stats.relists_after_unknown_version == 2
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("watch of things expired (410); re-listing") == 2
    assert "the server never issued resourceVersion 30 of things (504); re-listing" in messages
    assert "the server never issued resourceVersion 40 of things (504); re-listing" in messages


def test_the_threads_are_daemons_and_wait_synced_honours_its_timeout() -> None:
    class Never:
        def __init__(self) -> None:
            self.stopped = threading.Event()

        def list(self) -> tuple[list, str]:
            self.stopped.wait(5)
            raise ApiError("stopped")

        def watch(self, rv: str, *, timeout: float, inactivity: float) -> Iterator:
            return iter(())

        def stop(self) -> None:
            self.stopped.set()

    source = Never()
    informer = Informer("d", source, Recorder(), InformerOptions(resync=60.0)).start()
    try:
        assert [t.daemon for t in informer._threads] == [True, True]
        assert informer.wait_synced(0.05) is False  # never listed: gives up after the timeout
    finally:
        informer.stop()


def test_events_after_a_bookmark_in_the_same_watch_are_applied() -> None:
    _, source, handler, _ = run(
        [([], "10")],
        [[("BOOKMARK", {"metadata": {"resourceVersion": "20"}}), ("ADDED", obj("c", "21"))]],
    )
    assert handler.calls == [("add", "c", "21")] and source.from_versions == ["10", "21"]


def test_the_watch_timeout_is_jittered_up_to_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(informer_module.random, "random", lambda: 0.5)
    opts = InformerOptions(resync=0, watch_timeout=40.0, inactivity_timeout=7.0)
    _, source, _, _ = run([([], "1")], [[("BOOKMARK", {"metadata": {"resourceVersion": "2"}})]],
                          opts)
    assert source.timeouts[0] == (60.0, 7.0)


def test_a_non_status_error_event_is_an_api_error_naming_it(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="lifecycle.driver.informer"):
        run([([], "10")], [[("ERROR", "not a status")]],
            InformerOptions(resync=0, backoff_base=1.0))
    assert [r.getMessage() for r in caplog.records] == [
        "list/watch of things failed (ApiError: not a status); retrying in 1.00s"]


def test_relisting_after_errors_starts_counting_again(
        caplog: pytest.LogCaptureFixture) -> None:
    opts = InformerOptions(resync=0, backoff_base=1.0, relist_after_errors=2)
    with caplog.at_level("WARNING", logger="lifecycle.driver.informer"):
        informer, source, _, _ = run(
            [([], "10"), ([], "20"), ([], "30")],
            [ApiError("a"), ApiError("b"), ApiError("c"), ApiError("d"), ApiError("e")],
            opts,
        )
    assert informer.stats.relists_after_errors == 2 and informer.stats.lists == 3
    assert source.from_versions == ["10", "10", "20", "20", "30", "30"]
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("2 watches of things in a row failed before any event; "
                          "re-listing") == 2
    assert "list/watch of things failed (ApiError: a); retrying in 1.00s" in messages


def test_a_relist_that_fails_after_failed_watches_is_retried() -> None:
    opts = InformerOptions(resync=0, backoff_base=1.0, relist_after_errors=2)
    ref: list[Informer] = []

    class ListFailsOnce(Script):
        calls = 0

        def list(self) -> tuple[list[dict], str]:
            self.calls += 1
            if self.calls == 2:
                raise ApiError("list failed")
            return super().list()

    source = ListFailsOnce([([], "10"), ([obj("a", "25")], "30")],
                           [ApiError("a"), ApiError("b")], ref)
    handler = Recorder()
    informer = Informer("t", source, handler, opts, sleep=lambda e, s: e.is_set())
    ref.append(informer)
    informer._run()
    assert source.calls == 3 and informer.stats.relists_after_errors == 1
    assert informer.stats.errors == 3 and handler.calls == [("add", "a", "25")]


def test_stopping_an_informer_never_started_is_harmless() -> None:
    source = Script([], [], [])
    informer = Informer("n", source, Recorder(), InformerOptions(resync=0))
    informer.stop(timeout=0.1)
    assert source.stops == 1 and informer._stop.is_set()
