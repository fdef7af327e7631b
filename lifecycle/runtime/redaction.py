"""No credential read from a provider config's Secret is ever written into a condition or an Event.

Providers redact what they know to be secret (the server's text, the admin
password), but only the provider knows which key of the credentials Secret
holds what: a ProviderConfig whose ``credentialKeys`` maps the username to the
password key makes the admin password appear wherever the username is shown
("connecting as '<password>'"). So the engine redacts, as a last step before
anything is written, *every* value of the credentials Secret from every
condition message and every Event message of the pass: whatever the key,
whatever the provider, wherever the text came from.

Values shorter than :data:`MIN_LENGTH` characters are left alone (they would
blank ordinary words and are no credential worth the name); longer values are
replaced first, so a value containing another is replaced whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["MARK", "MIN_LENGTH", "credential_values", "redact", "redact_events",
           "redact_status"]

#: What a redacted value is replaced with.
MARK = "***"
#: Values shorter than this are not redacted.
MIN_LENGTH = 4


def credential_values(credentials: Mapping[str, Any]) -> tuple[str, ...]:
    """The values of a decoded credentials Secret worth redacting, longest first."""
    values = {str(v) for v in credentials.values() if isinstance(v, str | bytes)}
    return tuple(sorted((v for v in values if len(v) >= MIN_LENGTH), key=len, reverse=True))


def redact(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every one of ``secrets`` (and each of their lines) replaced by ``***``."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MARK)
        if "\n" in secret:  # a PEM or other multi-line value shown one line at a time
            for line in secret.splitlines():
                if len(line.strip()) >= MIN_LENGTH and line in text:
                    text = text.replace(line, MARK)
    return text


def redact_status(status: Mapping[str, Any], secrets: Sequence[str]) -> dict[str, Any]:
    """A copy of ``status`` whose condition messages hold none of ``secrets``."""
    conditions = status.get("conditions")
    if not secrets or not isinstance(conditions, list):
        return dict(status)
    cleaned = []
    for c in conditions:
        if isinstance(c, Mapping) and isinstance(c.get("message"), str):
            c = {**c, "message": redact(c["message"], secrets)}
        cleaned.append(c)
    return {**status, "conditions": cleaned}


def redact_events(events: Iterable[tuple[str, str, str]], secrets: Sequence[str]
                  ) -> list[tuple[str, str, str]]:
    """The Events with none of ``secrets`` in their messages."""
    return [(type_, reason, redact(message, secrets)) for type_, reason, message in events]
