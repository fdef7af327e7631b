"""Keeping an embedded API's state in a SQLite file across restarts.

:class:`StateFile` stores what :meth:`EmbeddedAPI.snapshot
<lifecycle.sim.apiserver.EmbeddedAPI.snapshot>` returns: every object (with
its uid and resourceVersion), the resourceVersion counter, and named JSON
documents of external state (a simulated provider's, for example). Saving
writes only the objects whose resourceVersion changed since the last save,
in one transaction, so a file is always a consistent snapshot of one
instant. :meth:`StateFile.load` returns it for :meth:`EmbeddedAPI.restore
<lifecycle.sim.apiserver.EmbeddedAPI.restore>`.

The file is held exclusively while open (a second process gets a clear
error instead of interleaving writes), is created readable by its owner only
(it holds Secrets), and uses SQLite's write-ahead log: a committed save
survives the process being killed.

:class:`Autosave` saves from a background thread every ``interval`` seconds
when something changed, and once more on :meth:`Autosave.stop`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import attrs

from lifecycle.core.errors import LifecycleError
from lifecycle.core.objects import metadata

__all__ = ["CRASH_GAP", "Autosave", "ExternalState", "SavedState", "StateFile", "StateFileError"]

log = logging.getLogger("lifecycle.sim.persist")

#: What the ``format`` row of a state file says.
FORMAT = "lifecycle-embedded-api-state"
#: The layout version this module writes and reads.
VERSION = 1
#: How far the counter jumps after a shutdown that did not save a last time: more
#: writes than could have happened after the last save, so none is ever reused.
CRASH_GAP = 1_000_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS objects (
    api_version TEXT NOT NULL, kind TEXT NOT NULL, namespace TEXT NOT NULL,
    name TEXT NOT NULL, resource_version INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (api_version, kind, namespace, name));
CREATE TABLE IF NOT EXISTS external (name TEXT PRIMARY KEY, body TEXT NOT NULL);
"""

ObjectKey = tuple[str, str, str, str]


class StateFileError(LifecycleError):
    """A state file that cannot be opened, read or written; the message is one line."""


class ExternalState(Protocol):
    """State kept outside the API that is saved with it (a simulated provider's)."""

    def snapshot(self) -> Any:
        """The state as a JSON-serialisable value."""
        ...

    def restore(self, state: Any) -> None:
        """Replace the state by one :meth:`snapshot` returned."""
        ...


@attrs.frozen
class SavedState:
    """What a state file holds: the counter, the objects and the external documents.

    ``clean`` says whether the process that wrote it closed it after a last
    save; if not, writes after the last save were lost and their
    resourceVersions may have been seen by clients, so a restore must start
    from :attr:`restart_resource_version`, never from ``resource_version``.
    """

    resource_version: int
    objects: list[dict[str, Any]]
    external: dict[str, Any]
    clean: bool = True

    @property
    def restart_resource_version(self) -> int:
        """The counter to restore: the saved one, plus :data:`CRASH_GAP` after a crash."""
        return self.resource_version + (0 if self.clean else CRASH_GAP)


def _key(obj: Mapping[str, Any]) -> ObjectKey:
    meta = metadata(obj)
    return (str(obj.get("apiVersion", "")), str(obj.get("kind", "")),
            str(meta.get("namespace") or ""), str(meta.get("name", "")))


def _rv(obj: Mapping[str, Any]) -> int:
    text = str(metadata(obj).get("resourceVersion", ""))
    return int(text) if text.isdigit() else 0


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


