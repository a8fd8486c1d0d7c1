"""Chart specs: drawn from a seed, written as matplotlib programs, described in words, edited.

A spec is plain data, so a task file can carry one (`reference_spec`) instead of code:

    {"kind": "line" | "bar" | "barh" | "stacked" | "scatter" | "pie", "x": [...categories or numbers],
     "series": [{"name": "Sales", "values": [...], "color": "tab:blue"}, ...],
     "title": "...", "xlabel": "...", "ylabel": "...", "legend": true, "yscale": "linear" | "log"}

`chart_code(spec)` is the one writer of reference programs; `describe(spec)` the prose a prompt
gives instead of the spec; `random_spec(rng)` and `random_edit(spec, rng)` draw tasks.
"""

from __future__ import annotations

import copy
import random

KINDS = ("line", "bar", "barh", "stacked", "scatter", "pie")
COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink",
          "tab:gray", "tab:olive", "tab:cyan", "black", "gold", "navy", "teal")
TOPICS = [("Monthly sales", "Month", "Units", ["Jan", "Feb", "Mar", "Apr", "May", "Jun"], ["Sales", "Returns", "Online"]),
          ("Rainfall by city", "City", "mm", ["Oslo", "Lima", "Pune", "Kyiv", "Quito"], ["2023", "2024", "2025"]),
          ("Team scores", "Team", "Points", ["Red", "Blue", "Green", "Gold"], ["Round 1", "Round 2", "Round 3"]),
          ("Server load", "Hour", "Requests", ["00", "04", "08", "12", "16", "20"], ["api", "web", "batch"]),
          ("Fruit harvest", "Fruit", "Tonnes", ["Apples", "Pears", "Plums", "Figs"], ["North", "South", "East"]),
          ("Budget", "Department", "kUSD", ["R&D", "Sales", "Ops", "HR", "IT"], ["Plan", "Actual", "Forecast"])]
SERIES = {"line": (1, 3), "bar": (1, 1), "barh": (1, 1), "stacked": (2, 2), "scatter": (1, 2), "pie": (1, 1)}


def random_spec(rng: random.Random) -> dict:
    kind = rng.choice(KINDS)
    title, xlabel, ylabel, categories, names = rng.choice(TOPICS)
    count = rng.randint(4, len(categories)) if kind != "scatter" else rng.randint(5, 8)
    x = categories[:count] if kind != "scatter" else sorted(rng.sample(range(1, 30), count))
    colors = rng.sample(COLORS, 6)
    series = [{"name": names[i], "values": [rng.randint(1, 40) for _ in range(count)], "color": colors[i]}
              for i in range(rng.randint(*SERIES[kind]))]
    spec = {"kind": kind, "x": x, "series": series, "title": f"{title} {rng.randint(2019, 2026)}",
            "xlabel": xlabel if kind != "pie" else "", "ylabel": ylabel if kind != "pie" else "",
            "legend": len(series) > 1 or rng.random() < 0.3}
    if kind == "pie":
        spec["series"][0]["colors"] = colors[:count] if count <= 6 else None
        spec["legend"] = False
    return spec


def spec_problems(spec) -> list[str]:
    """Why `spec` cannot be drawn, as "field `reference_spec`: ..." strings (none: it can)."""
    where = "field `reference_spec`"
    if not isinstance(spec, dict):
        return [f"{where} must be an object"]
    if spec.get("kind") not in KINDS:
        return [f"{where}: `kind` must be one of {', '.join(KINDS)}, got {spec.get('kind')!r}"]
    x, series = spec.get("x"), spec.get("series")
    if not isinstance(x, list) or not x or len(x) > 500:
        return [f"{where}: `x` must be a list of 1 to 500 values"]
    if not isinstance(series, list) or not series or len(series) > 20 or not all(isinstance(s, dict) for s in series):
        return [f"{where}: `series` must be a list of 1 to 20 objects"]
    problems = []
    for i, s in enumerate(series):
        values = s.get("values")
        if not isinstance(values, list) or len(values) != len(x) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            problems.append(f"{where}: series {i + 1}: `values` must be {len(x)} numbers, one per x value")
    for key in ("title", "xlabel", "ylabel"):
        if not isinstance(spec.get(key, ""), str):
            problems.append(f"{where}: `{key}` must be a string")
    return problems


