"""Media files uploaded by operators: checked, stored, and served at signed public URLs.

A campaign's media message names a URL the gateway fetches (``media_url``). Instead of
hosting the file somewhere, an operator uploads it to gatecast (API, dashboard, CLI):

- **Type by content.** :func:`sniff` reads the file's first bytes and matches them
  against the signatures of the types WhatsApp takes (JPEG, PNG; MP4, 3GPP; MP3, AAC,
  AMR, OGG, M4A; PDF, Office files, plain text). No library parses the file: a
  comparison of a few bytes cannot be made to crash or to allocate, so it runs in the
  caller (``campaigns.untrusted_files`` is for readers that do parse). The file's name
  must agree with its content (``photo.jpg`` holding a PDF is refused), and the
  content decides the kind (image, video, audio, document).
- **Size per kind**, WhatsApp's limits (:data:`KIND_LIMITS`: image 5 MiB, video and audio
  16 MiB, document 100 MiB), lowered for every kind by ``GATECAST_MEDIA_MAX_BYTES``.
- **Stored in the database** (table ``media``): every process of a deployment serves it.
- **Signed URLs**: ``{public}/media/{id}/{name}?expires={unix time}&signature={s}``, ``s``
  the HMAC-SHA256 of ``id/name/expires`` under the file's own random key (base64url).
  No sign-in is needed (the gateway fetches it); :func:`check_signature` tells a valid
  link from an expired one and from anything else, which the route answers as a 404
  that says nothing.
- **Kept while in use** (decision 59): a file a scheduled, running or paused campaign's
  file links to (:func:`uses`: its link path in the campaign file) is not deleted
  (:class:`MediaInUse` names the campaigns); the gateway fetches it when it sends.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import PurePath
from typing import Any, BinaryIO
from urllib.parse import quote, urlencode

from sqlalchemy import Connection, Engine

from campaigns.lifecycle import PAUSED, RUNNING, SCHEDULED
from campaigns.untrusted_files import size_text
from storage.queries import media as q

MiB = 1024 * 1024
#: WhatsApp's largest file of each kind (its Cloud API's media limits, which a web
#: session's gateway meets as well); ``GATECAST_MEDIA_MAX_BYTES`` lowers them
KIND_LIMITS: dict[str, int] = {
    "image": 5 * MiB,
    "video": 16 * MiB,
    "audio": 16 * MiB,
    "document": 100 * MiB,
}
KINDS = tuple(KIND_LIMITS)
DEFAULT_URL_DAYS = 30
MAX_URL_DAYS = 366
#: how many leading bytes :func:`sniff` looks at
SNIFF_BYTES = 4096
#: the route a signed URL points at (``gatecast.web.media``)
PATH_PREFIX = "/media/"
_CHUNK = 1024 * 1024
#: the part of a file read from the database at once while serving it (each read costs
#: a connection and, on SQLite, a walk of the blob's pages to the offset)
SERVE_PART = 4 * 1024 * 1024


class MediaRefused(ValueError):
    """A file gatecast does not take: its words say why, naming the file."""


class MediaTooLarge(MediaRefused):
    """A file past its kind's size limit (:attr:`limit` bytes)."""

    def __init__(self, text: str, limit: int) -> None:
        super().__init__(text)
        self.limit = limit


@dataclass(frozen=True)
class MediaType:
    """A type gatecast accepts: its kind, MIME type, the names a file of it may end with."""

    kind: str
    content_type: str
    label: str
    suffixes: tuple[str, ...]


_JPEG = MediaType("image", "image/jpeg", "a JPEG image", (".jpg", ".jpeg"))
_PNG = MediaType("image", "image/png", "a PNG image", (".png",))
_MP4 = MediaType("video", "video/mp4", "an MP4 video", (".mp4", ".m4v"))
_3GP = MediaType("video", "video/3gpp", "a 3GPP video", (".3gp", ".3gpp"))
_M4A = MediaType("audio", "audio/mp4", "an M4A audio file", (".m4a",))
_MP3 = MediaType("audio", "audio/mpeg", "an MP3 audio file", (".mp3",))
_AAC = MediaType("audio", "audio/aac", "an AAC audio file", (".aac",))
_AMR = MediaType("audio", "audio/amr", "an AMR audio file", (".amr",))
_OGG = MediaType("audio", "audio/ogg", "an OGG audio file", (".ogg", ".opus", ".oga"))
_PDF = MediaType("document", "application/pdf", "a PDF document", (".pdf",))
_TEXT = MediaType("document", "text/plain", "a text file", (".txt", ".csv"))
_OOXML = {
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
}
_OLE = {
    ".doc": "application/msword",
    ".xls": "application/vnd.ms-excel",
    ".ppt": "application/vnd.ms-powerpoint",
}
#: every type, for the words of a refusal
ACCEPTED = (
    "images: JPEG, PNG; videos: MP4, 3GPP; audio: MP3, M4A, AAC, AMR, OGG; "
    "documents: PDF, Word, Excel, PowerPoint (.docx .xlsx .pptx .doc .xls .ppt), text (.txt .csv)"
)
_MP4_AUDIO_BRANDS = (b"M4A ", b"M4B ")
_3GP_BRANDS = (b"3gp", b"3g2")
_NAME_UNSAFE = re.compile(r"[^\w.\-]+")


