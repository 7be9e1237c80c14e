"""Real, scannable QR codes for the login flow; the content rotates with a time bucket."""

from __future__ import annotations

import hashlib

import segno


def qr_content(instance_id: str, bucket: int, salt: str) -> str:
    """The text encoded in the QR for ``instance_id`` during time bucket ``bucket``.

    Shaped like the web client's login payload (``ref,publicKey,identityKey,advSecret``):
    comma-separated base64-ish parts, different for each bucket and each sandbox run.
    """
    digest = hashlib.sha256(f"{salt}:{instance_id}:{bucket}".encode()).hexdigest()
    return f"2@{digest[:32]},{digest[32:]},{instance_id},{bucket}"


def qr_data_uri(content: str) -> str:
    """A PNG of ``content`` as a ``data:image/png;base64,...`` URI."""
    uri: str = segno.make(content, error="m", micro=False).png_data_uri(scale=4, border=4)
    return uri
