"""Attribute scores of a render against its reference: charts (matplotlib) and primitives (SVG,
scene3d). Each function takes the two reported dicts (untrusted, read through render_compare's
bounded readers) and returns component scores in [0, 1], every one "1 means as the reference".

Charts: `chart_type` (the multiset of series types: line, bar, barh, scatter, pie, area, and the
number of axes), `data` (series paired by type, values compared position by position), `colors`
(of the paired series, per bar or wedge where there are several), `labels` (titles, axis labels,
scales, legend entries, category tick labels, free texts). Primitives: `shapes` (paired by kind),
`geometry` (position and size), `colors`, `labels` (SVG texts). Extra series or shapes count
against the score (every sum is over the larger of the two counts).
"""

from __future__ import annotations

import re
from collections import Counter

from flywheel.families.render.render_compare import (color_match, floats, greedy_pairs, items, text, texts,
                                               values_match)

MAX_SERIES = 30
MAX_PAIRS = 20_000  # shape pairs scored at most: bounded time whatever the counts
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def series_of(figure: dict) -> list[dict]:
    """Every series of the figure, with its axes' index, bounded."""
    out = []
    for index, axes in enumerate(items(figure.get("axes"), 20)):
        for s in items(axes.get("series"), MAX_SERIES):
            out.append({"axes": index, "type": text(s.get("type")), "x": floats(s.get("x")), "y": floats(s.get("y")),
                        "color": s.get("color"), "colors": (s.get("colors") if isinstance(s.get("colors"), list) else [])[:500],
                        "labels": texts(s.get("labels"))})
    return out[:MAX_SERIES]


def _series_similarity(a: dict, b: dict) -> float:
    if a["type"] != b["type"]:
        return 0.0
    if a["type"] == "scatter":
        pa = sorted(zip(a["x"], a["y"]), key=repr)
        pb = sorted(zip(b["x"], b["y"]), key=repr)
        return values_match([v for p in pb for v in p], [v for p in pa for v in p])
    y = values_match(b["y"], a["y"])
    x = values_match(b["x"], a["x"]) if a["x"] and b["x"] and a["type"] == "line" else 1.0
    return y * x


def _label_slots(figure: dict) -> list[str]:
    slots = [f"suptitle:{text(figure.get('suptitle'))}"] if text(figure.get("suptitle")) else []
    slots += [f"text:{t}" for t in texts(figure.get("figure_texts")) + texts(figure.get("figure_legend"))]
    for i, axes in enumerate(items(figure.get("axes"), 20)):
        for key in ("title", "xlabel", "ylabel"):
            if text(axes.get(key)):
                slots.append(f"{i}:{key}:{text(axes.get(key))}")
        for key in ("xscale", "yscale"):
            if text(axes.get(key)) not in ("", "linear"):
                slots.append(f"{i}:{key}:{text(axes.get(key))}")
        for key in ("xticks", "yticks"):
            labels = texts(axes.get(key))
            if any(not _NUMBER.fullmatch(t.replace("−", "-").replace(",", "")) for t in labels):
                slots.append(f"{i}:{key}:{'|'.join(labels)}")  # category names, in order
        slots += [f"{i}:legend:{t}" for t in texts(axes.get("legend"))]
        slots += [f"{i}:text:{t}" for t in texts(axes.get("texts"))]
    return slots


def _share(want: list[str], got: list[str]) -> float:
    """The fraction of `want` (a multiset) found in `got`."""
    if not want:
        return 1.0
    return sum((Counter(want) & Counter(got)).values()) / len(want)


def chart_scores(got: dict, want: dict) -> dict[str, float]:
    ga, wa = series_of(got), series_of(want)
    n = max(len(ga), len(wa)) or 1
    types_g, types_w = [s["type"] for s in ga], [s["type"] for s in wa]
    same_types = len(wa) - sum(max(0, types_w.count(t) - types_g.count(t)) for t in set(types_w))
    axes_g, axes_w = len(items(got.get("axes"), 20)), len(items(want.get("axes"), 20))
    chart_type = same_types / n * (min(axes_g, axes_w) / max(axes_g, axes_w) if axes_g and axes_w else 0.0)
    scores = [[_series_similarity(w, g) + 1e-3 * (w["type"] == g["type"]) - 1e-6 * abs(i - j)
               for j, g in enumerate(ga)] for i, w in enumerate(wa)]
    pairs = greedy_pairs(scores)
    data = sum(max(0.0, s - 1e-3) for _, _, s in pairs) / n
    colors = 0.0
    for i, j, _ in pairs:
        w, g = wa[i], ga[j]
        if w["colors"] and len(set(map(str, w["colors"]))) > 1:  # bars or wedges of several colors
            per = [color_match(gc, wc) for gc, wc in zip(g["colors"], w["colors"])]
            colors += sum(per) / max(len(w["colors"]), len(g["colors"]))
        else:
            colors += color_match(g["color"], w["color"])
    want_labels = _label_slots(want) + [f"pie:{t}" for s in wa for t in s["labels"]]
    got_labels = _label_slots(got) + [f"pie:{t}" for s in ga for t in s["labels"]]
    return {"chart_type": round(chart_type, 4), "data": round(min(1.0, data), 4),
            "colors": round(colors / n, 4), "labels": round(_share(want_labels, got_labels), 4)}


