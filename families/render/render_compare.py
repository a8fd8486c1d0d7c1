"""Comparing two renders on the trusted side: pixels (SSIM, a difference hash) and attributes.

Everything here reads what a sandbox reported, so every input is bounded before it is used: a
PNG is refused unless its base64 is short, its header says PREVIEW x PREVIEW pixels or fewer and
Pillow decodes it under its own pixel cap; lists are cut to MAX_LIST, strings to MAX_TEXT; no
value is evaluated. The pixel score is calibrated against a blank canvas of the reference's
background, so that drawing nothing scores 0 however much white the reference has.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
import re
import struct

import numpy as np

MAX_PNG_CHARS = 200_000   # base64 characters of one preview
MAX_SIDE = 512            # pixels a preview may claim, per side (the harness sends 128)
GRID = 64                 # SSIM and hashes run on GRID x GRID grayscale
MAX_LIST = 500
MAX_TEXT = 200
_PNG = b"\x89PNG\r\n\x1a\n"


def decode_png(data) -> np.ndarray | None:
    """A reported preview as a GRID x GRID grayscale array in [0, 1], or None when it is missing,
    too large, or not a PNG Pillow reads within its limits."""
    if not isinstance(data, str) or not data or len(data) > MAX_PNG_CHARS:
        return None
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) < 24 or not raw.startswith(_PNG) or raw[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", raw[16:24])
    if not (0 < width <= MAX_SIDE and 0 < height <= MAX_SIDE):
        return None
    from PIL import Image
    Image.MAX_IMAGE_PIXELS = MAX_SIDE * MAX_SIDE  # the decompression-bomb guard, as a second fence
    try:
        with Image.open(io.BytesIO(raw)) as image:
            if image.size != (width, height) or image.format != "PNG":
                return None
            gray = image.convert("L").resize((GRID, GRID), Image.BOX)
            return np.asarray(gray, dtype=np.float64) / 255.0
    except Exception:  # noqa: BLE001 - Pillow raises many kinds on a corrupt file; none may escape
        return None


def _box_mean(a: np.ndarray, k: int) -> np.ndarray:
    """Mean over every k x k window (valid positions), by cumulative sums."""
    c = np.cumsum(np.cumsum(np.pad(a, ((1, 0), (1, 0))), axis=0), axis=1)
    return (c[k:, k:] - c[:-k, k:] - c[k:, :-k] + c[:-k, :-k]) / (k * k)


def ssim(a: np.ndarray, b: np.ndarray, k: int = 7) -> float:
    """Mean structural similarity of two same-shape grayscale images in [0, 1] (7x7 windows)."""
    c1, c2 = 0.01 ** 2, 0.03 ** 2
    ma, mb = _box_mean(a, k), _box_mean(b, k)
    va = _box_mean(a * a, k) - ma * ma
    vb = _box_mean(b * b, k) - mb * mb
    cov = _box_mean(a * b, k) - ma * mb
    s = ((2 * ma * mb + c1) * (2 * cov + c2)) / ((ma * ma + mb * mb + c1) * (va + vb + c2))
    return float(np.clip(s.mean(), -1.0, 1.0))


def dhash(a: np.ndarray, size: int = 16) -> np.ndarray:
    """A difference hash: whether each cell of a size x (size+1) shrink is brighter than the next."""
    rows = np.array_split(np.arange(a.shape[0]), size)
    cols = np.array_split(np.arange(a.shape[1]), size + 1)
    small = np.array([[a[np.ix_(r, c)].mean() for c in cols] for r in rows])
    return small[:, 1:] > small[:, :-1]


def background(a: np.ndarray) -> float:
    """The most common gray level (16 bins): the canvas behind the drawing."""
    counts, edges = np.histogram(a, bins=16, range=(0.0, 1.0))
    i = int(np.argmax(counts))
    return float(a[(a >= edges[i]) & (a <= edges[i + 1])].mean())


def is_blank(a: np.ndarray) -> bool:
    """Nothing drawn: (almost) every pixel is the background's."""
    return float(np.mean(np.abs(a - background(a)) > 0.04)) < 0.002


def visual_scores(got: np.ndarray | None, want: np.ndarray | None) -> dict[str, float]:
    """{"visual": SSIM rescaled so that a blank canvas of the reference's background scores 0 and
    the reference itself 1; "visual_hash": difference-hash agreement, rescaled the same way}."""
    if got is None or want is None:
        return {"visual": 0.0, "visual_hash": 0.0}
    blank = np.full_like(want, background(want))
    floor = ssim(blank, want)
    visual = (ssim(got, want) - floor) / (1.0 - floor) if floor < 1.0 else float(np.allclose(got, want, atol=0.02))
    h_want = dhash(want)
    h_floor = float(np.mean(dhash(blank) == h_want))
    h_got = float(np.mean(dhash(got) == h_want))
    hashed = (h_got - h_floor) / (1.0 - h_floor) if h_floor < 1.0 else 1.0
    return {"visual": round(max(0.0, min(1.0, visual)), 4), "visual_hash": round(max(0.0, min(1.0, hashed)), 4)}


# ------------------------------------------------------------------ bounded reading of attributes
def text(value) -> str:
    return " ".join(str(value)[:MAX_TEXT].split()).casefold() if isinstance(value, (str, int, float)) else ""


def texts(values) -> list[str]:
    return [t for t in (text(v) for v in (values if isinstance(values, list) else [])[:MAX_LIST]) if t]


def floats(values) -> list[float | None]:
    out = []
    for v in (values if isinstance(values, list) else [])[:MAX_LIST]:
        out.append(float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None)
    return out


def items(values, limit: int = MAX_LIST) -> list[dict]:
    return [v for v in (values if isinstance(values, list) else [])[:limit] if isinstance(v, dict)]


_HEX = re.compile(r"#[0-9a-f]{6}")


def rgb(value) -> np.ndarray | None:
    if not isinstance(value, str) or not _HEX.fullmatch(value.lower()):
        return None
    return np.array([int(value[i:i + 2], 16) for i in (1, 3, 5)], dtype=float) / 255.0


def color_match(a, b) -> float:
    """1 for the same color (within 0.08 of RGB distance, per channel scale), falling to 0 at 0.35."""
    x, y = rgb(a), rgb(b)
    if x is None or y is None:
        return float(x is None and y is None)
    d = float(np.linalg.norm(x - y) / math.sqrt(3))
    return max(0.0, min(1.0, (0.35 - d) / 0.27))


def values_match(got: list, want: list, rel: float = 1e-3) -> float:
    """The fraction of positions, over the longer list, whose values agree (relative 1e-3)."""
    if not got and not want:
        return 1.0
    same = sum(1 for g, w in zip(got, want) if g is not None and w is not None
               and abs(g - w) <= rel * max(1.0, abs(w)))
    return same / max(len(got), len(want))


def greedy_pairs(scores: list[list[float]]) -> list[tuple[int, int, float]]:
    """(i, j, score) pairs, best first, each i and j used once: a bounded greedy assignment."""
    ranked = sorted(((s, i, j) for i, row in enumerate(scores) for j, s in enumerate(row) if s > 0), reverse=True)
    used_i, used_j, pairs = set(), set(), []
    for s, i, j in ranked:
        if i not in used_i and j not in used_j:
            used_i.add(i)
            used_j.add(j)
            pairs.append((i, j, s))
    return pairs