def chart_code(spec: dict) -> str:
    """The matplotlib program that draws `spec` (values written as literals)."""
    kind, x, series = spec["kind"], spec["x"], spec["series"]
    lines = ["import matplotlib.pyplot as plt", "", f"x = {x!r}", "fig, ax = plt.subplots(figsize=(6, 4))"]
    for i, s in enumerate(series):
        values, color, name = s["values"], s.get("color"), s.get("name", "")
        if kind == "line":
            lines.append(f"ax.plot(x, {values!r}, color={color!r}, marker='o', label={name!r})")
        elif kind in ("bar", "stacked"):
            bottom = f", bottom={series[0]['values']!r}" if kind == "stacked" and i else ""
            lines.append(f"ax.bar(x, {values!r}{bottom}, color={color!r}, label={name!r})")
        elif kind == "barh":
            lines.append(f"ax.barh(x, {values!r}, color={color!r}, label={name!r})")
        elif kind == "scatter":
            lines.append(f"ax.scatter(x, {values!r}, color={color!r}, label={name!r})")
        elif kind == "pie":
            colors = s.get("colors")
            lines.append(f"ax.pie({values!r}, labels=x{f', colors={colors!r}' if colors else ''})")
    for key in ("title", "xlabel", "ylabel"):
        if spec.get(key):
            lines.append(f"ax.set_{key}({spec[key]!r})")
    if spec.get("yscale", "linear") != "linear":
        lines.append(f"ax.set_yscale({spec['yscale']!r})")
    if spec.get("legend"):
        lines.append("ax.legend()")
    return "\n".join(lines) + "\n"


def table(spec: dict) -> str:
    """The data as a markdown table: one row per x value, one column per series."""
    head = [spec.get("xlabel") or "label", *(s.get("name") or f"series {i + 1}" for i, s in enumerate(spec["series"]))]
    rows = ["| " + " | ".join(map(str, head)) + " |", "|" + "---|" * len(head)]
    rows += ["| " + " | ".join(map(str, [x, *(s["values"][i] for s in spec["series"])])) + " |"
             for i, x in enumerate(spec["x"])]
    return "\n".join(rows)


NAMES = {"line": "a line chart with circle markers (one line per data column)", "bar": "a vertical bar chart",
         "barh": "a horizontal bar chart (categories on the y axis)", "scatter": "a scatter plot (one point set per data column)",
         "stacked": "a stacked vertical bar chart (the second column stacked on the first)",
         "pie": "a pie chart with the row labels as wedge labels"}


def describe(spec: dict) -> str:
    """The chart in words, colors and labels exact, data as a table."""
    parts = [f"Draw {NAMES[spec['kind']]} on a 6 x 4 inch figure from this data:", table(spec)]
    colors = [f"{s['name']} in color '{s['color']}'" for s in spec["series"] if spec["kind"] != "pie"]
    if spec["kind"] == "pie" and spec["series"][0].get("colors"):
        colors = [f"wedge colors {spec['series'][0]['colors']!r} in row order"]
    if colors:
        parts.append("Colors: " + "; ".join(colors) + ".")
    for key, words in (("title", "Title"), ("xlabel", "X-axis label"), ("ylabel", "Y-axis label")):
        if spec.get(key):
            parts.append(f"{words}: '{spec[key]}'.")
    if spec.get("yscale", "linear") != "linear":
        parts.append(f"Use a {spec['yscale']} y axis.")
    parts.append("Show a legend with the column names." if spec.get("legend") else "No legend.")
    return "\n".join(parts)


def random_edit(spec: dict, rng: random.Random) -> tuple[dict, str]:
    """(the edited spec, the request in words): one change a user would ask of a chart."""
    new, kind = copy.deepcopy(spec), spec["kind"]
    series = new["series"]
    choices = ["title", "value", "xlabel"]
    choices += ["color"] if kind != "pie" else []
    choices += ["kind"] if kind in ("bar", "barh", "line") and len(series) == 1 else []
    choices += ["legend"] if not spec.get("legend") and kind != "pie" else []
    choices += ["log"] if kind in ("bar", "line", "scatter") and spec.get("yscale", "linear") == "linear" else []
    choice = rng.choice(choices)
    if choice == "title":
        new["title"] = rng.choice(["Overview", "Quarterly view", "Summary", "Final figures"]) + f" ({rng.randint(1, 99)})"
        return new, f"the title reads '{new['title']}'"
    if choice == "xlabel":
        new["xlabel"] = rng.choice(["Category", "Group", "Item", "Label"])
        return new, f"the x-axis label reads '{new['xlabel']}'"
    if choice == "value":
        s = rng.choice(series)
        i = rng.randrange(len(s["values"]))
        old = s["values"][i]
        s["values"][i] = max(1, old + rng.choice([-1, 1]) * rng.randint(3, 9))
        if s["values"][i] == old:  # clipped at 1: go up instead, so the edit changes the chart
            s["values"][i] = old + rng.randint(3, 9)
        where = f"x = {spec['x'][i]!r}" if kind == "scatter" else f"'{spec['x'][i]}'"
        return new, f"the value of {s['name']} at {where} is {s['values'][i]} (everything else unchanged)"
    if choice == "color":
        s = rng.choice(series)
        s["color"] = rng.choice([c for c in COLORS if c not in {t['color'] for t in series}])
        return new, f"{s['name']} is drawn in color '{s['color']}'"
    if choice == "kind":
        new["kind"] = rng.choice([k for k in ("bar", "barh", "line") if k != kind])
        return new, f"it is {NAMES[new['kind']]} instead (same data, colors and labels)"
    if choice == "legend":
        new["legend"] = True
        return new, "it shows a legend with the series names"
    new["yscale"] = "log"
    return new, "the y axis uses a log scale"
