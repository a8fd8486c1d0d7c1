"""The scene API of the render domains' 3D route: `import scene3d`, then place primitives.

    scene3d.box(center=(0, 0, 0.5), size=(1, 1, 1), color="red")
    scene3d.sphere(center=(2, 0, 1), radius=1, color="#1f77b4")
    scene3d.cylinder(center=(-2, 0, 1), radius=0.5, height=2, color="green")   # axis along z

Coordinates are scene units (the view spans -4..4 on every axis unless the task says otherwise, camera fixed); colors are any
matplotlib color. Nothing is drawn here: the harness reads PRIMITIVES after the code has run.
"""

PRIMITIVES = []


def _triple(value, name):
    values = [float(v) for v in value]
    if len(values) != 3:
        raise ValueError(f"{name} must have 3 coordinates")
    return values


def box(center, size=(1, 1, 1), color="gray"):
    size = [float(size)] * 3 if isinstance(size, (int, float)) else _triple(size, "size")
    PRIMITIVES.append({"kind": "box", "center": _triple(center, "center"), "size": size, "color": str(color)})


def sphere(center, radius=1.0, color="gray"):
    d = 2 * float(radius)
    PRIMITIVES.append({"kind": "sphere", "center": _triple(center, "center"), "size": [d, d, d], "color": str(color)})


def cylinder(center, radius=0.5, height=1.0, color="gray"):
    d = 2 * float(radius)
    PRIMITIVES.append({"kind": "cylinder", "center": _triple(center, "center"), "size": [d, d, float(height)],
                       "color": str(color)})
