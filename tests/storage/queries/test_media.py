"""A media file's bytes read back a part at a time (SQLite's blob I/O, PostgreSQL's
``substr``): every part in order, the last one short, nothing past the end."""

from __future__ import annotations

import io
import os

import pytest
from sqlalchemy import Engine

from campaigns import media
from storage.queries import media as q
from storage.types import utcnow
from tests.media_files import pdf


def test_a_file_is_read_back_part_by_part(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(media, "SERVE_PART", 64 * 1024)  # parts as served, a smaller file
    data = pdf() + os.urandom(2 * media.SERVE_PART + 12345)
    stored = media.store(engine, io.BytesIO(data), "big.pdf", now=utcnow())
    parts = list(media.chunks(engine, stored))
    assert [len(p) for p in parts] == [
        media.SERVE_PART,
        media.SERVE_PART,
        len(data) % media.SERVE_PART,
    ]
    assert b"".join(parts) == data
    with engine.connect() as conn:
        assert q.read_part(conn, stored.id, 3, 5) == data[3:8]
        assert q.read_part(conn, stored.id, len(data), 10) == b""
        assert q.read_part(conn, stored.id + 1, 0, 10) == b""
