"""Reading a matplotlib figure inside the sandbox: its attributes from its own artists, and a
normalized raster. Part of the render harness (render.py), shipped beside it.

Attributes: per axes, the series (line: Line2D data; bar/barh: BarContainer patches; scatter:
PathCollection offsets; pie: Wedge angles as fractions; area: PolyCollection; segments:
LineCollection), titles, axis labels, scales, tick labels, legend entries and texts; per figure,
the count of image artists (imshow, figimage, AnnotationBbox pictures), pixel-like meshes, loose
rectangles, and signals of tampering (matplotlib's drawing classes patched, artists of foreign
classes, agg filters). Every list is cut to MAX_ITEMS or MAX_POINTS, every text to MAX_TEXT.
The raster: the figure redrawn on a fresh Agg canvas with its longest side SIDE pixels,
composited on white and shrunk to PREVIEW x PREVIEW.
"""

import base64
import io

MAX_POINTS = 500         # values kept per series
MAX_ITEMS = 60           # series, texts, axes kept
MAX_TEXT = 200           # characters kept per text
SIDE, PREVIEW = 256, 128  # the canvas's longest side before, and the PNG's side after, normalizing


def clip_text(value):
    return str(value)[:MAX_TEXT]


def _artist_classes():
    import matplotlib.artist, matplotlib.axes, matplotlib.collections, matplotlib.figure  # noqa: E401
    import matplotlib.image, matplotlib.legend, matplotlib.lines, matplotlib.patches, matplotlib.text  # noqa: E401
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    return [matplotlib.artist.Artist, matplotlib.figure.Figure, matplotlib.figure.FigureBase,
            matplotlib.axes.Axes, matplotlib.lines.Line2D, matplotlib.patches.Patch,
            matplotlib.patches.Rectangle, matplotlib.patches.Wedge, matplotlib.text.Text,
            matplotlib.collections.Collection, matplotlib.collections.PathCollection,
            matplotlib.image.AxesImage, matplotlib.legend.Legend, FigureCanvasAgg]


def class_snapshot():
    return {(cls.__name__, name): id(value) for cls in _artist_classes() for name, value in vars(cls).items()}


def patched_classes(before):
    """"patched_matplotlib" when the code replaced a method of matplotlib's drawing classes."""
    return {"patched_matplotlib"} if class_snapshot() != before else set()


def remember_figures():
    """The figures the code saved or showed, last one last (the chart it meant)."""
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure
    figures, savefig = [], Figure.savefig

    def saving(self, *args, **kwargs):
        figures.append(self)
        return savefig(self, *args, **kwargs)

    def showing(*args, **kwargs):
        if plt.get_fignums():
            figures.append(plt.gcf())
    Figure.savefig, plt.show = saving, showing
    return figures


def numbers(values):
    import numpy as np
    try:
        array = np.asarray(values, dtype=float).ravel()[:MAX_POINTS]
    except (TypeError, ValueError):
        return []
    return [round(float(v), 6) if np.isfinite(v) else None for v in array]


def hex_color(value):
    from matplotlib.colors import to_hex
    try:
        return to_hex(value, keep_alpha=False)
    except (TypeError, ValueError):
        return None


def first_color(colors):
    import numpy as np
    colors = np.asarray(colors)
    return hex_color(colors[0]) if colors.ndim == 2 and len(colors) else hex_color(colors) if colors.ndim == 1 and colors.size in (3, 4) else None


