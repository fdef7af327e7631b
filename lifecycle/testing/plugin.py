"""The pytest plugin of the harness: the ``lifecycle_env`` fixture.

Installed with the package (entry point ``pytest11``), so any test suite that
has lifecycle installed can use it. The harness is imported only when a test
asks for the fixture, so other test suites pay nothing for the plugin.
"""

from __future__ import annotations

from typing import Any

import pytest


def build_environment(*, environment: str = "simcloud", **options: Any) -> Any:
    """Build what ``lifecycle_env(**options)`` returns: an Environment.

    With no ``kinds`` it builds a registered harness environment (entry-point
    group ``lifecycle.environments``; ``environment="simcloud"`` by default:
    the bundled DatabaseInstance kind on a fresh simulated cloud, reachable as
    ``env.cloud``, with a default ProviderConfig). Pass
    ``kinds=[(Kind, connector), ...]`` to build your own: it gets the same
    default ProviderConfig (``env.provider_config()``, one per ProviderConfig
    kind its kinds name), so a manifest that names none is served at once.
    Every other option goes to :class:`~lifecycle.testing.Environment` (``history=``, ``backoff=``,
    ``seed=``, ...).
    """
    from lifecycle import registry
    from lifecycle.testing import Environment

    kinds = options.get("kinds")
    if kinds and isinstance(kinds[0], tuple):
        custom = Environment(**options)
        for api_version in dict.fromkeys(
                getattr(k, "provider_config_api", None) for k, _ in kinds):
            if api_version:  # each ProviderConfig kind the kinds name gets a default one
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
