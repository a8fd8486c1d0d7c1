"""Chart domains: `chart_to_code` (data and a description, or a chart spec -> matplotlib code) and
`chart_edit` (a chart's program and a requested change -> the changed program).

Tasks are drawn from (split, index, seed) by chart_specs.py: six chart kinds, six topics, random
data, colors and titles, so thousands of distinct tasks; the reference program is chart_code of
the target spec. Users' rows (`--tasks FILE`) carry their own prompt and reference_code or
reference_spec (render_base.py). Scored by the `render` verifier.
"""

from __future__ import annotations

import json
import random

from flywheel.families.render.chart_specs import chart_code, describe, random_edit, random_spec
from flywheel.domains.registry import register_domain
from flywheel.families.render.render_base import RenderDomain, fenced

RULES = ("Use matplotlib (the Agg backend is already set); the figure open when your program ends is the "
         "chart. Reply with the whole program in one ```python block.")


@register_domain
class ChartToCode(RenderDomain):
    name = "chart_to_code"
    description = "data and a description (or a chart spec) -> matplotlib code; rendered and compared"

    def sample_task(self, rng: random.Random) -> dict:
        spec = random_spec(rng)
        if rng.random() < 0.5:
            prompt = f"Write a Python program that draws this chart.\n{describe(spec)}\n{RULES}"
        else:
            prompt = (f"Write a Python program that draws the chart this spec describes (kind, x values, "
                      f"series with their values and colors, labels; a 6 x 4 inch figure; line charts "
                      f"use circle markers, pie charts label wedges with x):\n{json.dumps(spec)}\n{RULES}")
        code = chart_code(spec)
        return {"prompt": prompt, "route": "matplotlib", "reference_spec": spec, "reference_code": code,
                "answer": fenced(code)}


@register_domain
class ChartEdit(RenderDomain):
    name = "chart_edit"
    description = "a chart's matplotlib program and a requested change -> the changed program"

    def sample_task(self, rng: random.Random) -> dict:
        spec = random_spec(rng)
        edited, request = random_edit(spec, rng)
        source = chart_code(spec)
        prompt = (f"Here is a matplotlib program:\n{fenced(source)}\n"
                  f"Change it so that {request}. Keep everything else as it is.\n{RULES}")
        code = chart_code(edited)
        return {"prompt": prompt, "route": "matplotlib", "source_code": source,
                "reference_spec": edited, "reference_code": code, "answer": fenced(code)}
