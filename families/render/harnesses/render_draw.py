"""Drawing what code described, inside the sandbox: an SVG document, or scene3d primitives.

SVG: a safe subset is parsed (no DTD or entities, nothing fetched, no script): rect, circle,
ellipse, line, polyline, polygon, path (M L H V Z; curves drawn as lines to their end points),
text, and g/svg with translate/scale. <image>, <use>, <foreignObject>, <script> and any href
are refused: named in `refused`, never drawn. The rest is drawn with matplotlib (Agg), y down.
Scene: boxes, spheres and cylinders as shaded polygons on matplotlib's 3D axes, fixed camera.
Each returns {attributes..., "png": base64}; every count and size is capped, so any input costs
bounded time. Runs in a fork of the harness, on data only.
"""

import math
import re
import xml.etree.ElementTree as ET

MAX_SHAPES = 2000
MAX_DEPTH = 40
MAX_SIDE = 4096.0
SIDE = 256
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_TOKENS = re.compile(rf"[MmLlHhVvZzCcSsQqTtAa]|{_NUMBER}")
_REFUSED = {"image", "use", "foreignObject", "script", "iframe", "object", "embed", "feImage"}
_SKIPPED = {"defs", "title", "desc", "metadata", "style", "clipPath", "mask", "linearGradient",
            "radialGradient", "pattern", "symbol", "marker", "filter"}
_CURVE_ARGS = {"c": 6, "s": 4, "q": 4, "t": 2, "a": 7}


def num(text, default=0.0):
    match = re.match(rf"\s*({_NUMBER})", str(text or ""))
    value = float(match.group(1)) if match else default
    return max(-1e6, min(1e6, value)) if math.isfinite(value) else default


def color(text):
    """(hex, alpha) of an SVG paint; None for none, url(...) and what is not a color."""
    from matplotlib.colors import to_hex
    text = str(text or "").strip()
    if not text or text == "none" or text.startswith("url(") or len(text) > 40:
        return None
    rgb = re.fullmatch(r"rgb\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)", text)
    try:
        return to_hex([min(int(v), 255) / 255 for v in rgb.groups()]) if rgb else to_hex(text)
    except ValueError:
        return None


def style_of(element, inherited):
    style = dict(inherited)
    for part in str(element.get("style") or "").split(";")[:50]:
        if ":" in part:
            key, value = part.split(":", 1)
            style[key.strip()] = value.strip()
    for key in ("fill", "stroke", "stroke-width", "font-size", "opacity", "fill-opacity"):
        if element.get(key) is not None:
            style[key] = element.get(key)
    return style


def transform_of(text, base):
    """`base` (sx, sy, tx, ty) composed with translate/scale; other transforms are unsupported."""
    sx, sy, tx, ty = base
    ok = True
    for name, args in re.findall(r"(\w+)\s*\(([^)]{0,200})\)", str(text or ""))[:10]:
        values = [num(v) for v in re.findall(_NUMBER, args)]
        if name == "translate" and values:
            tx, ty = tx + sx * values[0], ty + sy * (values[1] if len(values) > 1 else 0.0)
        elif name == "scale" and values:
            sx, sy = sx * values[0], sy * (values[1] if len(values) > 1 else values[0])
        else:
            ok = False
    return (sx, sy, tx, ty), ok


def path_points(d):
    """Subpaths of a path's d as point lists (curves reduced to their end points), and whether it
    had curves."""
    tokens, paths, points, curves = _TOKENS.findall(str(d)[:20000]), [], [], False
    x = y = 0.0
    command, i = "M", 0
    while i < len(tokens):
        if tokens[i].isalpha():
            command = tokens[i]
            i += 1
            if command in "Zz":
                if points:
                    paths.append((points, True))
                    x, y = points[0]
                points = []
                continue
        lower, relative = command.lower(), command.islower()
        need = {"m": 2, "l": 2, "h": 1, "v": 1}.get(lower, _CURVE_ARGS.get(lower, 2))
        args = [num(t) for t in tokens[i:i + need]]
        if len(args) < need or any(t.isalpha() for t in tokens[i:i + need]):
            break
        i += need
        if lower == "h":
            x = x + args[0] if relative else args[0]
        elif lower == "v":
            y = y + args[0] if relative else args[0]
        else:
            curves |= lower in _CURVE_ARGS
            x, y = (x + args[-2], y + args[-1]) if relative else (args[-2], args[-1])
        if lower == "m":
            if points:
                paths.append((points, False))
            points = []
            command = "l" if relative else "L"
        points.append((x, y))
        if sum(len(p) for p, _ in paths) + len(points) > 5000:
            break
    if points:
        paths.append((points, False))
    return paths, curves


