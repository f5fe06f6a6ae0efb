"""The journal: each unfinished turn's events in a SQLite file, so a restart can resume it.

A turn is its event log: the file keeps the attempt's configuration and turn
settings once, then every event in order (the engine's own cattrs encoding,
`toolloop.states.convert`), the text each stream has delivered to the channel
so far, and, for a channel that says so (Discord's), the messages that hold
each stream's text as the chat confirmed them: their ids and the text each
holds. The state is never stored: `toolloop.effects.durable.resume` rebuilds
it by replaying the events through `step`.

Every write is one transaction in WAL mode, so a `kill -9` at any point leaves
the file at the last committed event; a finished turn's rows are deleted
(the journal holds only the turns in flight). SQLite calls run in a worker
thread (`anyio.to_thread`), one at a time, never on the event loop.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import attrs

from toolloop.engine.events import Event
from toolloop.states import LoopConfig, TurnSettings
from toolloop.states.convert import from_json, to_json
from toolloop.states.errors import ToolloopError

T = TypeVar("T")

#: Written into the file's header (`PRAGMA application_id`): "tljn", a toolloop journal.
APPLICATION_ID = 0x746C6A6E
#: The layout below (`PRAGMA user_version`); a version 1 file is migrated, another refused.
SCHEMA_VERSION = 2

_MESSAGES = """
CREATE TABLE messages (
    key TEXT NOT NULL REFERENCES turns (key) ON DELETE CASCADE,
    after INTEGER NOT NULL,
    position INTEGER NOT NULL,
    message_id TEXT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (key, after, position)
) WITHOUT ROWID;
"""
_SCHEMA = (
    """
CREATE TABLE turns (
    key TEXT PRIMARY KEY,
    started_at REAL NOT NULL,
    config TEXT NOT NULL,
    turn TEXT NOT NULL,
    reply_to TEXT
) WITHOUT ROWID;
CREATE TABLE events (
    key TEXT NOT NULL REFERENCES turns (key) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    event TEXT NOT NULL,
    PRIMARY KEY (key, seq)
) WITHOUT ROWID;
CREATE TABLE delivered (
    key TEXT NOT NULL REFERENCES turns (key) ON DELETE CASCADE,
    after INTEGER NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (key, after)
) WITHOUT ROWID;
"""
    + _MESSAGES
)
_MIGRATE_1_TO_2 = f"ALTER TABLE turns ADD COLUMN reply_to TEXT; {_MESSAGES}"
"""Version 2 added the reply target of each turn and the messages holding each stream."""


class JournalError(ToolloopError, ValueError):
    """A journal file that cannot be used: corrupt, foreign, or of another version; names it."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"journal {path}: {problem}")
        self.path = path
        self.problem = problem


class TurnInProgress(ToolloopError, ValueError):
    """A turn was begun under a key that an unfinished turn of the journal already holds."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the journal already holds an unfinished turn under key {key!r}")
        self.key = key


@attrs.frozen(kw_only=True)
class HeldMessage:
    """A chat message holding part of a stream's text, as the chat confirmed it."""

    message_id: str
    text: str
    """The stream's text this message holds (the stream's messages' texts join to it)."""


@attrs.frozen(kw_only=True)
class JournaledTurn:
    """An unfinished turn as the journal holds it: what it started from and what happened."""

    key: str
    """The bot's name for the turn (a channel and message id, say), unique while it runs."""
    started_at: float
    """When it began, in seconds since the epoch (`time.time()`)."""
    config: LoopConfig
    turn: TurnSettings
    reply_to: str | None
    """The message the turn's reply answers (the attempt's `reply_to`)."""
    events: tuple[Event, ...]
    """Every event the turn's interpreter received, in order (`TurnStarted` first)."""
    delivered: dict[int, str]
    """The text each stream delivered to the channel, by the number of the event whose
    step started the stream (a stream answers the last event before it)."""
    held: dict[int, tuple[HeldMessage, ...]] = attrs.field(factory=dict)
    """The messages holding each stream's text as the chat confirmed it, by the same
    number, for a channel that reports them (`Journal.held`); none for another."""


