"""A connector for ``lifecycle serve --connector`` whose simulated cloud already holds an
instance someone else created: ``precious``, unmarked, available."""

from __future__ import annotations

from typing import Any

#: The instance that exists before the operator starts.
PRECIOUS = "precious"


def precious_connector() -> Any:
    """A DatabaseInstance connector on a fresh simulated cloud holding ``precious``."""
    from lifecycle.providers.simcloud import DatabaseConnector, SimCloud

    cloud = SimCloud(seed=0, create_polls=1)
    owner = ("AKIDSOMEONEELSE", "their-secret-key")  # created outside the operator
    cloud.create_instance(owner, PRECIOUS, {"engine": "postgres", "storage_gb": 20},
                          password="their-password")
    for _ in range(2):  # its creation polls: available
        cloud.describe_instance(owner, PRECIOUS)
    return DatabaseConnector(cloud)