def _office(suffix: str, family: dict[str, str], label: str) -> MediaType | None:
    content_type = family.get(suffix)
    return MediaType("document", content_type, label, (suffix,)) if content_type else None


def _ftyp(head: bytes) -> MediaType | None:
    """An ISO media file (MP4, M4A, 3GPP): its ``ftyp`` box first, its brand after."""
    if len(head) < 12 or head[4:8] != b"ftyp":
        return None
    brand = head[8:12]
    if brand in _MP4_AUDIO_BRANDS:
        return _M4A
    if brand[:3] in _3GP_BRANDS:
        return _3GP
    return _MP4


def _mpeg_audio(head: bytes) -> MediaType | None:
    if head[:3] == b"ID3":
        return _MP3
    if len(head) >= 2 and head[0] == 0xFF:
        if head[1] & 0xF6 == 0xF0:  # ADTS sync: 1111 1111 1111 x00x
            return _AAC
        if head[1] & 0xE0 == 0xE0:  # MPEG audio frame sync
            return _MP3
    return None


def _is_text(head: bytes) -> bool:
    """UTF-8 text without control characters but tab and line ends (a cut at the end
    of ``head`` allowed)."""
    if not head or b"\x00" in head:
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:
            return False
        text = head[: exc.start].decode("utf-8")
    return not any(ord(c) < 32 and c not in "\t\r\n\f" for c in text)


def sniff(head: bytes, name: str) -> MediaType | None:
    """The type of a file whose first bytes are ``head`` (:data:`SNIFF_BYTES` of them)
    and whose name is ``name``; None when gatecast does not take it. The name decides
    only between formats that share a container (Office files); else the content does."""
    suffix = PurePath(name).suffix.lower()
    if head[:3] == b"\xff\xd8\xff":
        return _JPEG
    if head[:8] == b"\x89PNG\r\n\x1a\n":
        return _PNG
    if head[:5] == b"%PDF-":
        return _PDF
    if head[:6] == b"#!AMR\n":
        return _AMR
    if head[:4] == b"OggS":
        return _OGG
    if head[:4] == b"PK\x03\x04":
        return _office(suffix, _OOXML, "an Office document (.docx, .xlsx, .pptx)")
    if head[:8] == b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1":
        return _office(suffix, _OLE, "an older Office document (.doc, .xls, .ppt)")
    found = _ftyp(head) or _mpeg_audio(head)
    if found is not None:
        return found
    if suffix in _TEXT.suffixes and _is_text(head):
        return _TEXT
    return None


def clean_name(name: str) -> str:
    """A file name fit for a URL and a recipient's phone: its last part only, letters,
    digits, ``._-`` (others become ``_``), at most 120 characters keeping the suffix."""
    base = PurePath(name.replace("\\", "/")).name.strip() or "file"
    base = _NAME_UNSAFE.sub("_", base).strip("._") or "file"
    stem, dot, suffix = base.rpartition(".")
    if dot and len(suffix) <= 10:
        return f"{stem[: 120 - len(suffix) - 1] or 'file'}.{suffix}"
    return base[:120]


def kind_limit(kind: str, max_bytes: int | None = None) -> int:
    """The most bytes a file of ``kind`` may have (``max_bytes``: the deployment's cap)."""
    limit = KIND_LIMITS[kind]
    return min(limit, max_bytes) if max_bytes else limit


def upload_limit(max_bytes: int | None = None) -> int:
    """The largest file of any kind (an upload's body limit)."""
    return max(kind_limit(k, max_bytes) for k in KINDS)