class Journal:
    """A SQLite journal file of unfinished turns; open it with `await Journal.open(path)`.

    Writes are serialized through one connection in a worker thread; the file
    may be opened by one process at a time (a bot and its restart).
    """

    def __init__(self, path: str, connection: sqlite3.Connection) -> None:
        self.path = path
        self._db = connection
        self._limiter = anyio.CapacityLimiter(1)
        """One SQLite call at a time: the connection is shared by the worker threads."""

    @classmethod
    async def open(cls, path: str | Path) -> Journal:
        """Open (or create) the journal at `path`; a file that is not one raises `JournalError`."""
        name = str(path)
        connection = await anyio.to_thread.run_sync(_connect, name)
        return cls(name, connection)

    async def close(self) -> None:
        await self._run(self._db.close)

    async def __aenter__(self) -> Journal:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- writing, one transaction each --------------------------------------------------------

    async def begin(
        self, key: str, config: LoopConfig, turn: TurnSettings, *, reply_to: str | None = None
    ) -> None:
        """Record a new turn's start; `TurnInProgress` if `key` is already unfinished."""
        row = (key, time.time(), _dumps(to_json(config)), _dumps(to_json(turn)), reply_to)
        try:
            await self._write("INSERT INTO turns VALUES (?, ?, ?, ?, ?)", row)
        except sqlite3.IntegrityError:
            raise TurnInProgress(key) from None

    async def append(self, key: str, seq: int, event: Event) -> None:
        """Record the turn's event number `seq` (0 is `TurnStarted`)."""
        row = (key, seq, _dumps(to_json(event, Event)))
        await self._write("INSERT INTO events VALUES (?, ?, ?)", row)

    async def delivered(self, key: str, after: int, text: str) -> None:
        """Record that the stream started after event `after` delivered `text` more."""
        await self._write(
            "INSERT INTO delivered VALUES (?, ?, ?) ON CONFLICT (key, after) "
            "DO UPDATE SET text = text || excluded.text",
            (key, after, text),
        )

    async def held(self, key: str, after: int, messages: tuple[HeldMessage, ...]) -> None:
        """Record the messages that now hold the stream started after event `after`, as the
        chat confirmed them (replacing what was recorded); nothing once the turn is over."""

        def write() -> None:
            with self._db:
                if self._db.execute("SELECT 1 FROM turns WHERE key = ?", (key,)).fetchone():
                    self._db.execute(
                        "DELETE FROM messages WHERE key = ? AND after = ?", (key, after)
                    )
                    self._db.executemany(
                        "INSERT INTO messages VALUES (?, ?, ?, ?, ?)",
                        [
                            (key, after, position, message.message_id, message.text)
                            for position, message in enumerate(messages)
                        ],
                    )

        await self._run(write)

    async def finish(self, key: str) -> None:
        """The turn is over: its rows are deleted (the journal keeps only turns in flight)."""
        await self._write("DELETE FROM turns WHERE key = ?", (key,))

    # -- reading ------------------------------------------------------------------------------

    async def unfinished(self) -> list[JournaledTurn]:
        """Every turn begun and not finished, oldest first, with its events."""
        return await self._run(self._read_unfinished)

    def _read_unfinished(self) -> list[JournaledTurn]:
        db = self._db
        turns = db.execute("SELECT * FROM turns ORDER BY started_at, key").fetchall()
        return [self._turn(db, *row) for row in turns]

    def _turn(
        self,
        db: sqlite3.Connection,
        key: str,
        started_at: float,
        config: str,
        turn: str,
        reply_to: str | None,
    ) -> JournaledTurn:
        where = f"turn {key!r}"
        rows = db.execute("SELECT seq, event FROM events WHERE key = ? ORDER BY seq", (key,))
        events = []
        for expected, (seq, text) in enumerate(rows):
            if seq != expected:
                raise JournalError(self.path, f"{where}: event {expected} is missing")
            events.append(self._load(f"{where}, event {seq}", text, Event))
        delivered = db.execute("SELECT after, text FROM delivered WHERE key = ?", (key,))
        held: dict[int, tuple[HeldMessage, ...]] = {}
        for after, message_id, text in db.execute(
            "SELECT after, message_id, text FROM messages WHERE key = ? ORDER BY after, position",
            (key,),
        ):
            held[after] = (*held.get(after, ()), HeldMessage(message_id=message_id, text=text))
        return JournaledTurn(
            key=key,
            started_at=started_at,
            config=self._load(f"{where}, its config", config, LoopConfig),
            turn=self._load(f"{where}, its settings", turn, TurnSettings),
            reply_to=reply_to,
            events=tuple(events),
            delivered=dict(delivered.fetchall()),
            held=held,
        )

    def _load(self, where: str, text: str, cls: Any) -> Any:
        try:
            return from_json(json.loads(text), cls)
        except Exception as error:  # json and cattrs raise several types: all "not this shape"
            raise JournalError(self.path, f"{where} is not readable: {error}") from None

    # -- the worker thread --------------------------------------------------------------------

    async def _write(self, sql: str, row: tuple[Any, ...]) -> None:
        def write() -> None:
            with self._db:  # one transaction: committed, or rolled back on an error
                self._db.execute(sql, row)

        await self._run(write)

    async def _run(self, work: Callable[[], T]) -> T:
        def checked() -> T:
            try:
                return work()
            except sqlite3.IntegrityError:
                raise
            except sqlite3.DatabaseError as error:
                raise JournalError(self.path, str(error)) from None

        return await anyio.to_thread.run_sync(checked, limiter=self._limiter)