def data_numbers(figure: dict) -> set[float]:
    """The distinct data values of a chart's series (pie fractions as percentages too)."""
    values = set()
    for s in series_of(figure):
        values |= {round(v, 4) for v in s["y"] if v is not None}
        if s["type"] == "pie":
            values |= {round(100 * v, 1) for v in s["y"] if v is not None}
    return values


def _spellings(v: float) -> set[float]:
    """How a value may be written: as it is, or rounded to 0, 1 or 2 decimals."""
    return {v, round(v), round(v, 1), round(v, 2)}


def spelled_numbers(figure: dict) -> set[float]:
    """Numbers written in the chart's free texts (annotations, figure texts, title, labels)."""
    found = set()
    words = texts(figure.get("figure_texts")) + [text(figure.get("suptitle"))]
    for axes in items(figure.get("axes"), 20):
        words += texts(axes.get("texts")) + [text(axes.get(k)) for k in ("title", "xlabel", "ylabel")]
    for w in words:
        found |= {round(float(m), 4) for m in _NUMBER.findall(w)[:200]}
    return found


def spells_data(got: dict, want: dict) -> bool:
    """The response writes out most of the reference's data values as text, and the reference
    does not: the answer spelled instead of drawn."""
    data, spelled, own = data_numbers(want), spelled_numbers(got), spelled_numbers(want)
    shown = {v for v in data if _spellings(v) & spelled}  # set lookups: linear in the texts
    already = {v for v in data if _spellings(v) & own}
    return len(data) >= 3 and len(shown - already) >= max(3, len(data) // 2)


# ------------------------------------------------------------------ primitives (SVG, scene3d)
def _geometry(a: dict, b: dict, scale: float) -> float:
    if "bbox" in a:
        fa, fb = floats(a.get("bbox")), floats(b.get("bbox"))
        if len(fa) != 4 or len(fb) != 4 or None in fa + fb:
            return 0.0
        center = max(abs((fa[0] + fa[2]) - (fb[0] + fb[2])), abs((fa[1] + fa[3]) - (fb[1] + fb[3]))) / 2
        size = max(abs((fa[2] - fa[0]) - (fb[2] - fb[0])), abs((fa[3] - fa[1]) - (fb[3] - fb[1])))
        d = center + 0.5 * size
    else:
        ca, cb, sa, sb = (floats(a.get("center")), floats(b.get("center")), floats(a.get("size")), floats(b.get("size")))
        if any(len(v) != 3 or None in v for v in (ca, cb, sa, sb)):
            return 0.0
        d = (max(abs(x - y) for x, y in zip(ca, cb)) + 0.5 * max(abs(x - y) for x, y in zip(sa, sb))) / scale
    return max(0.0, min(1.0, 1.0 - d / 0.06))


def _paint(a: dict, b: dict) -> float:
    if "fill" in a:
        fill = color_match(b.get("fill"), a.get("fill"))
        return fill if a.get("stroke") is None else 0.5 * fill + 0.5 * color_match(b.get("stroke"), a.get("stroke"))
    return color_match(b.get("color"), a.get("color"))


def primitive_scores(got: dict, want: dict, key: str, scale: float = 8.0) -> dict[str, float]:
    """Scores of the shapes (key "shapes", SVG) or primitives (key "primitives", scene3d)."""
    wa, ga = items(want.get(key), 2000), items(got.get(key), 2000)
    n = max(len(wa), len(ga)) or 1
    if len(wa) * len(ga) > MAX_PAIRS:  # far more shapes than any reference: the rest go unpaired
        ga = ga[: max(1, MAX_PAIRS // max(1, len(wa)))]
    geo = [[_geometry(w, g, scale) if text(w.get("kind")) == text(g.get("kind")) else -1.0 for g in ga] for w in wa]
    paint = [[_paint(w, g) for g in ga] for w in wa]
    scores = [[0.001 + 0.5 * geo[i][j] + 0.5 * paint[i][j] if geo[i][j] >= 0 else 0.0 for j in range(len(ga))]
              for i in range(len(wa))]
    pairs = greedy_pairs(scores)
    out = {"shapes": round(len(pairs) / n, 4), "geometry": round(sum(geo[i][j] for i, j, _ in pairs) / n, 4),
           "colors": round(sum(paint[i][j] for i, j, _ in pairs) / n, 4)}
    want_texts = texts([t.get("text") for t in items(want.get("texts"), 200)])
    if want_texts:
        out["labels"] = round(_share(want_texts, texts([t.get("text") for t in items(got.get("texts"), 200)])), 4)
    return out