def check(
    head: bytes, name: str, size: int, *, max_bytes: int | None = None, whole: bool = True
) -> MediaType:
    """The file's type, or :class:`MediaRefused` saying why it is not taken (its type,
    its name disagreeing with its content, its size past its kind's limit, empty).
    ``whole``: ``size`` is the file's; else only that it has at least ``size`` bytes."""
    shown = clean_name(name)
    if size == 0:
        raise MediaRefused(f"{shown} is empty")
    found = sniff(head, name)
    suffix = PurePath(name).suffix.lower()
    if found is None:
        raise MediaRefused(
            f"{shown}: this type of file cannot be sent as media (its content is not one "
            f"of the accepted types: {ACCEPTED})"
        )
    if suffix not in found.suffixes:
        raise MediaRefused(
            f"{shown}: its content is {found.label}, but its name ends in "
            f"{suffix or 'no extension'}: rename it to end in {' or '.join(found.suffixes)}"
        )
    limit = kind_limit(found.kind, max_bytes)
    if size > limit:
        measured, most = size_text(size), size_text(limit)
        if not whole:
            measured = f"larger than {most}"
        elif measured == most:  # just past it: the bytes tell them apart
            measured, most = f"{size:,} bytes", f"{most} ({limit:,} bytes)"
        raise MediaTooLarge(f"{shown} is {measured}: {found.label} may be at most {most}", limit)
    return found


@dataclass(frozen=True)
class Media:
    """A stored file, without its bytes."""

    id: int
    name: str
    kind: str
    content_type: str
    size: int
    sha256: str
    created_by: str
    created_at: datetime


def store(
    engine: Engine,
    source: BinaryIO,
    name: str,
    *,
    now: datetime,
    actor: str = "",
    max_bytes: int | None = None,
    size: int | None = None,
) -> Media:
    """Check the file read from ``source`` (its start: the type; its whole: the size)
    and store it; :class:`MediaRefused` when it is not taken. Reads at most one byte
    past its kind's limit; ``size``, when known, refuses a larger file before that."""
    head = source.read(SNIFF_BYTES)
    found = sniff(head, name)
    limit = kind_limit(found.kind, max_bytes) if found else upload_limit(max_bytes)
    if size is not None and size > limit:
        check(head, name, size, max_bytes=max_bytes)
    parts = [head]
    read = len(head)
    while read <= limit and (chunk := source.read(min(_CHUNK, limit + 1 - read))):
        parts.append(chunk)
        read += len(chunk)
    check(head, name, read, max_bytes=max_bytes, whole=read <= limit)
    data = b"".join(parts)
    assert found is not None  # check() refused otherwise
    row = {
        "name": clean_name(name),
        "kind": found.kind,
        "content_type": found.content_type,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "url_key": secrets.token_hex(32),
        "created_by": actor[:100],
        "created_at": now,
    }
    with engine.begin() as conn:
        media_id = q.insert_media(conn, {**row, "data": data})
    return _media({**row, "id": media_id})


def _media(row: Mapping[Any, Any]) -> Media:
    """A row (a ``RowMapping`` or a dict) as a :class:`Media`."""
    return Media(
        id=int(row["id"]),
        name=str(row["name"]),
        kind=str(row["kind"]),
        content_type=str(row["content_type"]),
        size=int(row["size"]),
        sha256=str(row["sha256"]),
        created_by=str(row["created_by"]),
        created_at=row["created_at"],
    )


def get(engine: Engine, media_id: int) -> Media | None:
    """One stored file's description, or None."""
    with engine.connect() as conn:
        row = q.describe(conn, media_id)
    return _media(row) if row is not None else None


def listing(engine: Engine, *, limit: int = 50, offset: int = 0) -> tuple[list[Media], int]:
    """Stored files, newest first, and how many there are."""
    with engine.connect() as conn:
        rows, total = q.listing(conn, limit=limit, offset=offset)
    return [_media(r) for r in rows], total


#: the states of a campaign that will still send (so fetch its media): a file one of
#: them uses is kept
KEEPING_STATES = (SCHEDULED, RUNNING, PAUSED)


class MediaInUse(MediaRefused):
    """A file a campaign that will still send uses: not deleted; ``uses`` names them."""

    def __init__(self, media: Media, uses: list[MediaUse]) -> None:
        self.uses = uses
        named = ", ".join(f"'{u.name}' ({u.state})" for u in uses[:5])
        more = f" and {len(uses) - 5} more" if len(uses) > 5 else ""
        super().__init__(
            f"{media.name} is used by campaign{'s' if len(uses) > 1 else ''} {named}{more}, "
            "which will still send it: cancel those campaigns (or change their message) "
            "first, then delete it"
        )


