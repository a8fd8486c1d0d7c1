"""What every picture of the HTML report shares: a titled PNG (Plot), the line-drawing style
of per-domain curves (the all-domains line in black), PNG encoding and element-text escaping."""

from __future__ import annotations

import html
import io
from dataclasses import dataclass

from matplotlib.figure import Figure

ALL = "*"


@dataclass(frozen=True)
class Plot:
    title: str
    caption: str
    png: bytes


def draw_lines(ax, series: dict[str, list[tuple[int, float]]], ylabel: str, unit_range=True):
    for label in sorted(series, key=lambda s: (s == ALL, s)):
        points = series[label]
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        style = {"color": "black", "linewidth": 2.5} if label == ALL else {"linewidth": 1.5}
        ax.plot(xs, ys, marker="o", markersize=4, label="all" if label == ALL else label, **style)
    ax.set_xlabel("iteration")
    ax.set_ylabel(ylabel)
    if unit_range:
        ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    if series:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
        ax.xaxis.get_major_locator().set_params(integer=True)
    else:
        ax.text(0.5, 0.5, "not recorded", ha="center", va="center", transform=ax.transAxes)


def png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()


def text(t: str) -> str:
    return html.escape(t, quote=False)  # element text: quotes need no escaping
