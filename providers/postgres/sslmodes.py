"""libpq's ``sslmode`` values: declared once for the ProviderConfig's schema
(:mod:`lifecycle.providers.postgres.providerconfig`) and for the check of a stored config
(:mod:`lifecycle.providers.postgres.config`), which both import it."""

from __future__ import annotations

import typing
from typing import Literal

__all__ = ["SSLMODES", "SslMode"]

#: libpq's ``sslmode`` values, as ``sslMode`` spells them.
SslMode = Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]
#: The same values as a set.
SSLMODES = frozenset(typing.get_args(SslMode))