#: How long opening waits for another connection to let the file go, in seconds.
BUSY_TIMEOUT_S = 1.0


def _connect(path: str) -> sqlite3.Connection:
    """The connection, in WAL mode, to a journal checked (or created) at `path`, held alone.

    The connection keeps an exclusive lock on the file until it closes: two bots
    sharing a journal would resume each other's live turns. The operating system
    drops the lock when the process dies, so a restart after `kill -9` opens it.
    """
    try:
        db = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_S, check_same_thread=False, isolation_level=None
        )
        db.execute("PRAGMA locking_mode = EXCLUSIVE")
        _check(path, db)
        db.execute("BEGIN EXCLUSIVE")  # takes the lock that the connection then keeps
        db.execute("COMMIT")
        db.isolation_level = "DEFERRED"  # `with db:` then opens and commits one transaction
    except sqlite3.DatabaseError as error:  # "file is not a database", a torn header...
        if getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_BUSY:
            raise JournalError(path, "in use by another connection (one bot per journal)") from None
        raise JournalError(path, f"not a readable SQLite file ({error})") from None
    return db


def _check(path: str, db: sqlite3.Connection) -> None:
    """Create the layout in an empty file, migrate a version 1 one; refuse a foreign, newer or
    damaged one."""
    application_id = db.execute("PRAGMA application_id").fetchone()[0]
    version = db.execute("PRAGMA user_version").fetchone()[0]
    tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    if application_id == 0 and tables == 0:
        db.execute("PRAGMA journal_mode = WAL")
        db.executescript(
            f"BEGIN; {_SCHEMA} PRAGMA application_id = {APPLICATION_ID}; "
            f"PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
        )
    elif application_id != APPLICATION_ID:
        raise JournalError(path, "not a toolloop journal (another application's SQLite file)")
    elif version not in (1, SCHEMA_VERSION):
        raise JournalError(
            path, f"journal version {version}, this toolloop reads 1 and {SCHEMA_VERSION}"
        )
    else:
        db.execute("PRAGMA journal_mode = WAL")
        if version == 1:
            db.executescript(
                f"BEGIN; {_MIGRATE_1_TO_2} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
            )
    db.execute("PRAGMA foreign_keys = ON")
    # WAL + NORMAL: a commit survives the process being killed (it is in the WAL file);
    # only a power loss may undo the last ones, never tear one.
    db.execute("PRAGMA synchronous = NORMAL")
    problems = [row[0] for row in db.execute("PRAGMA quick_check")]
    if problems != ["ok"]:
        raise JournalError(path, f"the file is damaged: {'; '.join(problems[:3])}")


def _dumps(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"))
