"""The pytest plugin of the harness: the ``lifecycle_env`` and ``real_cluster`` fixtures.

Installed with the package (entry point ``pytest11``), so any test suite that
has lifecycle installed can use it. The harness is imported only when a test
asks for the fixture, so other test suites pay nothing for the plugin.
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["build_environment", "lifecycle_env", "real_cluster"]


def build_environment(*, environment: str = "simcloud", **options: Any) -> Any:
    """Build what ``lifecycle_env(**options)`` returns: an Environment.

    With no ``kinds`` it builds a registered harness environment (entry-point
    group ``lifecycle.environments``; ``environment="simcloud"`` by default:
    the bundled DatabaseInstance kind on a fresh simulated cloud, reachable as
    ``env.cloud``, with a default ProviderConfig). Pass
    ``kinds=[(Kind, connector), ...]`` to build your own: it gets the same
    default ProviderConfig (``env.provider_config()``, one per ProviderConfig
    kind its kinds name whose spec needs nothing but credentials), so a manifest
    that names none is served at once.
    Every other option goes to :class:`~lifecycle.testing.Environment` (``history=``, ``backoff=``,
    ``seed=``, ...).
    """
    from lifecycle import registry
    from lifecycle.testing import Environment

    kinds = options.get("kinds")
    if kinds and isinstance(kinds[0], tuple):
        from lifecycle.schema.crds import default_config_fits

        custom = Environment(**options)
        for api_version in dict.fromkeys(
                getattr(k, "provider_config_api", None) for k, _ in kinds):
            # each ProviderConfig kind the kinds name gets a default one, where credentials
            # alone make a valid one (a PostgreSQL config needs a server)
            if api_version and default_config_fits([k for k, _ in kinds], api_version):
                custom.provider_config(api_version=api_version)
        return custom
    env, _ = registry.environment(environment)(**options)
    return env


@pytest.fixture
def lifecycle_env() -> Any:
    """A factory fixture: ``lifecycle_env(**options)`` returns an Environment.

    See :func:`build_environment` for the options.
    """
    return build_environment


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A real kube-apiserver and etcd for the test session (the envtest tier).

    Yields a started :class:`~lifecycle.testing.envtest.RealCluster`:
    ``.kubeconfig`` is an admin kubeconfig, ``.api_client()`` an official
    client as the administrator, ``.service_account_token(namespace, name)``
    mints a ServiceAccount's token, ``.install_crds(kinds)`` installs CRDs (a
    ProviderConfig CRD already served is merged with the new one, so the order
    test files install kinds in does not decide its type). The servers are
    built from their Go modules on first use (minutes once, cached in the
    user's cache directory); without ``go`` on PATH the fixture errors with
    the install hint. Objects outlive each test: give
    every test its own namespace.
    """
    from lifecycle.testing.envtest import RealCluster

    cluster = RealCluster(tmp_path_factory.mktemp("envtest"))
    cluster.start()
    yield cluster
    cluster.stop()
