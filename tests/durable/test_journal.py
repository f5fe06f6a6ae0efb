"""The SQLite journal file: what it keeps, what it prunes, and the files it refuses."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from toolloop.durable import HeldMessage, Journal, JournalError, TurnInProgress
from toolloop.engine.events import Event, StreamEnded, TurnStarted
from toolloop.states import LoopConfig, StreamResult, StreamStatus, TurnSettings
from toolloop.states.convert import to_json

pytestmark = pytest.mark.anyio

ENDED = StreamEnded(result=StreamResult(status=StreamStatus.COMPLETED, accumulated_text="Hi"))


class TestJournal:
    async def test_an_unfinished_turn_reads_back_with_its_events_and_delivered_text(
        self, tmp_path: Path
    ) -> None:
        """A turn begun, two events and two pieces of text come back as they were written."""
        turn = TurnSettings(channel_id="c1", locale="de")
        async with await Journal.open(tmp_path / "j.db") as journal:
            await journal.begin("c1/m1", LoopConfig(max_function_call_iterations=7), turn)
            await journal.append("c1/m1", 0, TurnStarted())
            await journal.delivered("c1/m1", 0, "H")
            await journal.delivered("c1/m1", 0, "i")
            await journal.append("c1/m1", 1, ENDED)
        async with await Journal.open(tmp_path / "j.db") as journal:
            [read] = await journal.unfinished()
        assert (read.key, read.turn, read.config.max_function_call_iterations) == ("c1/m1", turn, 7)
        assert read.events == (TurnStarted(), ENDED)
        assert read.delivered == {0: "Hi"}

    async def test_a_finished_turn_is_pruned_with_all_its_rows(self, tmp_path: Path) -> None:
        """`finish` deletes the turn, its events, its text and its messages: the file keeps
        turns in flight."""
        async with await Journal.open(tmp_path / "j.db") as journal:
            await journal.begin("t", LoopConfig(), TurnSettings())
            await journal.append("t", 0, TurnStarted())
            await journal.delivered("t", 0, "x")
            await journal.held("t", 0, (HeldMessage(message_id="m1", text="x"),))
            await journal.finish("t")
            assert await journal.unfinished() == []
        db = sqlite3.connect(tmp_path / "j.db")
        counts = [db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in _TABLES]
        assert counts == [0, 0, 0, 0]

    async def test_the_file_is_in_wal_mode(self, tmp_path: Path) -> None:
        """WAL: a commit is in the log file before the call returns, so kill -9 keeps it."""
        async with await Journal.open(tmp_path / "j.db"):
            pass
        mode = sqlite3.connect(tmp_path / "j.db").execute("PRAGMA journal_mode").fetchone()
        assert mode == ("wal",)

    async def test_a_key_still_in_flight_is_refused(self, tmp_path: Path) -> None:
        """Two unfinished turns under one key would mix their events: the second is refused."""
        async with await Journal.open(tmp_path / "j.db") as journal:
            await journal.begin("k", LoopConfig(), TurnSettings())
            with pytest.raises(
                TurnInProgress,
                match=r"^the journal already holds an unfinished "
                r"turn under key 'k'$",
            ):
                await journal.begin("k", LoopConfig(), TurnSettings())


class TestRefusedFiles:
    async def test_a_file_that_is_not_sqlite_is_a_clear_error(self, tmp_path: Path) -> None:
        """Garbage where the journal should be names the file and says it is not SQLite."""
        path = tmp_path / "j.db"
        path.write_bytes(b"this is a text file, not a database\n" * 200)
        with pytest.raises(JournalError, match=r"^journal .*j\.db: not a readable SQLite file"):
            await Journal.open(path)

    async def test_another_applications_database_is_refused(self, tmp_path: Path) -> None:
        """A SQLite file with tables of its own is never written into."""
        path = tmp_path / "app.db"
        sqlite3.connect(path).execute("CREATE TABLE users (id INTEGER)").connection.commit()
        with pytest.raises(JournalError, match=r"not a toolloop journal"):
            await Journal.open(path)

    async def test_a_journal_of_another_version_is_refused(self, tmp_path: Path) -> None:
        """A newer layout is named with both versions rather than misread."""
        path = tmp_path / "j.db"
        async with await Journal.open(path):
            pass
        db = sqlite3.connect(path)
        db.execute("PRAGMA user_version = 9")
        db.commit()
        db.close()
        with pytest.raises(JournalError, match=r"journal version 9, this toolloop reads 1 and 2$"):
            await Journal.open(path)

    async def test_a_damaged_page_is_a_clear_error(self, tmp_path: Path) -> None:
        """Bytes overwritten inside the file's pages are found on open, not mid-resume."""
        path = tmp_path / "j.db"
        async with await Journal.open(path) as journal:
            for n in range(40):
                await journal.begin(f"turn-{n}", LoopConfig(), TurnSettings())
        sqlite3.connect(path).execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
        data = bytearray(path.read_bytes())
        data[4096 : 4096 + 64] = b"\xff" * 64  # the second page's b-tree header
        path.write_bytes(bytes(data))
        with pytest.raises(JournalError, match=r"^journal .*j\.db: "):
            journal = await Journal.open(path)
            await journal.unfinished()

    async def test_an_event_that_does_not_decode_names_its_turn_and_number(
        self, tmp_path: Path
    ) -> None:
        """A row the engine cannot read says which turn and which event it is."""
        path = tmp_path / "j.db"
        async with await Journal.open(path) as journal:
            await journal.begin("t", LoopConfig(), TurnSettings())
            await journal.append("t", 0, TurnStarted())
        db = sqlite3.connect(path)
        db.execute("UPDATE events SET event = ?", (json.dumps({"_type": "Nope"}),))
        db.commit()
        db.close()
        async with await Journal.open(path) as journal:
            with pytest.raises(JournalError, match=r"turn 't', event 0 is not readable"):
                await journal.unfinished()


