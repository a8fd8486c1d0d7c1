"""The `scene` domain: place and colour primitives as described -> code that draws them.

Two routes, drawn from (split, index, seed): a 2D scene the program prints as an SVG document
(rect, circle, ellipse, line, polygon, text), and a 3D scene built with the sandbox's scene3d
module (box, sphere, cylinder; families/render/harnesses/scene3d.py), rendered on a fixed camera.
Coordinates are exact in the prompt, so the reference's geometry is the only right one; scored
by the `render` verifier (shapes paired by kind, position, size and colour, plus pixels).
"""

from __future__ import annotations

import random

from flywheel.domains.registry import register_domain
from flywheel.families.render.render_base import RenderDomain, fenced

COLORS = ("red", "blue", "green", "orange", "purple", "black", "gold", "teal", "brown", "gray")
SVG_RULES = ("Print the SVG document (or write it to out.svg); no <image>, no external references. "
             "Reply with the whole Python program in one ```python block.")
SCENE_RULES = ("Use the scene3d module (already importable): scene3d.box(center, size, color), "
               "scene3d.sphere(center, radius, color), scene3d.cylinder(center, radius, height, color) "
               "(cylinder axis along z; centers are (x, y, z)). Reply with the whole Python program in one "
               "```python block.")


def _svg_shape(rng: random.Random, width: int, height: int) -> tuple[str, str]:
    """(an SVG element, its description)."""
    color = rng.choice(COLORS)
    kind = rng.choice(["rect", "circle", "ellipse", "line", "polygon"])
    x, y = rng.randrange(10, width - 60, 5), rng.randrange(10, height - 50, 5)
    if kind == "rect":
        w, h = rng.randrange(10, 50, 5), rng.randrange(10, 40, 5)
        return (f'<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="{color}"/>',
                f"a {color} filled rectangle with top-left corner ({x}, {y}), width {w}, height {h}")
    if kind == "circle":
        r = rng.randrange(5, 25, 5)
        return (f'<circle cx="{x + r}" cy="{y + r}" r="{r}" fill="{color}"/>',
                f"a {color} filled circle centered at ({x + r}, {y + r}) with radius {r}")
    if kind == "ellipse":
        rx, ry = rng.randrange(10, 30, 5), rng.randrange(5, 20, 5)
        return (f'<ellipse cx="{x + rx}" cy="{y + ry}" rx="{rx}" ry="{ry}" fill="{color}"/>',
                f"a {color} filled ellipse centered at ({x + rx}, {y + ry}) with radii {rx} (x) and {ry} (y)")
    if kind == "line":
        x2, y2 = x + rng.randrange(20, 50, 5), y + rng.randrange(10, 40, 5)
        return (f'<line x1="{x}" y1="{y}" x2="{x2}" y2="{y2}" stroke="{color}" stroke-width="3"/>',
                f"a {color} line 3 units wide from ({x}, {y}) to ({x2}, {y2})")
    a, b, c = (x, y + 30), (x + 40, y + 30), (x + 20, y)
    return (f'<polygon points="{a[0]},{a[1]} {b[0]},{b[1]} {c[0]},{c[1]}" fill="{color}"/>',
            f"a {color} filled triangle (polygon) with corners {a}, {b}, {c}")


def svg_task(rng: random.Random) -> dict:
    width, height = rng.choice([(200, 150), (240, 160), (160, 160)])
    shapes = [_svg_shape(rng, width, height) for _ in range(rng.randint(2, 4))]
    elements = [e for e, _ in shapes]
    wants = [d for _, d in shapes]
    if rng.random() < 0.4:
        word = rng.choice(["Hello", "Flywheel", "Beam", "Scene", "Map"])
        elements.append(f'<text x="10" y="{height - 10}" font-size="14" fill="black">{word}</text>')
        wants.append(f"the black text '{word}' at (10, {height - 10}), font size 14")
    document = f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">' + "".join(elements) + "</svg>"
    listing = "\n".join(f"{i + 1}. {d}" for i, d in enumerate(wants))
    prompt = (f"Write a Python program that prints an SVG document {width} wide and {height} high "
              f"(white background, y axis pointing down) showing, in this order:\n{listing}\n{SVG_RULES}")
    return {"prompt": prompt, "route": "svg", "reference_code": f"print({document!r})\n"}


def scene3d_task(rng: random.Random) -> dict:
    calls, wants, used = [], [], set()
    for _ in range(rng.randint(2, 4)):
        color = rng.choice([c for c in COLORS if c not in used])
        used.add(color)
        kind = rng.choice(["box", "sphere", "cylinder"])
        x, y = rng.randint(-3, 3), rng.randint(-3, 3)
        if kind == "box":
            size = rng.choice([1, 2])
            calls.append(f"scene3d.box(center=({x}, {y}, {size / 2}), size={size}, color={color!r})")
            wants.append(f"a {color} cube of side {size} resting on the ground (z = 0), centered at x={x}, y={y}")
        elif kind == "sphere":
            r = rng.choice([0.5, 1])
            calls.append(f"scene3d.sphere(center=({x}, {y}, {r}), radius={r}, color={color!r})")
            wants.append(f"a {color} sphere of radius {r} resting on the ground (z = 0) at x={x}, y={y}")
        else:
            r, h = rng.choice([0.5, 1]), rng.choice([1, 2, 3])
            calls.append(f"scene3d.cylinder(center=({x}, {y}, {h / 2}), radius={r}, height={h}, color={color!r})")
            wants.append(f"a {color} upright cylinder of radius {r} and height {h} standing on the ground "
                         f"(z = 0) at x={x}, y={y}")
    listing = "\n".join(f"{i + 1}. {d}" for i, d in enumerate(wants))
    prompt = f"Build this 3D scene (the ground is the plane z = 0):\n{listing}\n{SCENE_RULES}"
    return {"prompt": prompt, "route": "scene3d", "bounds": 4, "reference_code": "import scene3d\n\n" + "\n".join(calls) + "\n"}


@register_domain
class Scene(RenderDomain):
    name = "scene"
    description = "place and colour primitives as described: SVG (2D) or scene3d (3D) code, rendered"

    def sample_task(self, rng: random.Random) -> dict:
        task = svg_task(rng) if rng.random() < 0.5 else scene3d_task(rng)
        task["answer"] = fenced(task["reference_code"])
        return task
