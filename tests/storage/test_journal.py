"""The journal file: append + fsync, read in order, torn last line, truncation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage.journal import Journal


def test_append_reads_back_in_order_and_fsyncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    journal = Journal(tmp_path / "sub" / "j.jsonl")
    assert not journal and journal.read() == []
    journal.append(["a", "b"])
    journal.append(["c"])
    assert synced, "append must fsync before returning"
    assert journal and journal.read() == ["a", "b", "c"]


def test_a_torn_last_line_is_ignored_and_cut_before_the_next_append(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal = Journal(path)
    journal.append(["one", "two"])
    with path.open("ab") as f:
        f.write(b'{"half": ')  # a crash mid-append
    assert journal.read() == ["one", "two"]
    journal.append(["three"])
    assert journal.read() == ["one", "two", "three"]
    assert path.read_bytes() == b"one\ntwo\nthree\n"


def test_a_file_holding_only_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(b"x" * 100_000)
    journal = Journal(path)
    assert journal and journal.read() == []
    journal.append(["ok"])
    assert path.read_bytes() == b"ok\n"


def test_truncate_drops_the_named_head_records_or_all(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl")
    journal.append(["a", "b", "c", "d"])
    journal.truncate(["a", "b", "c"])
    assert journal.read() == ["d"]
    journal.append(["e"])
    journal.truncate([])
    assert journal.read() == ["d", "e"]
    journal.truncate(["a", "b"])  # dropped already (by another process): nothing happens
    assert journal.read() == ["d", "e"]
    journal.truncate(["d", "x"])  # only the matching head goes
    assert journal.read() == ["e"]
    journal.truncate()
    assert not journal and journal.read() == []
    journal.truncate(["e"])  # nothing to drop
    assert journal.read() == []


def test_two_writers_sharing_the_file_lose_nothing_across_a_truncation(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    first, second = Journal(path), Journal(path)
    first.append(["a", "b"])
    second.append(["c"])
    first.truncate(first.read()[:2])  # replaces the file
    second.append(["d"])  # reopens the new file, not the replaced one
    assert first.read() == ["c", "d"] == second.read()


def test_records_holding_a_line_break_are_refused(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl")
    with pytest.raises(ValueError, match="line break"):
        journal.append(["a\nb"])
    assert journal.read() == []
