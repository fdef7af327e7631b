"""The mutation detector shared by the embedded API's shared view and the informer cache."""

from __future__ import annotations

import pytest

import lifecycle.kube.sharing as sharing
from lifecycle.kube.sharing import MutationDetector, SharedObjectChanged


def obj(name: str, value: str = "v", namespace: str | None = "default") -> dict:
    meta = {"name": name, "resourceVersion": "7"}
    if namespace:
        meta["namespace"] = namespace
    return {"kind": "ConfigMap", "metadata": meta, "data": {"k": value}}


def test_a_change_is_caught_when_the_object_is_handed_out_again() -> None:
    detector = MutationDetector(True, source="the test cache")
    lent = obj("a")
    detector.lend(lent)
    detector.lend(lent)  # unchanged: fine
    lent["data"]["k"] = "secret-value"
    with pytest.raises(SharedObjectChanged) as caught:
        detector.lend(lent)
    message = str(caught.value)
    assert message.startswith("ConfigMap default/a (resourceVersion 7) was changed at .data.k "
                              "after the test cache shared it")
    assert "secret-value" not in message  # never a value: it may be a Secret's


def test_touched_replaced_and_check_each_compare() -> None:
    for look in ("touched", "replaced", "check"):
        detector = MutationDetector(True)
        lent = obj("a", namespace=None)
        detector.lend(lent)
        lent["data"] = {}
        with pytest.raises(SharedObjectChanged, match=r"^ConfigMap a .* at \.data\.k"):
            getattr(detector, look)(*(() if look == "check" else (lent,)))


def test_a_replaced_object_is_forgotten() -> None:
    detector = MutationDetector(True)
    lent = obj("a")
    detector.lend(lent)
    detector.replaced(lent)
    lent["data"]["k"] = "mine now"  # no longer the cache's
    detector.check()
    detector.touched(lent)


def test_past_the_limit_the_remembered_are_checked_and_forgotten(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sharing, "MAX_REMEMBERED", 2)
    detector = MutationDetector(True)
    first, second = obj("a"), obj("b")
    detector.lend(first)
    detector.lend(second)
    first["data"]["k"] = "changed"
    with pytest.raises(SharedObjectChanged, match="default/a"):
        detector.lend(obj("c"))  # the third: the two remembered are checked first
    first["data"]["k"] = "again"
    detector.check()  # forgotten: nothing remembered is changed
    assert len(detector._lent) == 1


def test_off_it_remembers_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIFECYCLE_MUTATION_DETECTOR", "0")
    detector = MutationDetector()
    assert not detector.enabled
    lent = obj("a")
    detector.lend(lent)
    lent["data"]["k"] = "changed"
    detector.lend(lent)
    detector.touched(lent)
    detector.check()
    assert detector._lent == {}
    monkeypatch.setenv("LIFECYCLE_MUTATION_DETECTOR", "true")
    assert MutationDetector().enabled