def svg_shapes(text):
    """Shapes and texts of an SVG document, in document order, with the canvas box."""
    if len(text) > 1 << 20:
        raise ValueError("the SVG document is larger than 1 MB")
    if re.search(r"<!DOCTYPE|<!ENTITY", text, re.I):
        raise ValueError("DTDs and entities are refused")
    start = text.find("<svg")
    end = text.rfind("</svg>")
    if start < 0 or end < 0:
        raise ValueError("no <svg>...</svg> document in the output")
    root = ET.fromstring(text[start:end + 6])
    box = [num(v) for v in re.findall(_NUMBER, str(root.get("viewBox") or ""))][:4]
    width, height = num(root.get("width"), 300.0), num(root.get("height"), 150.0)
    if len(box) != 4 or box[2] <= 0 or box[3] <= 0:
        box = [0.0, 0.0, width, height]
    if not (0 < box[2] <= MAX_SIDE and 0 < box[3] <= MAX_SIDE):
        raise ValueError(f"the canvas {box[2]} x {box[3]} is not between 0 and {MAX_SIDE}")
    shapes, texts, refused, unsupported = [], [], [], set()
    stack = [(child, {"fill": "black"}, (1.0, 1.0, 0.0, 0.0), 1) for child in reversed(list(root))]
    while stack and len(shapes) + len(texts) < MAX_SHAPES:
        element, inherited, base, depth = stack.pop()
        tag = str(element.tag).rsplit("}", 1)[-1]
        if tag in _REFUSED or any(k.endswith("href") for k in element.attrib):
            refused.append(tag)
            continue
        if tag in _SKIPPED or depth > MAX_DEPTH:
            continue
        style = style_of(element, inherited)
        transform, ok = transform_of(element.get("transform"), base)
        if not ok:
            unsupported.add("transform")
        sx, sy, tx, ty = transform
        at = lambda px, py: (tx + sx * px, ty + sy * py)  # noqa: E731
        g = element.get
        if tag in ("g", "svg", "a"):
            stack += [(c, style, transform, depth + 1) for c in reversed(list(element))]
            continue
        if tag == "text":
            content = "".join(element.itertext())[:200]
            x, y = at(num(g("x")), num(g("y")))
            texts.append({"text": content.strip(), "x": x, "y": y, "size": num(style.get("font-size"), 16.0) * abs(sy),
                          "fill": color(style.get("fill"))})
            continue
        if tag == "rect":
            (x0, y0), (x1, y1) = at(num(g("x")), num(g("y"))), at(num(g("x")) + num(g("width")), num(g("y")) + num(g("height")))
            points, closed = [(x0, y0), (x1, y0), (x1, y1), (x0, y1)], True
        elif tag in ("circle", "ellipse"):
            cx, cy = num(g("cx")), num(g("cy"))
            rx = num(g("r")) if tag == "circle" else num(g("rx"))
            ry = num(g("r")) if tag == "circle" else num(g("ry"))
            points = [at(cx + rx * math.cos(a * math.pi / 24), cy + ry * math.sin(a * math.pi / 24)) for a in range(48)]
            closed = True
        elif tag == "line":
            points, closed = [at(num(g("x1")), num(g("y1"))), at(num(g("x2")), num(g("y2")))], False
        elif tag in ("polyline", "polygon"):
            values = [num(v) for v in re.findall(_NUMBER, str(g("points") or "")[:20000])]
            points, closed = [at(values[i], values[i + 1]) for i in range(0, len(values) - 1, 2)], tag == "polygon"
        elif tag == "path":
            subpaths, curves = path_points(g("d"))
            if curves:
                unsupported.add("curves")
            for points, closed in subpaths[:50]:
                shapes.append(shape("path", [at(*p) for p in points], closed, style, sx))
            continue
        else:
            unsupported.add(tag[:30])
            continue
        if points:
            shapes.append(shape(tag, points, closed, style, sx))
    return {"box": box, "shapes": shapes, "texts": texts, "refused": refused[:50],
            "unsupported": sorted(unsupported)[:20], "truncated": bool(stack)}


def shape(kind, points, closed, style, scale):
    fill = color(style.get("fill")) if closed else None
    return {"kind": kind, "points": points[:5000], "closed": closed, "fill": fill,
            "stroke": color(style.get("stroke")), "width": num(style.get("stroke-width"), 1.0) * abs(scale),
            "alpha": max(0.0, min(1.0, num(style.get("opacity"), 1.0) * num(style.get("fill-opacity"), 1.0)))}


