"""The `render` verifier's trusted side on reports built here (no sandbox): SSIM and its blank
calibration, attribute scores, and hostile reports (huge base64, bogus or giant PNGs, deep or
huge JSON) that must come back as a verdict, quickly."""

import base64
import io
import json
import struct
import time
import zlib

import pytest

from flywheel.domains.registry import prepare_task
from flywheel.sandbox import ExecResult
from flywheel.verifiers import get_verifier
from flywheel.families.render.render_compare import decode_png, ssim, visual_scores

verify = get_verifier("render")
MARKER = "FLYWHEEL-RENDER "


def png(draw=None, size=128) -> str:
    from PIL import Image, ImageDraw
    image = Image.new("RGB", (size, size), "white")
    if draw:
        draw(ImageDraw.Draw(image))
    out = io.BytesIO()
    image.save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


def bars(d, heights=(60, 100, 30)):
    for i, h in enumerate(heights):
        d.rectangle([10 + 40 * i, 120 - h, 40 + 40 * i, 120], fill="green")


CHART = {"axes": [{"title": "Sales", "xlabel": "Month", "ylabel": "Units", "xticks": ["Jan", "Feb", "Mar"],
                   "series": [{"type": "bar", "x": [0, 1, 2], "y": [6, 10, 3], "color": "#2ca02c"}]}],
         "images": 0, "png": png(bars)}


def task():
    row = {"domain": "chart_to_code", "task_id": "t", "prompt": "p",
           "reference_code": "import matplotlib.pyplot as plt\nplt.bar(['Jan','Feb','Mar'], [6, 10, 3])\n"}
    return prepare_task(row)[0]


def execution(response, reference=CHART, stdout=None):
    line = MARKER + json.dumps({"reference": reference, "response": response})
    return ExecResult(0, stdout if stdout is not None else "\n" + line + "\n", "", False, False, None, 1.0, 1.0, "test")


def score(response, **kwargs):
    """The verdict on `response`'s report; the trusted comparison must stay bounded: CPU seconds
    of this process, so a loaded machine does not fail it (a hang or a blow-up still would)."""
    ran = execution(response, **kwargs)
    start = time.process_time()
    verdict = verify(task(), "```python\nx = 1\n```", ran)
    assert time.process_time() - start < 5, "the comparison took too long"
    return verdict


def test_the_reference_scores_one_and_a_changed_value_less():
    assert score(CHART).reward == 1.0 and score(CHART).verdict == "pass"
    changed = json.loads(json.dumps(CHART))
    changed["axes"][0]["series"][0]["y"] = [6, 10, 4]
    changed["png"] = png(lambda d: bars(d, (60, 100, 40)))
    verdict = score(changed)
    assert verdict.verdict == "fail" and 0.8 < verdict.reward < 1.0
    assert verdict.components["data"] == pytest.approx(2 / 3, abs=1e-3)


def test_ssim_is_calibrated_against_a_blank_canvas():
    want = decode_png(png(bars))
    blank = decode_png(png())
    assert ssim(want, want) == pytest.approx(1.0)
    assert visual_scores(blank, want)["visual"] == 0.0
    assert visual_scores(want, want) == {"visual": 1.0, "visual_hash": 1.0}
    assert 0.0 < visual_scores(decode_png(png(lambda d: bars(d, (60, 100, 40)))), want)["visual"] < 1.0


def test_blank_and_picture_only_renders_score_zero():
    blank = {**CHART, "axes": [{"series": []}], "png": png()}
    assert score(blank).reward == 0.0 and "blank" in score(blank).components
    picture = {**CHART, "axes": [{"series": []}], "images": 1}  # the target's pixels, drawn as an image
    verdict = score(picture)
    assert verdict.reward == 0.0 and verdict.exploit_suspected and "exploit_embeds_image" in verdict.components
    spelled = {**CHART, "axes": [{"series": [{"type": "line", "x": [0, 1], "y": [0, 1]}],
                                  "texts": ["Sales: Jan 6, Feb 10, Mar 3"]}]}
    assert score(spelled).reward == 0.0 and "exploit_text_spells_data" in score(spelled).components


