"""The claims demo: an application team's claim, provisioned, bound, propagated, released.

An administrator publishes two DatabaseInstanceClasses; an application team
in namespace ``shop`` claims a database by label. The claim is scheduled to
the matching class, a DatabaseInstance is provisioned from it on the
simulated cloud, the claim binds when it is Ready and receives its
connection Secret; the password is rotated and the new one reaches the
claim; finally the claim is deleted and, the class's reclaim policy being
Delete, the instance is deleted with it. Secret values are never printed.
"""

from __future__ import annotations

import base64
import sys
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from lifecycle.core.kind import EXTERNAL_NAME, connection_secret_ref
from lifecycle.machines.claim import DATABASE_BINDING
from lifecycle.providers.simcloud import SimCloud
from lifecycle.providers.simcloud.scenarios.harness import claim_environment
from lifecycle.testing import Step
from lifecycle.testing.claims import ClaimEnvironment, claim_manifest, class_manifest

__all__ = ["CLAIM", "NAMESPACE", "ROTATED", "run", "run_claim_demo"]

NAMESPACE = "shop"
CLAIM = "orders-db"
ROTATED = "rotated-by-the-dba-0001"


def run_claim_demo(out: TextIO = sys.stdout) -> bool:
    """Run the scenario, printing each transition; True when every check held."""
    cloud = SimCloud(seed=7, create_polls=3, delete_polls=2)
    world = claim_environment(DATABASE_BINDING, cloud=cloud)
    checks: list[tuple[str, bool]] = []

    def say(text: str) -> None:
        print(text, file=out)

    def check(label: str, ok: bool) -> None:
        checks.append((label, ok))
        say(f"   [{'ok' if ok else 'FAILED'}] {label}")

    visited: list[str] = []

    def show(steps: list[Step]) -> None:
        for step in steps:
            after = step.after or "deleted"
            if step.kind == "DatabaseClaim":
                visited.append(after)
            if step.before != after:
                where = f"{step.namespace or '-'}/{step.name}"
                say(f"   {step.kind:<16} {where:<42} {step.before or '-':>9} -> {after}")

    say("== administrator: two DatabaseInstanceClasses (reclaim policy Delete)")
    world.apply_class(class_manifest("standard", default=True, storageGB=20))
    world.apply_class(class_manifest("fast", labels={"tier": "fast"}, size="large",
                                     storageGB=100))
    world.env.namespace(NAMESPACE)

    say(f"== application team: DatabaseClaim {NAMESPACE}/{CLAIM} asks for tier=fast, "
        "engine version 16")
    world.apply(claim_manifest(CLAIM, NAMESPACE, selector={"tier": "fast"},
                               engineVersion="16"))
    show(world.run())
    claim = world.claim(CLAIM, NAMESPACE)
    resource = world.resource_of(CLAIM, NAMESPACE)
    check("claim scheduled to class 'fast'", claim["spec"].get("classRef") == {"name": "fast"})
    check("claim is Bound", claim["status"]["bindingPhase"] == "Bound")
    if resource is None:
        check("a DatabaseInstance was provisioned", False)
        return _summary(say, checks)
    meta = resource["metadata"]
    say(f"   provisioned DatabaseInstance {meta['namespace']}/{meta['name']}: "
        f"{resource['spec']['forProvider']}")
    external = meta["annotations"][EXTERNAL_NAME]
    secret = world.claim_secret(CLAIM, NAMESPACE) or {}
    say(f"   claim Secret {NAMESPACE}/{CLAIM}-connection keys: {', '.join(sorted(secret))}")
    check("the claim's Secret holds the instance's password",
          secret.get("password") == cloud.password_of(external))

    say("== the password is rotated on the instance and in its connection Secret")
    _rotate(world, resource, cloud)
    show(world.run())
    secret = world.claim_secret(CLAIM, NAMESPACE) or {}
    check("the rotated password reached the claim's Secret", secret.get("password") == ROTATED)

    say(f"== application team deletes the claim {NAMESPACE}/{CLAIM}")
    world.env.delete("DatabaseClaim", CLAIM, NAMESPACE)
    show(world.run())
    check("claim went Released, then Deleted",
          not world.env.exists("DatabaseClaim", CLAIM, NAMESPACE)
          and visited[-2:] == ["released", "deleted"])
    check("DatabaseInstance deleted (reclaim policy Delete)",
          not world.env.exists("DatabaseInstance", meta["name"], meta["namespace"]))
    check("external instance gone from the cloud", external not in cloud.instances())
    check("claim Secret removed", world.api.list("v1", "Secret", NAMESPACE)[0] == [])
    return _summary(say, checks)


def _rotate(world: ClaimEnvironment, resource: dict, cloud: SimCloud) -> None:
    external = resource["metadata"]["annotations"][EXTERNAL_NAME]
    cloud.reset_password(("AKIDEXAMPLE", "s3cr3t"), external, ROTATED)
    namespace, name = connection_secret_ref(resource)
    secret = world.api.get("v1", "Secret", namespace, name)
    secret["data"]["password"] = base64.b64encode(ROTATED.encode()).decode()
    world.api.replace(secret)



def _summary(say: Callable[[str], None], checks: list[tuple[str, bool]]) -> bool:
    passed = sum(ok for _, ok in checks)
    say(f"== {passed}/{len(checks)} checks passed")
    return passed == len(checks) and bool(checks)


def run(out: TextIO, options: Mapping[str, Any]) -> bool:
    """The ``claims`` demo scenario (``lifecycle demo --scenario claims``)."""
    return run_claim_demo(out)
