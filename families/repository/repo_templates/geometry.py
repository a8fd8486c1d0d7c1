"""Package template: geometry and units: units, vectors, shapes, polygon."""

from __future__ import annotations

import math
import random

from flywheel.families.repository.repo_templates.base import Package, Site, check, fill, modules_with_init  # noqa: F401


GEO_UNITS = """\
\"\"\"Length units; lengths inside the package are millimetres.\"\"\"

MM_PER = {"mm": 1, "cm": 10, "m": 1000, "in": 25.4, "ft": 304.8}


def to_mm(value, unit):
    \"\"\"`value` in `unit` as millimetres.\"\"\"
    return value * MM_PER[unit]


def from_mm(value, unit):
    \"\"\"`value` millimetres in `unit`.\"\"\"
    return value / MM_PER[unit]
"""

GEO_VECTORS = """\
\"\"\"2-D points as (x, y) tuples.\"\"\"

import math


def distance(a, b):
    \"\"\"Straight-line distance between points a and b.\"\"\"
    return math.hypot(b[0] - a[0], b[1] - a[1])
"""

GEO_SHAPES = """\
\"\"\"Areas of shapes measured in any unit, in square millimetres.\"\"\"

import math

from .units import to_mm


def rect_area(w, h, unit="@UNIT@"):
    \"\"\"Area of a w x h rectangle given in `unit`.\"\"\"
    return to_mm(w, unit) * to_mm(h, unit)


def circle_area(r, unit="@UNIT@"):
    \"\"\"Area of a circle of radius r given in `unit`.\"\"\"
    return math.pi * to_mm(r, unit) ** 2
"""

GEO_POLYGON = """\
\"\"\"Closed polygons as lists of points.\"\"\"

from . import vectors


def perimeter(points):
    \"\"\"Length around the closed polygon, the closing edge included.\"\"\"
    total = 0.0
    for i in range(len(points)):
        total += vectors.distance(points[i - 1], points[i])
    return total


def bounding_box(points):
    \"\"\"(min_x, min_y, max_x, max_y) of `points`; None for no points.\"\"\"
    if not points:
        return None
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    return (min(xs), min(ys), max(xs), max(ys))


def contains(box, point):
    \"\"\"Whether `point` lies in `box`, its edges included.\"\"\"
    return box[0] <= point[0] <= box[2] and box[1] <= point[1] <= box[3]


def diagonal(points):
    \"\"\"Length of the bounding box's diagonal.\"\"\"
    box = bounding_box(points)
    return vectors.distance((box[0], box[1]), (box[2], box[3]))
"""