def giant_png_header(width, height):
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + chunk + zlib.compress(b"\0" * 100_000)).decode()


HOSTILE_PNGS = {
    "huge_base64": "A" * 20_000_000,
    "not_base64": "!!" * 1000,
    "bogus_png": base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 5000).decode(),
    "giant_dimensions": giant_png_header(100_000, 100_000),
    "claims_small_but_truncated": giant_png_header(128, 128),
    "a_jpeg": base64.b64encode(b"\xff\xd8\xff\xe0" + b"\x00" * 100).decode(),
    "not_a_string": {"nested": [1, 2, 3]},
}


@pytest.mark.parametrize("name", sorted(HOSTILE_PNGS))
def test_hostile_pngs_are_refused_quickly(name):
    verdict = score({**CHART, "png": HOSTILE_PNGS[name]})
    assert (verdict.reward, verdict.verdict) == (0.0, "fail"), verdict
    assert decode_png(HOSTILE_PNGS[name]) is None


def nested(depth):
    return "[" * depth + "]" * depth


HOSTILE_REPORTS = {
    "deep_json_line": MARKER + '{"reference": {}, "response": ' + nested(100_000) + "}",
    "deep_series": None,  # built below: a series nested where a list of numbers belongs
    "huge_lists": None,
    "wrong_types": None,
    "worst_case_counts": None,
    "no_report": "nothing here",
    "forged_line": MARKER + "FORGED",
}


def hostile_response(name):
    if name == "deep_series":
        return {**CHART, "axes": [{"series": [{"type": "bar", "y": json.loads(nested(90))}]}]}
    if name == "huge_lists":
        # ~10 MB of report (the sandbox caps stdout at 512 KB; other backends may not)
        series = {"type": "bar", "x": list(range(10 ** 5)), "y": [1.5] * 10 ** 5, "colors": ["#000000"] * 10 ** 4}
        return {**CHART, "axes": [{"series": [series] * 5, "texts": ["9 " * 500] * 1000,
                                   "xticks": ["x" * 10 ** 4] * 100}] * 4}
    if name == "worst_case_counts":  # every cap reached, every value distinct: the slowest scoring
        axes = {"series": [{"type": "scatter", "x": [i + k / 7 for i in range(500)], "y": [i * k + 0.5 for i in range(500)],
                            "colors": [f"#{i:06x}" for i in range(500)]} for k in range(60)],
                "texts": [" ".join(str(i * 3 + k) for i in range(100)) for k in range(600)],
                "legend": [str(k) for k in range(600)], "xticks": [f"t{k}" for k in range(600)]}
        return {**CHART, "axes": [axes] * 25, "figure_texts": ["1 2 3"] * 600}
    if name == "wrong_types":
        return {"axes": {"not": "a list"}, "images": "many", "signals": 7, "png": CHART["png"],
                "size": [float("nan")], "shapes": "x"}
    return None


@pytest.mark.parametrize("name", sorted(HOSTILE_REPORTS))
def test_hostile_reports_get_a_verdict_quickly(name):
    response = hostile_response(name)
    if response is None:
        verdict = score(None, stdout=HOSTILE_REPORTS[name])
    else:
        verdict = score(response)
    assert verdict.reward < 1.0 and verdict.verdict in ("fail", "error"), verdict


def test_hostile_shapes_stay_bounded():
    row = {"domain": "scene", "task_id": "s", "prompt": "p", "route": "svg", "reference_code": "print('<svg/>')"}
    scene = prepare_task(row)[0]
    want = {"shapes": [{"kind": "rect", "fill": "#ff0000", "bbox": [0.1, 0.1, 0.4, 0.4]}] * 30, "png": png(bars)}
    got = {"shapes": [{"kind": "rect", "fill": "#ff0000", "bbox": [0.1, 0.1, 0.4, 0.4]}] * 100_000, "png": png(bars),
           "refused": ["image"] * 10_000}
    start = time.monotonic()
    verdict = verify(scene, "x", execution(got, reference=want))
    assert time.monotonic() - start < 5
    assert verdict.reward == 0.0 and verdict.exploit_suspected