def svg_render(text, preview):
    """The SVG document's shapes (bounding boxes on a 0..1 canvas), texts and PNG."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Polygon
    parsed = svg_shapes(str(text))
    x0, y0, w, h = parsed["box"]
    figure = Figure(figsize=(w / max(w, h) * 4, h / max(w, h) * 4), dpi=SIDE / 4)
    ax = figure.add_axes([0, 0, 1, 1])
    ax.set_xlim(x0, x0 + w)
    ax.set_ylim(y0 + h, y0)
    ax.set_axis_off()
    points_per_unit = 4 * 72 / max(w, h)
    described = []
    for s in parsed["shapes"]:
        xs, ys = [p[0] for p in s["points"]], [p[1] for p in s["points"]]
        if len(s["points"]) >= 2:
            ax.add_patch(Polygon(s["points"], closed=s["closed"], facecolor=s["fill"] or "none",
                                 edgecolor=s["stroke"] or "none", linewidth=min(s["width"], 100) * points_per_unit,
                                 alpha=s["alpha"], fill=s["fill"] is not None))
        described.append({"kind": s["kind"], "fill": s["fill"], "stroke": s["stroke"],
                          "bbox": [round((min(xs) - x0) / w, 4), round((min(ys) - y0) / h, 4),
                                   round((max(xs) - x0) / w, 4), round((max(ys) - y0) / h, 4)]})
    for t in parsed["texts"]:
        ax.text(t["x"], t["y"], t["text"], fontsize=min(t["size"] * points_per_unit, 200), color=t["fill"] or "black",
                va="baseline", clip_on=True)
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    texts = [{"text": t["text"], "x": round((t["x"] - x0) / w, 4), "y": round((t["y"] - y0) / h, 4)} for t in parsed["texts"]]
    return {"shapes": described, "texts": texts, "refused": parsed["refused"], "unsupported": parsed["unsupported"],
            "truncated": parsed["truncated"], "size": [w, h], "png": preview(np.asarray(canvas.buffer_rgba()))}


# ------------------------------------------------------------------ scene3d
def _box_faces(c, s):
    (x, y, z), (dx, dy, dz) = c, (s[0] / 2, s[1] / 2, s[2] / 2)
    v = [(x + i * dx, y + j * dy, z + k * dz) for i in (-1, 1) for j in (-1, 1) for k in (-1, 1)]
    quads = [(0, 1, 3, 2), (4, 5, 7, 6), (0, 1, 5, 4), (2, 3, 7, 6), (0, 2, 6, 4), (1, 3, 7, 5)]
    return [[v[i] for i in q] for q in quads]


def _sphere_faces(c, r):
    faces, rings, segments = [], 8, 12
    point = lambda i, j: (c[0] + r * math.sin(math.pi * i / rings) * math.cos(2 * math.pi * j / segments),  # noqa: E731
                          c[1] + r * math.sin(math.pi * i / rings) * math.sin(2 * math.pi * j / segments),
                          c[2] + r * math.cos(math.pi * i / rings))
    for i in range(rings):
        for j in range(segments):
            faces.append([point(i, j), point(i, j + 1), point(i + 1, j + 1), point(i + 1, j)])
    return faces


def _cylinder_faces(c, r, h):
    n, (x, y, z) = 16, c
    ring = lambda zz: [(x + r * math.cos(2 * math.pi * k / n), y + r * math.sin(2 * math.pi * k / n), zz) for k in range(n)]  # noqa: E731
    low, high = ring(z - h / 2), ring(z + h / 2)
    return [[low[k], low[(k + 1) % n], high[(k + 1) % n], high[k]] for k in range(n)] + [low, high]


def primitive(p, bound):
    """A validated primitive {kind, center, size, color}, or None."""
    if not isinstance(p, dict) or p.get("kind") not in ("box", "sphere", "cylinder"):
        return None
    try:
        center = [max(-bound * 4, min(bound * 4, float(v))) for v in list(p.get("center"))[:3]]
        size = [max(0.0, min(bound * 4, float(v))) for v in list(p.get("size"))[:3]]
    except (TypeError, ValueError):
        return None
    if len(center) != 3 or len(size) != 3 or not all(map(math.isfinite, center + size)):
        return None
    return {"kind": p["kind"], "center": [round(v, 4) for v in center], "size": [round(v, 4) for v in size],
            "color": color(p.get("color")) or "#808080"}


def scene_render(primitives, bounds, preview):
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import to_rgb
    from matplotlib.figure import Figure
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection
    bound = min(max(float(bounds or 4.0), 0.5), 100.0)
    items = [q for p in (primitives if isinstance(primitives, list) else [])[:200] if (q := primitive(p, bound))]
    faces, colors, light = [], [], np.array([0.4, -0.5, 0.75]) / np.linalg.norm([0.4, -0.5, 0.75])
    for p in items:
        c, s = p["center"], p["size"]
        made = (_box_faces(c, s) if p["kind"] == "box" else _sphere_faces(c, s[0] / 2) if p["kind"] == "sphere"
                else _cylinder_faces(c, s[0] / 2, s[2]))
        for face in made:
            a, b, d = (np.array(face[0]), np.array(face[1]), np.array(face[-1]))
            normal = np.cross(b - a, d - a)
            norm = np.linalg.norm(normal)
            lit = abs(float(normal @ light)) / norm if norm > 0 else 0.5
            faces.append(face)
            colors.append(tuple(min(1.0, ch * (0.45 + 0.55 * lit)) for ch in to_rgb(p["color"])))
    figure = Figure(figsize=(4, 4), dpi=SIDE / 4)
    ax = figure.add_subplot(projection="3d")
    ax.view_init(elev=25, azim=-60)
    ax.set_xlim(-bound, bound)
    ax.set_ylim(-bound, bound)
    ax.set_zlim(-bound, bound)
    ax.set_box_aspect((1, 1, 1), zoom=1.6)
    ax.set_axis_off()
    if faces:
        ax.add_collection3d(Poly3DCollection(faces, facecolors=colors, edgecolors="none"))
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return {"primitives": items, "png": preview(np.asarray(canvas.buffer_rgba()))}
