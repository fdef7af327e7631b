"""The ``lifecycle demo --provider postgres`` scenario: an app role, its database and a grant.

:func:`demo_environment` builds a harness Environment whose ProviderConfig
points at a reachable server, and returns the manifests the demo applies:

* Role ``demo-app`` (PostgreSQL name ``lifecycle_demo_app``), allowed to log
  in with at most 10 connections and a generated password;
* Database ``demo-db`` (``lifecycle_demo_db``), owned by the admin, with its
  encoding and connection limit late-initialised from the server;
* Grant ``demo-grant``: CONNECT and CREATE on that database for the role.

The Grant may be applied with or before the others: it is retried until
the role and database exist.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, TextIO

from lifecycle.core.errors import LifecycleError
from lifecycle.testing import Environment

__all__ = ["DATABASE_NAME", "ROLE_NAME", "demo_environment", "demo_manifests", "run", "scenario"]

#: The PostgreSQL names the demo creates (and deletes again when asked).
ROLE_NAME = "lifecycle_demo_app"
DATABASE_NAME = "lifecycle_demo_db"


def demo_manifests(namespace: str = "default") -> list[dict[str, Any]]:
    """The Role, Database and Grant manifests of the demo, in apply order."""
    from lifecycle.providers.postgres.scenarios.testing import (
        manifest,  # psycopg: the postgres extra
    )

    return [
        manifest("Role", "demo-app", namespace=namespace, external_name=ROLE_NAME,
                 login=True, connection_limit=10),
        manifest("Database", "demo-db", namespace=namespace, external_name=DATABASE_NAME),
        manifest("Grant", "demo-grant", namespace=namespace, role=ROLE_NAME,
                 database=DATABASE_NAME, privileges=["CONNECT", "CREATE"]),
    ]


def demo_environment(host: str, port: int, user: str, password: str,
                     sslmode: str = "prefer") -> tuple[Environment, list[dict[str, Any]]]:
    """An Environment with the three PostgreSQL kinds pointed at ``host:port``, and the manifests.

    ``user`` and ``password`` are an admin allowed to create roles and
    databases; they go into the ProviderConfig's credentials Secret only.
    """
    from lifecycle.providers.postgres.scenarios.testing import postgres_environment

    env = postgres_environment(host, port, user, password, sslmode)
    return env, demo_manifests()


def run(out: TextIO, host: str, port: int, user: str, password: str,
        sslmode: str = "prefer", *, keep: bool = False) -> bool:
    """Apply the demo to a reachable server, report each object, then delete it unless ``keep``.

    Prints states, reasons and the connection Secrets' keys (never their
    values); returns whether everything reached Ready (and, unless
    ``keep``, was deleted again).
    """
    env, manifests = demo_environment(host, port, user, password, sslmode)
    for item in manifests:
        env.apply(item)
    _settle(env, manifests, "ready")
    ok = True
    for item in manifests:
        kind, name = item["kind"], item["metadata"]["name"]
        state = env.state(kind, name)
        ready = env.condition(kind, name, "Ready")
        ok = ok and state == "ready"
        print(f"  {kind:<9} {name:<11} {state:<8} {ready.reason if ready else ''} "
              f"{ready.message if ready else ''}".rstrip(), file=out)
        secret = item["spec"].get("writeConnectionSecretToRef", {}).get("name")
        if secret and env.exists(kind, name) and state == "ready":
            print(f"  {'':<9} secret {secret}: {', '.join(sorted(env.secret(secret)))}", file=out)
    if not keep:
        for item in reversed(manifests):
            env.delete(item["kind"], item["metadata"]["name"])
        gone = _settle(env, manifests, "deleted")
        print(f"  deleted again: {'yes' if gone else 'NO'}", file=out)
        ok = ok and gone
    print("postgres demo " + ("succeeded" if ok else "FAILED"), file=out)
    return ok


def _settle(env: Environment, manifests: list[dict[str, Any]], state: str,
            limit: float = 120.0) -> bool:
    """Run the queue until every object is in ``state`` or ``limit`` virtual seconds pass."""
    waited = 0.0
    while True:
        if all(env.state(i["kind"], i["metadata"]["name"]) == state for i in manifests):
            return True
        if waited >= limit:
            return False
        env.advance(5.0)
        waited += 5.0


def scenario(out: TextIO, options: Mapping[str, Any]) -> bool:
    """The ``postgres`` demo scenario (``lifecycle demo --provider postgres``).

    Options ``host``, ``port``, ``user``, ``sslmode`` and ``password_env``, the
    environment variable holding the admin password (kept out of argv).
    """
    variable = str(options.get("password_env") or "PGPASSWORD")
    host, port = str(options.get("host", "127.0.0.1")), int(options.get("port", 5432))
    user = str(options.get("user", "postgres"))
    password = os.environ.get(variable)
    if password is None:
        raise LifecycleError(f"set {variable} to the admin password of {user}@{host}:{port}")
    return run(out, host, port, user, password, str(options.get("sslmode", "prefer")))