def describe_axes(ax):
    from matplotlib.collections import LineCollection, PathCollection, PolyCollection, QuadMesh
    from matplotlib.container import BarContainer
    from matplotlib.patches import Rectangle, Wedge
    series, in_bars = [], set()
    for container in ax.containers:
        if isinstance(container, BarContainer):
            patches = list(container.patches)
            in_bars |= {id(p) for p in patches}
            horizontal = getattr(container, "orientation", "vertical") == "horizontal"
            where = [p.get_y() + p.get_height() / 2 if horizontal else p.get_x() + p.get_width() / 2 for p in patches]
            sizes = [p.get_width() if horizontal else p.get_height() for p in patches]
            series.append({"type": "barh" if horizontal else "bar", "x": numbers(where), "y": numbers(sizes),
                           "color": hex_color(patches[0].get_facecolor()) if patches else None,
                           "colors": [hex_color(p.get_facecolor()) for p in patches[:MAX_POINTS]],
                           "label": clip_text(container.get_label() or "")})
    for line in ax.get_lines():
        xy = line.get_xydata()
        series.append({"type": "line", "x": numbers(xy[:, 0]), "y": numbers(xy[:, 1]),
                       "color": hex_color(line.get_color()), "label": clip_text(line.get_label()),
                       "marker": clip_text(line.get_marker()), "linestyle": clip_text(line.get_linestyle())})
    wedges = [p for p in ax.patches if isinstance(p, Wedge)]
    if wedges:
        spans = [(w.theta2 - w.theta1) % 360 or 360 for w in wedges]
        total = sum(spans) or 1.0
        series.append({"type": "pie", "x": [], "y": numbers([s / total for s in spans]),
                       "color": hex_color(wedges[0].get_facecolor()),
                       "colors": [hex_color(w.get_facecolor()) for w in wedges[:MAX_POINTS]],
                       "labels": [clip_text(w.get_label()) for w in wedges[:MAX_POINTS]], "label": ""})
    cells = 0
    for coll in ax.collections:
        if isinstance(coll, PathCollection):
            offsets = coll.get_offsets()
            series.append({"type": "scatter", "x": numbers(offsets[:, 0]) if len(offsets) else [],
                           "y": numbers(offsets[:, 1]) if len(offsets) else [],
                           "color": first_color(coll.get_facecolor()), "label": clip_text(coll.get_label())})
        elif isinstance(coll, QuadMesh) or (isinstance(coll, PolyCollection) and len(coll.get_paths()) > 50):
            cells += len(coll.get_paths())
        elif isinstance(coll, PolyCollection):
            series.append({"type": "area", "x": [], "y": [], "color": first_color(coll.get_facecolor()),
                           "label": clip_text(coll.get_label())})
        elif isinstance(coll, LineCollection):
            series.append({"type": "segments", "x": [], "y": [], "color": first_color(coll.get_color()),
                           "label": clip_text(coll.get_label())})
    loose = [p for p in ax.patches if isinstance(p, Rectangle) and id(p) not in in_bars]
    legend = ax.get_legend()
    return {
        "projection": getattr(ax, "name", "rectilinear"),
        "title": clip_text(" ".join(t for t in (ax.get_title("left"), ax.get_title(), ax.get_title("right")) if t)),
        "xlabel": clip_text(ax.get_xlabel()), "ylabel": clip_text(ax.get_ylabel()),
        "xscale": ax.get_xscale(), "yscale": ax.get_yscale(),
        "xticks": [clip_text(t.get_text()) for t in ax.get_xticklabels() if t.get_text()][:MAX_ITEMS],
        "yticks": [clip_text(t.get_text()) for t in ax.get_yticklabels() if t.get_text()][:MAX_ITEMS],
        "legend": [clip_text(t.get_text()) for t in legend.get_texts()][:MAX_ITEMS] if legend else [],
        "texts": [clip_text(t.get_text()) for t in ax.texts if t.get_text()][:MAX_ITEMS],
        "series": series[:MAX_ITEMS], "loose_patches": len(loose), "mesh_cells": cells,
    }


def describe_figure(figure):
    """The figure's attributes, read from its artists, and its normalized raster."""
    import matplotlib.image
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    signals = set()
    width, height = (float(v) for v in figure.get_size_inches())
    if not (0 < width < 1e4 and 0 < height < 1e4):
        return {"error": f"the figure's size ({width} x {height} inches) cannot be drawn"}
    figure.set_dpi(min(SIDE / max(width, height), 2000.0))
    canvas = FigureCanvasAgg(figure)  # a fresh canvas: no callbacks of the code's run at draw
    canvas.draw()
    for artist in figure.findobj():
        if not type(artist).__module__.startswith(("matplotlib.", "mpl_toolkits.")):
            signals.add("custom_artist")
        if artist.get_agg_filter() is not None:
            signals.add("agg_filter")
    images = sum(isinstance(a, matplotlib.image._ImageBase) for a in figure.findobj())
    suptitle = figure._suptitle.get_text() if getattr(figure, "_suptitle", None) else ""
    texts = [clip_text(t.get_text()) for t in figure.texts if t.get_text()]
    legends = [clip_text(t.get_text()) for leg in figure.legends for t in leg.get_texts()]
    rgba = np.asarray(canvas.buffer_rgba())
    return {"axes": [describe_axes(ax) for ax in figure.axes[:MAX_ITEMS]], "images": images,
            "suptitle": clip_text(suptitle), "figure_texts": texts[:MAX_ITEMS], "figure_legend": legends[:MAX_ITEMS],
            "size": [round(width, 3), round(height, 3)], "png": preview(rgba), "signals": sorted(signals)}


def preview(rgba):
    """The RGBA canvas composited on white and shrunk to PREVIEW x PREVIEW, as base64 PNG."""
    from PIL import Image
    image = Image.fromarray(rgba, "RGBA")
    white = Image.new("RGBA", image.size, (255, 255, 255, 255))
    small = Image.alpha_composite(white, image).convert("RGB").resize((PREVIEW, PREVIEW), Image.BOX)
    out = io.BytesIO()
    small.save(out, "PNG", optimize=True)
    return base64.b64encode(out.getvalue()).decode("ascii")