class StateFile:
    """One SQLite state file, opened (and created if missing) for exclusive use.

    Raises :class:`StateFileError` when the path cannot be created or
    written, when the file is not a state file (or is damaged), when it was
    written by a newer layout, or when another process holds it.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._saved: dict[ObjectKey, int] = {}
        self._saved_external: dict[str, str] = {}
        self._saved_rv = -1
        self._was_clean = True
        self._lock = threading.Lock()
        self._create_private()
        try:
            self._db = sqlite3.connect(self.path, timeout=0.2, isolation_level=None,
                                       check_same_thread=False)
        except sqlite3.Error as exc:
            raise StateFileError(f"cannot open the state file {self.path}: "
                                 f"{_first_line(exc)}") from None
        try:
            self._open()
        except BaseException:
            self._db.close()
            raise

    def _create_private(self) -> None:
        if self.path.is_dir():
            raise StateFileError(f"the state file {self.path} is a directory")
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            return
        except OSError as exc:
            raise StateFileError(f"cannot create the state file {self.path}: "
                                 f"{exc.strerror or exc}") from None
        os.close(fd)

    def _open(self) -> None:
        db = self._db
        try:
            db.execute("PRAGMA locking_mode=EXCLUSIVE")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise StateFileError(f"the state file {self.path} is in use by another "
                                     f"process (another lifecycle serve?)") from None
            raise self._unusable(exc) from None
        except sqlite3.DatabaseError as exc:
            raise self._unusable(exc) from None
        try:
            tables = {row[0] for row in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not tables:
                for statement in _SCHEMA.strip().split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute("INSERT INTO meta VALUES ('format', ?), ('version', ?)",
                           (FORMAT, str(VERSION)))
            else:
                self._check_layout(tables)
                rows = dict(db.execute("SELECT key, value FROM meta"))
                self._was_clean = rows.get("clean", "1") == "1"
            # Not clean until close(clean=True): a crash from now on is detected on load.
            # The write also proves the file is writable before anything is served from it.
            db.execute("INSERT OR REPLACE INTO meta VALUES ('clean', '0')")
            db.execute("COMMIT")
        except StateFileError:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise self._unusable(exc) from None

    def _unusable(self, exc: BaseException) -> StateFileError:
        text = _first_line(exc)
        if "readonly" in text or "read-only" in text:
            return StateFileError(f"the state file {self.path} is not writable: {text}")
        return StateFileError(f"the state file {self.path} is corrupt or not a lifecycle "
                              f"state file: {text}")

    def _check_layout(self, tables: set[str]) -> None:
        if not {"meta", "objects", "external"} <= tables:
            raise StateFileError(f"{self.path} is not a lifecycle state file "
                                 f"(tables: {', '.join(sorted(tables))})")
        rows = dict(self._db.execute("SELECT key, value FROM meta"))
        if rows.get("format") != FORMAT:
            raise StateFileError(f"{self.path} is not a lifecycle state file")
        version = rows.get("version", "")
        if not version.isdigit() or int(version) > VERSION:
            raise StateFileError(f"the state file {self.path} has layout version {version!r}; "
                                 f"this lifecycle reads version {VERSION} or older")

    # ------------------------------------------------------------------ read
    def load(self) -> SavedState | None:
        """The saved state, or ``None`` when nothing was ever saved in this file."""
        with self._lock:
            try:
                rows = dict(self._db.execute("SELECT key, value FROM meta"))
                if "resourceVersion" not in rows:
                    return None
                counter = rows["resourceVersion"]
                if not counter.isdigit():
                    raise StateFileError(f"the state file {self.path} is corrupt: "
                                         f"resourceVersion {counter!r}")
                objects: list[dict[str, Any]] = []
                for key in self._db.execute(
                        "SELECT api_version, kind, namespace, name, resource_version, body "
                        "FROM objects ORDER BY resource_version"):
                    obj = self._decode(key[5], "/".join(key[:4]))
                    if not isinstance(obj, dict) or _key(obj) != tuple(key[:4]):
                        raise StateFileError(f"the state file {self.path} is corrupt: the "
                                             f"object stored as {'/'.join(key[:4])} is not it")
                    objects.append(obj)
                    self._saved[_key(obj)] = _rv(obj)
                external = {}
                for name, body in self._db.execute("SELECT name, body FROM external"):
                    external[name] = self._decode(body, f"external state {name}")
                    self._saved_external[name] = body
            except sqlite3.Error as exc:
                raise self._unusable(exc) from None
            self._saved_rv = int(counter)
            return SavedState(int(counter), objects, external, clean=self._was_clean)

    def _decode(self, body: str, what: str) -> Any:
        try:
            return json.loads(body)
        except (TypeError, ValueError) as exc:
            raise StateFileError(f"the state file {self.path} is corrupt: {what}: "
                                 f"{_first_line(exc)}") from None

    # ----------------------------------------------------------------- write
    def save(self, snapshot: Mapping[str, Any]) -> bool:
        """Write a snapshot (``resourceVersion``, ``objects``, ``external``); whether it wrote.

        ``external`` maps names to JSON-serialisable documents (or is
        ``None``). Only what changed since the last save or load is written,
        all in one transaction.
        """
        counter = int(snapshot["resourceVersion"])
        current = {_key(obj): obj for obj in snapshot["objects"]}
        external = {name: json.dumps(doc, sort_keys=True, separators=(",", ":"))
                    for name, doc in (snapshot.get("external") or {}).items()}
        with self._lock:
            upserts = [(key, obj) for key, obj in current.items()
                       if self._saved.get(key) != _rv(obj)]
            removed = [key for key in self._saved if key not in current]
            changed_external = {n: b for n, b in external.items()
                                if self._saved_external.get(n) != b}
            if not upserts and not removed and not changed_external and (
                    counter == self._saved_rv):
                return False
            db = self._db
            try:
                db.execute("BEGIN IMMEDIATE")
                db.executemany(
                    "INSERT OR REPLACE INTO objects VALUES (?, ?, ?, ?, ?, ?)",
                    [(*key, _rv(obj), json.dumps(obj, separators=(",", ":")))
                     for key, obj in upserts])
                db.executemany("DELETE FROM objects WHERE api_version = ? AND kind = ? AND "
                               "namespace = ? AND name = ?", removed)
                db.executemany("INSERT OR REPLACE INTO external VALUES (?, ?)",
                               list(changed_external.items()))
                db.execute("INSERT OR REPLACE INTO meta VALUES ('resourceVersion', ?)",
                           (str(counter),))
                db.execute("COMMIT")
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise StateFileError(f"cannot save to the state file {self.path}: "
                                     f"{_first_line(exc)}") from None
            for key, obj in upserts:
                self._saved[key] = _rv(obj)
            for key in removed:
                del self._saved[key]
            self._saved_external.update(changed_external)
            self._saved_rv = counter
            return True

    def close(self, *, clean: bool = False) -> None:
        """Close the file (releasing it for another process).

        ``clean``: the last save holds everything (nothing was written after
        it), so the next load may continue from its counter exactly.
        """
        with self._lock:
            try:
                if clean:
                    self._db.execute("INSERT OR REPLACE INTO meta VALUES ('clean', '1')")
            except sqlite3.Error as exc:
                raise StateFileError(f"cannot save to the state file {self.path}: "
                                     f"{_first_line(exc)}") from None
            finally:
                self._db.close()


class Autosave:
    """Saves ``snapshot()`` into a :class:`StateFile` every ``interval`` seconds if it changed.

    ``snapshot`` returns what :meth:`StateFile.save` takes; ``changed`` is a
    cheap test of whether anything may have changed since the last save (a
    snapshot is taken only then). :meth:`stop` saves a last time.
    """

    def __init__(self, state: StateFile, snapshot: Callable[[], Mapping[str, Any]], *,
                 interval: float = 0.5, changed: Callable[[], bool] = lambda: True) -> None:
        self.state = state
        self.snapshot = snapshot
        self.interval = interval
        self.changed = changed
        self.saves = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Autosave:
        """Start saving in a daemon thread."""
        self._thread = threading.Thread(target=self._run, name="autosave", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.save()
            except Exception as exc:  # keep serving; the next tick or the final save retries
                log.error("saving the state failed: %s", _first_line(exc))

    def save(self) -> bool:
        """Save now if something changed; whether anything was written."""
        if not self.changed():
            return False
        wrote = self.state.save(self.snapshot())
        if wrote:
            self.saves += 1
        return wrote

    def stop(self) -> None:
        """Stop the thread and save one last time (errors propagate)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self.state.save(self.snapshot())