@dataclass(frozen=True)
class MediaUse:
    """A campaign whose file links to a stored file."""

    campaign_id: int
    name: str
    state: str

    @property
    def keeps(self) -> bool:
        """Whether this campaign will still send, so the file must stay."""
        return self.state in KEEPING_STATES


def link_path(media_id: int, name: str) -> str:
    """The path of a file's links, up to their query: what a campaign using it holds."""
    return f"{PATH_PREFIX}{media_id}/{quote(name, safe='')}"


def _uses(conn: Connection, media: Media) -> list[MediaUse]:
    rows = q.campaigns_naming(conn, link_path(media.id, media.name) + "?")
    return [MediaUse(int(r["id"]), str(r["name"]), str(r["state"])) for r in rows]


def uses(engine: Engine, media: Media) -> list[MediaUse]:
    """The campaigns (not deleted) whose file links to ``media``, by id."""
    with engine.connect() as conn:
        return _uses(conn, media)


def delete(engine: Engine, media_id: int) -> Media | None:
    """Delete a stored file; what it was, or None when there is none. Refused
    (:class:`MediaInUse`, nothing deleted) while a campaign that will still send uses it."""
    found = get(engine, media_id)
    if found is None:
        return None
    with engine.begin() as conn:
        keeping = [u for u in _uses(conn, found) if u.keeps]
        if keeping:
            raise MediaInUse(found, keeping)
        if not q.delete_media(conn, media_id):
            return None
    return found


def _signature(key: str, media_id: int, name: str, expires: int) -> str:
    mac = hmac.new(bytes.fromhex(key), f"{media_id}/{name}/{expires}".encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode("ascii")


def signed_url(
    engine: Engine, media: Media, base: str, *, now: datetime, days: float = DEFAULT_URL_DAYS
) -> tuple[str, datetime]:
    """A URL of ``media`` under ``base`` (the public URL) that works until ``now + days``
    (whole seconds), and that moment."""
    if not 0 < days <= MAX_URL_DAYS:
        raise MediaRefused(f"a link may last between a minute and {MAX_URL_DAYS} days")
    expires_at = (now + timedelta(days=days)).replace(microsecond=0)
    expires = int(expires_at.timestamp())
    with engine.connect() as conn:
        key = q.url_key(conn, media.id)
    if key is None:
        raise MediaRefused(f"media {media.id} no longer exists")
    query = urlencode(
        {"expires": expires, "signature": _signature(key, media.id, media.name, expires)}
    )
    return f"{base.rstrip('/')}{link_path(media.id, media.name)}?{query}", expires_at


VALID, EXPIRED, WRONG = "valid", "expired", "wrong"


def check_signature(
    engine: Engine, media_id: int, name: str, expires: str, signature: str, *, now: datetime
) -> tuple[str, Media | None]:
    """Whether a link is :data:`VALID` (with the file), :data:`EXPIRED` (signed right, too
    late) or :data:`WRONG` (no such file, another name, a signature not ours); constant
    time in the signature."""
    if not expires.isdigit() or len(expires) > 12 or len(signature) > 100:
        return WRONG, None
    with engine.connect() as conn:
        row = q.describe(conn, media_id, with_key=True)
    if row is None or row["name"] != name:
        return WRONG, None
    want = _signature(str(row["url_key"]), media_id, name, int(expires))
    if not hmac.compare_digest(want.encode("ascii"), signature.encode("ascii", "replace")):
        return WRONG, None
    if int(expires) < now.timestamp():
        return EXPIRED, None
    return VALID, _media(row)


def chunks(engine: Engine, media: Media) -> Iterator[bytes]:
    """The file's bytes, :data:`SERVE_PART` at a time (never the whole file in memory;
    no connection held between parts, while the client takes them)."""
    offset = 0
    while offset < media.size:
        with engine.connect() as conn:
            part = q.read_part(conn, media.id, offset, SERVE_PART)
        if not part:
            return
        yield part
        offset += len(part)


__all__ = [
    "ACCEPTED",
    "DEFAULT_URL_DAYS",
    "EXPIRED",
    "KEEPING_STATES",
    "KINDS",
    "KIND_LIMITS",
    "MAX_URL_DAYS",
    "PATH_PREFIX",
    "VALID",
    "WRONG",
    "Media",
    "MediaInUse",
    "MediaRefused",
    "MediaTooLarge",
    "MediaType",
    "MediaUse",
    "check",
    "check_signature",
    "chunks",
    "clean_name",
    "delete",
    "get",
    "kind_limit",
    "link_path",
    "listing",
    "signed_url",
    "sniff",
    "store",
    "upload_limit",
    "uses",
]
