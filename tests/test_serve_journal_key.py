"""``lifecycle serve --state``: the intent journal's key lives beside the state file.

The operator inside ``serve`` seals every journal entry with a key; a key made
anew at each start would make the entries of an interrupted operation
untrusted after a restart. The key is made on the first start, kept private,
and read again on the next.
"""

from __future__ import annotations

import stat
from pathlib import Path

from serve_helpers import Serve


def test_the_journal_key_is_made_once_private_and_kept_across_a_restart(tmp_path: Path) -> None:
    """The first start writes ``STATE.journal-key`` (mode 0600); a restart reuses it."""
    server = Serve(tmp_path / "serve")
    key = Path(f"{server.state}.journal-key")
    assert not key.exists()
    with server:
        assert key.exists()
        first = key.read_bytes()
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert len(first) >= 32
    with server:
        assert key.read_bytes() == first
    log = server.log_path.read_text(encoding="utf-8", errors="replace")
    assert first.decode(errors="replace").strip() not in log
