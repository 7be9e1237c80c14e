"""The type of a media file from its first bytes, its name agreeing, and a clean name."""

from __future__ import annotations

import io
import zipfile

import pytest

from campaigns.media import MediaRefused, check, clean_name, sniff
from tests.media_files import pdf, png


def _zip(name: str) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr(name, "<xml/>")
    return out.getvalue()


@pytest.mark.parametrize(
    ("name", "head", "kind", "content_type"),
    [
        ("a.jpg", b"\xff\xd8\xff\xe0\x00\x10JFIF\x00", "image", "image/jpeg"),
        ("a.png", png(), "image", "image/png"),
        ("a.mp4", b"\x00\x00\x00\x20ftypisom\x00\x00\x02\x00", "video", "video/mp4"),
        ("a.3gp", b"\x00\x00\x00\x18ftyp3gp4\x00\x00\x00\x00", "video", "video/3gpp"),
        ("a.m4a", b"\x00\x00\x00\x20ftypM4A \x00\x00\x00\x00", "audio", "audio/mp4"),
        ("a.mp3", b"ID3\x04\x00\x00\x00\x00\x00\x00", "audio", "audio/mpeg"),
        ("a.mp3", b"\xff\xfb\x90\x64\x00", "audio", "audio/mpeg"),
        ("a.aac", b"\xff\xf1\x50\x80\x02\x1f\xfc", "audio", "audio/aac"),
        ("a.amr", b"#!AMR\n\x3c", "audio", "audio/amr"),
        ("a.ogg", b"OggS\x00\x02", "audio", "audio/ogg"),
        ("a.pdf", pdf(), "document", "application/pdf"),
        ("a.docx", _zip("word/document.xml"), "document", "application/vnd.openxml"),
        ("a.xls", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(8), "document", "application/vnd.ms"),
        ("a.txt", "Grüße, price list\n".encode(), "document", "text/plain"),
    ],
)
def test_the_content_decides_the_type(name: str, head: bytes, kind: str, content_type: str) -> None:
    found = sniff(head, name)
    assert found is not None and found.kind == kind
    assert found.content_type.startswith(content_type)
    assert check(head, name, len(head)) == found


@pytest.mark.parametrize(
    ("name", "head", "words"),
    [
        ("a.zip", _zip("x.txt"), "cannot be sent as media"),  # a zip that is no Office file
        ("a.txt", b"text\x00with a NUL", "cannot be sent as media"),
        ("a.gif", b"GIF89a\x01\x00", "cannot be sent as media"),
        ("a.svg", b"<svg xmlns='http://www.w3.org/2000/svg'/>", "cannot be sent as media"),
        ("a.mp4", png(), "its content is a PNG image, but its name ends in .mp4"),
        ("report", pdf(), "its name ends in no extension: rename it to end in .pdf"),
    ],
)
def test_other_files_are_refused_in_words(name: str, head: bytes, words: str) -> None:
    with pytest.raises(MediaRefused, match=words.replace(".", r"\.")):
        check(head, name, len(head))


def test_names_are_cleaned_for_urls_and_phones() -> None:
    assert clean_name("../../etc/Spring offer (final).PNG") == "Spring_offer_final_.PNG"
    assert clean_name("C:\\Users\\olga\\menu.pdf") == "menu.pdf"
    assert clean_name("....") == "file"
    assert clean_name("x" * 300 + ".pdf") == "x" * 116 + ".pdf"
