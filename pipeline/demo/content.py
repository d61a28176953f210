"""Filler for the demo site's pages: words and sentences from a fixed vocabulary (seeded, so a
site is the same every time), and tiny but valid PNG and PDF files for its media paths."""

from __future__ import annotations

import random
import struct
import zlib

WORDS = (
    "harbor lantern quiet river copper meadow signal orchard beacon timber granite willow "
    "compass ledger market bridge canvas thunder velvet summit anchor marble garden harvest "
    "island journey kettle ladder mirror needle ocean pepper quarry ribbon saddle tunnel "
    "valley wagon yellow zephyr amber basket candle dagger ember falcon glacier hollow ivory "
    "jasmine kernel lemon mosaic nickel olive pebble quill raven silver tulip umber violet "
    "walnut crystal dune echo fable grove haven indigo jigsaw kiln lotus maple nectar onyx "
    "prism quartz rustic sparrow thistle ultra vapor wharf yarrow zinc archive bulletin "
    "crawler frontier fetch index schedule politeness queue latency render parse stream"
).split()


def phrase(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(WORDS, k=n))


def sentence(rng: random.Random) -> str:
    text = phrase(rng, rng.randint(8, 16))
    return text[0].upper() + text[1:] + "."


def png(rgb: tuple[int, ...], size: int = 8) -> bytes:
    """A solid-colour RGB PNG of ``size`` x ``size`` pixels."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(tag + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", crc)

    rows = b"".join(b"\x00" + bytes(rgb) * size for _ in range(size))
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9))
            + chunk(b"IEND", b""))


def pdf(title: str) -> bytes:
    """A one-page PDF showing ``title`` (alphanumerics and spaces only), with a valid xref."""
    text = f"BT /F1 18 Tf 72 720 Td ({title}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(text), text),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, obj in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, obj)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    trailer = b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n"
    out += trailer % (len(objects) + 1, xref)
    return bytes(out)
