"""What a test can tell of a PNG file: that it is one, its size, and how much of it is
one colour."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from the IHDR chunk; AssertionError when it is not a PNG."""
    head = path.read_bytes()[:24]
    assert head[:8] == SIGNATURE, f"{path}: not a PNG"
    assert head[12:16] == b"IHDR", f"{path}: no IHDR chunk first"
    width, height = struct.unpack(">II", head[16:24])
    return int(width), int(height)


def colour_share(path: Path, colour: str, rows: slice = slice(None)) -> float:
    """The share of the pixels of ``rows`` within a small distance of ``colour``
    (``#rrggbb``)."""
    import matplotlib.image

    img = matplotlib.image.imread(str(path))[rows, :, :3]
    want = np.array([int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)])
    return float((np.abs(img - want).max(axis=2) < 0.03).mean())