_TABLES = ("turns", "events", "delivered", "messages")

#: The layout of a version 1 journal (toolloop before the messages of each stream).
VERSION_1 = """
CREATE TABLE turns (key TEXT PRIMARY KEY, started_at REAL NOT NULL, config TEXT NOT NULL,
    turn TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE events (key TEXT NOT NULL REFERENCES turns (key) ON DELETE CASCADE,
    seq INTEGER NOT NULL, event TEXT NOT NULL, PRIMARY KEY (key, seq)) WITHOUT ROWID;
CREATE TABLE delivered (key TEXT NOT NULL REFERENCES turns (key) ON DELETE CASCADE,
    after INTEGER NOT NULL, text TEXT NOT NULL, PRIMARY KEY (key, after)) WITHOUT ROWID;
PRAGMA application_id = 1953262190;
PRAGMA user_version = 1;
"""


class TestVersions:
    async def test_a_version_1_journal_is_migrated_and_its_turn_kept(self, tmp_path: Path) -> None:
        """A journal written before version 2 opens: its unfinished turn reads back (no reply
        target, no messages), the file is version 2, and the new rows can be written."""
        path = tmp_path / "j.db"
        db = sqlite3.connect(path)
        db.executescript(VERSION_1)
        config, turn = json.dumps(to_json(LoopConfig())), json.dumps(to_json(TurnSettings()))
        db.execute("INSERT INTO turns VALUES ('old', 1.0, ?, ?)", (config, turn))
        db.execute(
            "INSERT INTO events VALUES ('old', 0, ?)", (json.dumps(to_json(TurnStarted(), Event)),)
        )
        db.commit()
        db.close()
        async with await Journal.open(path) as journal:
            [read] = await journal.unfinished()
            await journal.held("old", 0, (HeldMessage(message_id="m1", text="Hi"),))
            [again] = await journal.unfinished()
        assert (read.key, read.reply_to, read.events, read.held) == (
            "old",
            None,
            (TurnStarted(),),
            {},
        )
        assert again.held == {0: (HeldMessage(message_id="m1", text="Hi"),)}
        assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone() == (2,)


class TestHeldMessages:
    async def test_the_messages_of_each_stream_are_replaced_by_each_report(
        self, tmp_path: Path
    ) -> None:
        """Each report is the stream's whole set of messages: the last one is what reads back,
        per stream, in order, with the turn's reply target."""
        one, two = (
            HeldMessage(message_id="m1", text="Hel"),
            HeldMessage(message_id="m1", text="Hello"),
        )
        page = HeldMessage(message_id="m2", text=" there")
        async with await Journal.open(tmp_path / "j.db") as journal:
            await journal.begin("t", LoopConfig(), TurnSettings(), reply_to="42")
            await journal.held("t", 0, (one,))
            await journal.held("t", 0, (two, page))
            await journal.held("t", 2, (HeldMessage(message_id="m3", text="Done."),))
            [read] = await journal.unfinished()
        assert read.reply_to == "42"
        assert read.held == {0: (two, page), 2: (HeldMessage(message_id="m3", text="Done."),)}

    async def test_a_report_after_the_turn_finished_writes_nothing(self, tmp_path: Path) -> None:
        """An editor confirming its last edit after the turn was let go leaves no row behind."""
        async with await Journal.open(tmp_path / "j.db") as journal:
            await journal.begin("t", LoopConfig(), TurnSettings())
            await journal.finish("t")
            await journal.held("t", 0, (HeldMessage(message_id="m1", text="late"),))
        db = sqlite3.connect(tmp_path / "j.db")
        assert db.execute("SELECT count(*) FROM messages").fetchone() == (0,)


class TestOneOwner:
    async def test_a_journal_open_elsewhere_is_refused(self, tmp_path: Path) -> None:
        """Two bots on one file would resume each other's live turns: the second is refused."""
        async with await Journal.open(tmp_path / "j.db"):
            with pytest.raises(JournalError, match=r"in use by another connection"):
                await Journal.open(tmp_path / "j.db")

    async def test_a_closed_journal_opens_again(self, tmp_path: Path) -> None:
        """The lock goes with the connection."""
        async with await Journal.open(tmp_path / "j.db") as journal:
            await journal.begin("t", LoopConfig(), TurnSettings())
        async with await Journal.open(tmp_path / "j.db") as journal:
            assert [turn.key for turn in await journal.unfinished()] == ["t"]