def geometry(rng: random.Random) -> Package:
    name = rng.choice(["geokit", "shapes", "measure"])
    unit = rng.choice(["mm", "cm", "m"])
    bad_unit = {"mm": "cm", "cm": "m", "m": "mm"}[unit]
    mods = {"units": GEO_UNITS, "vectors": GEO_VECTORS, "shapes": GEO_SHAPES, "polygon": GEO_POLYGON}
    mods = modules_with_init(name, "Geometry with units: lengths, areas, polygons.",
                             {k: fill(v, UNIT=unit) for k, v in mods.items()})
    mm = {"mm": 1, "cm": 10, "m": 1000, "in": 25.4, "ft": 304.8}
    readme = (f"# {name}\n\nUnits: mm, cm, m, in, ft. Areas come back in mm^2; shapes take "
              f"sizes in {unit} by default.\n")
    side = rng.choice([2, 3, 4, 5, 6, 7])
    sq = [(0, 0), (side, 0), (side, side), (0, side)]
    tests = [
        ("units", "to_mm", "to_mm", "to_mm(3, 'cm') == 30"),
        ("units", "from_mm", "from_mm", "from_mm(2500, 'm') == 2.5"),
        ("vectors", "distance", "distance", "distance((0, 0), (3, 4)) == 5.0"),
        ("shapes", "rect", "rect_area", f"rect_area({side}, 3, 'mm') == {side * 3}"),
        ("polygon", "perimeter", "perimeter", "perimeter([(0, 0), (4, 0), (4, 3)]) == 12.0"),
        ("polygon", "box", "bounding_box", "bounding_box([(1, 5), (3, 2)]) == (1, 2, 3, 5)"),
    ]
    regression = [
        check("units", "to_mm(2, 'in')", 50.8, "units.to_mm"),
        check("units", "from_mm(300, 'cm')", 30.0, "units.from_mm"),
        check("vectors", "distance((1, 1), (4, 5))", 5.0, "vectors.distance"),
        check("polygon", "bounding_box([(2, 3), (-1, 7)])", [-1, 3, 2, 7], "polygon.bounding_box"),
        check("polygon", "contains((0, 0, 4, 4), (1, 2))", True, "polygon.contains"),
        check("shapes", "rect_area(3, 4, 'mm')", 12, "shapes.rect_area", "units.to_mm"),
    ]
    sites = [
        Site("wrong_operator", "polygon", "polygon.contains",
             (("box[0] <= point[0] <= box[2]", "box[0] < point[0] < box[2]"),),
             "contains(box, point) says points on the edge of a box are outside; edges count "
             "as inside.",
             (check("polygon", f"contains((0, 0, {side}, {side}), ({side}, 1))", True),
              check("polygon", "contains((1, 1, 5, 5), (1, 1))", True)),
             ("polygon", "contains_edge", "contains", "contains((0, 0, 2, 2), (0, 1))")),
        Site("off_by_one", "polygon", "polygon.perimeter",
             (("    for i in range(len(points)):", "    for i in range(1, len(points)):"),),
             "perimeter() comes out short: it leaves out the edge from the last point back to "
             "the first.",
             (check("polygon", f"perimeter({sq})", 4.0 * side),
              check("polygon", "perimeter([(0, 0), (6, 0), (6, 8)])", 24.0)),
             ("polygon", "perimeter_square", "perimeter", "perimeter([(0, 0), (1, 0), (1, 1), (0, 1)]) == 4.0")),
        Site("missing_case", "units", "units.to_mm",
             (('"in": 25.4, "ft": 304.8}', '"in": 25.4}'),),
             "Lengths in feet ('ft') raise KeyError in to_mm and from_mm, although feet are a "
             "supported unit (1 ft = 304.8 mm).",
             (check("units", "to_mm(10, 'ft')", 3048.0), check("units", "from_mm(609.6, 'ft')", 2.0)),
             ("units", "feet", "to_mm", "to_mm(1, 'ft') == 304.8")),
        Site("wrong_import", "shapes", "shapes.rect_area",
             (("from .units import to_mm\n", "from .units import from_mm\n"),
              ("    return to_mm(w, unit) * to_mm(h, unit)", "    return from_mm(w, unit) * from_mm(h, unit)"),
              ("math.pi * to_mm(r, unit)", "math.pi * from_mm(r, unit)")),
             "rect_area and circle_area give wildly wrong areas for sizes in cm or m; areas "
             "should be in square millimetres.",
             (check("shapes", "rect_area(2, 3, 'cm')", 600), check("shapes", "round(circle_area(1, 'm'), 3)",
                                                                   round(math.pi * 1000 ** 2, 3))),
             ("shapes", "rect_cm", "rect_area", "rect_area(1, 1, 'cm') == 100"), ("units",)),
        Site("renamed_api", "polygon", "polygon.diagonal",
             (("    return vectors.distance((box[0]", "    return vectors.dist((box[0]"),),
             "diagonal() raises AttributeError instead of returning the length of the "
             "bounding box's diagonal.",
             (check("polygon", "diagonal([(0, 0), (6, 8)])", 10.0),
              check("polygon", "diagonal([(1, 1), (4, 2), (2, 5)])", 5.0)),
             ("polygon", "diagonal", "diagonal", "diagonal([(0, 0), (3, 4)]) == 5.0"), ("vectors",)),
        Site("wrong_default", "shapes", "shapes.rect_area",
             ((f'def rect_area(w, h, unit="{unit}"):', f'def rect_area(w, h, unit="{bad_unit}"):'),),
             f"rect_area(w, h) without a unit should treat sizes as {unit}, as the README says, "
             f"but the area comes out wrong.",
             (check("shapes", "rect_area(2, 5)", 2 * mm[unit] * 5 * mm[unit]),
              check("shapes", "rect_area(7, 1)", 7 * mm[unit] * 1 * mm[unit])),
             ("shapes", "rect_default_unit", "rect_area", f"rect_area(1, 1) == {mm[unit] ** 2}")),
        Site("broken_edge_case", "polygon", "polygon.bounding_box",
             (("    if not points:\n        return None\n    xs", "    xs"),),
             "bounding_box([]) raises ValueError; a polygon with no points has no box and "
             "should give None.",
             (check("polygon", "bounding_box([])", None), check("polygon", "bounding_box(())", None)),
             ("polygon", "box_empty", "bounding_box", "bounding_box([]) is None")),
    ]
    return Package(name, mods, readme, tests, regression, sites)
