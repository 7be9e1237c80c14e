"""Reading the QR codes the sandbox draws, as a phone's camera would: QR codes only (a
code's modules can also pass for a short linear barcode, ITF, in about one image in a few
hundred; that false reading made tests fail once a 20-second rotation in a while)."""

from __future__ import annotations

import base64
import io

import zxingcpp
from PIL import Image


def png_of(data_uri: str) -> bytes:
    """The PNG inside a ``data:image/png;base64,...`` URI."""
    assert data_uri.startswith("data:image/png;base64,"), data_uri[:40]
    return base64.b64decode(data_uri.split(",", 1)[1])


def read_qr(png: bytes) -> str:
    """The text of the one QR code in ``png``."""
    qr_only = zxingcpp.BarcodeFormats(zxingcpp.BarcodeFormat.QRCode)
    with Image.open(io.BytesIO(png)) as image:
        found = zxingcpp.read_barcodes(image.convert("L"), formats=qr_only)
    assert len(found) == 1, f"{len(found)} QR codes in the image"
    return str(found[0].text)


def decode_qr(data_uri: str) -> str:
    """The text of the one QR code in a PNG data URI."""
    return read_qr(png_of(data_uri))
