"""Running provider or kind code: what it raises, as the engine handles it (pure).

:func:`guarded` runs a call into a provider's client or connector, or a
kind's own code: a :class:`~lifecycle.core.errors.HandledError` stands,
anything else becomes an :class:`~lifecycle.core.errors.ExternalError` that
names only the exception's class (a library's message may carry
credentials).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from lifecycle.core.errors import ExternalError, HandledError

__all__ = ["guarded"]

T = TypeVar("T")


def guarded(call: Callable[[], T],
            passthrough: tuple[type[BaseException], ...] = ()) -> T:
    """Run provider or kind code; anything but a HandledError becomes an ExternalError.

    The message names only the exception class: a library's message may
    carry credentials. Exceptions of the ``passthrough`` types (the
    engine's own, such as a failed write of the object) propagate unchanged.
    """
    try:
        return call()
    except HandledError:
        raise
    except passthrough:
        raise
    except Exception as exc:
        raise ExternalError(
            f"provider client raised {type(exc).__name__}", reason="ProviderClientError"
        ) from None
