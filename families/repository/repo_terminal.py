"""Terminal tasks: make a command work in a small repository, scored by running it for real.

    task = build_terminal_task(random.Random(7))   # same format as repo_suite.build_task
    flywheel run --domain repo_terminal ...         # the registered suite (RepoTerminal)

Three kinds, drawn evenly:
- `repair_script`: `tools/<name>.py` (sys.argv or argparse) reads `data/*.csv|json` and crashes or
  prints the wrong thing because of one planted defect (a missing int(), a wrong column or key,
  a format string, an off-by-one slice). The visible test runs it on one data file; hidden
  checks run it on the others.
- `install_wheel`: `tools/<name>.py` imports a package that is vendored as source
  (`vendor/<pkg>/pyproject.toml`, flat or src layout) but not installed; the README says the
  tools find dependencies in `<target>/`. A wheel is a zip and a snapshot holds text only, so the
  package ships as source. Offline installs really work in the sandbox: its /usr/bin/python3 has
  pip 23, setuptools 66 and wheel, so `python3 -m pip install --no-index --no-build-isolation
  --target <target> vendor/<pkg>` builds and installs it (about 2 s). The golden trajectory copies
  the package's modules into `<target>/<pkg>/` with write_file instead, because pip's metadata
  (RECORD hashes, the build/ and egg-info leftovers) cannot be predicted here for
  `fixed_files`; tests/families/repository/test_repo_terminal.py plays the pip route too.
- `transform_files`: input files and a spec; the model writes `tools/transform.py IN OUT`.
  Hidden checks run that script on the shipped input and on fresh inputs the check itself
  writes, so writing the expected output by hand earns nothing.

Every check is {"module": "subprocess", "call": "run([sys.executable, ...]) ..."}: the repository
cannot shadow `subprocess`, and `sys.executable` is the sandbox's own Python. Expected values come
from Python mirrors of the generated scripts, written beside them here.
"""

from __future__ import annotations

import json
import random
from typing import Any, Callable

from flywheel.domains.registry import register_domain
from flywheel.families.repository.repo import RepoBugs
from flywheel.families.repository.repo_terminal_install import build_install
from flywheel.families.repository.repo_terminal_kit import (KINDS, PEOPLE, SCRIPTS, SHAPES, WORDS, call,
                                                csv_text, plant, run_check, run_test, table, task)
from flywheel.families.repository.unified_diff import make_diff

def build_terminal_task(rng: random.Random) -> dict[str, Any]:
    """One task in repo_suite's native format: prompt, repo, fixed_files, tests, golden, kind."""
    return BUILDERS[rng.choice(KINDS)](rng)


# ------------------------------------------------------------------ repair_script
COLUMN_TOTAL = '''"""Print the total of column {col} of a CSV file: python3 tools/{name}.py FILE"""
import csv
import sys


def main(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    total = 0
    for row in rows[1:]:
        total += int(row[{idx}])
    print(f"{col} total: {{total}}")


if __name__ == "__main__":
    main(sys.argv[1])
'''

JSON_MEAN = '''"""List each record's {val} by {key}, then their mean: python3 tools/{name}.py FILE.json"""
import json
import sys


def main(path):
    with open(path) as f:
        records = json.load(f)
    values = []
    for rec in sorted(records, key=lambda r: r["{key}"]):
        value = int(rec["{val}"])
        values.append(value)
        print(f"{{rec['{key}']}}: {{value}}")
    print(f"mean: {{sum(values) / len(values):.2f}}")


if __name__ == "__main__":
    main(sys.argv[1])
'''

TOP_N = '''"""The N records with the largest {val}: python3 tools/{name}.py FILE -n N"""
import argparse
import csv


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path")
    parser.add_argument("-n", "--count", type=int, default=3)
    args = parser.parse_args(argv)
    with open(args.path, newline="") as f:
        rows = list(csv.reader(f))[1:]
    ranked = sorted(rows, key=lambda r: int(r[{vi}]), reverse=True)
    for row in ranked[:args.count]:
        print(row[{ki}], row[{vi}])


if __name__ == "__main__":
    main()
'''


def repair_column_total(rng: random.Random, name: str) -> dict[str, Any]:
    key, *nums = rng.choice(SHAPES)
    header = [key, *nums]
    rng.shuffle(header)
    col, other = rng.sample(nums, 2)
    files = {}
    while len(files) < 3:  # a wrong column must give a wrong total on every file
        records = table(rng, key, tuple(nums), rng.randint(4, 7))
        if sum(r[col] for r in records) != sum(r[other] for r in records):
            files[f"data/{rng.choice(WORDS)}_{len(files)}.csv"] = records
    bug = rng.choice(["int", "column", "slice"])
    idx = header.index(col)
    good, bad, symptom = {
        "int": (f"int(row[{idx}])", f"row[{idx}]", "crashes with a TypeError"),
        "column": (f"int(row[{idx}])", f"int(row[{header.index(other)}])", "prints the wrong total"),
        "slice": ("rows[1:]", "rows[2:]", "prints a total that is too small")}[bug]
    return {"script": COLUMN_TOTAL.format(col=col, name=name, idx=idx), "good": good, "bad": bad,
            "data": {p: csv_text(header, [[r[c] for c in header] for r in recs]) for p, recs in files.items()},
            "runs": [([p], f"{col} total: {sum(r[col] for r in recs)}") for p, recs in files.items()],
            "spec": f"`{col} total: N`, the sum of column `{col}` over the file's rows",
            "symptom": symptom}


def repair_json_mean(rng: random.Random, name: str) -> dict[str, Any]:
    key, val, extra = rng.choice(SHAPES)
    files = {}
    for n in range(3):
        records = [{**r, val: str(r[val])} for r in table(rng, key, (val, extra), rng.randint(3, 6))]
        files[f"data/{rng.choice(WORDS)}_{n}.json"] = records
    bug = rng.choice(["int", "key", "format"])
    good, bad, symptom = {
        "int": (f'int(rec["{val}"])', f'rec["{val}"]', "crashes with a TypeError"),
        "key": (f'int(rec["{val}"])', f'int(rec["{val}_value"])', "crashes with a KeyError"),
        "format": (":.2f}", ":.1f}", "prints the mean with the wrong precision")}[bug]

    def expect(records: list[dict]) -> str:
        ordered = sorted(records, key=lambda r: r[key])
        values = [int(r[val]) for r in ordered]
        return "\n".join([*(f"{r[key]}: {v}" for r, v in zip(ordered, values)),
                          f"mean: {sum(values) / len(values):.2f}"])
    return {"script": JSON_MEAN.format(key=key, val=val, name=name), "good": good, "bad": bad,
            "data": {p: json.dumps(recs, indent=1) + "\n" for p, recs in files.items()},
            "runs": [([p], expect(recs)) for p, recs in files.items()],
            "spec": (f"`<{key}>: <{val}>` for each record, sorted by {key}, then "
                     f"`mean: X.XX`, the mean of {val} with two decimals"), "symptom": symptom}


def repair_top_n(rng: random.Random, name: str) -> dict[str, Any]:
    key, val, extra = rng.choice(SHAPES)
    header = [key, val, extra]
    rng.shuffle(header)
    files = {}
    for n in range(3):  # one value in 100..199, the rest distinct 2-digit: a text sort differs
        count = rng.randint(5, 7)
        values = [rng.randint(100, 199), *rng.sample(range(20, 99), count - 1)]
        rng.shuffle(values)
        files[f"data/{rng.choice(WORDS)}_{n}.csv"] = [
            {key: k, val: v, extra: rng.randint(1, 99)} for k, v in zip(rng.sample(WORDS, count), values)]
    bug = rng.choice(["slice", "int", "type"])
    vi = header.index(val)
    good, bad, symptom = {
        "slice": ("ranked[:args.count]", "ranked[:args.count - 1]", "prints one record too few"),
        "int": (f"key=lambda r: int(r[{vi}])", f"key=lambda r: r[{vi}]", "ranks the records wrongly"),
        "type": ("type=int, default=3", "default=3", "crashes when given -n")}[bug]
    runs = []
    for p, recs in files.items():
        n = rng.randint(2, 4)
        ranked = sorted(recs, key=lambda r: r[val], reverse=True)[:n]
        runs.append(([p, "-n", str(n)], "\n".join(f"{r[key]} {r[val]}" for r in ranked)))
    return {"script": TOP_N.format(val=val, name=name, vi=vi, ki=header.index(key)), "good": good,
            "bad": bad, "runs": runs,
            "data": {p: csv_text(header, [[r[c] for c in header] for r in recs]) for p, recs in files.items()},
            "spec": f"the N records with the largest {val}, one `<{key}> <{val}>` line each, largest first",
            "symptom": symptom}


def build_repair(rng: random.Random) -> dict[str, Any]:
    name = rng.choice(SCRIPTS)
    site = rng.choice([repair_column_total, repair_json_mean, repair_top_n])(rng, name)
    path = f"tools/{name}.py"
    buggy = plant(site["script"], site["good"], site["bad"])
    (argv0, out0), *others = [([path, *args], out) for args, out in site["runs"]]
    files = {path: buggy, **site["data"], f"tests/test_{name}.py": run_test(name, argv0, out0),
             "README.md": f"# {name}\n\nCommand-line tools for the files in data/.\n"}
    shown = " ".join(argv0)
    prompt = (f"`python3 {shown}` {site['symptom']}. The script should print {site['spec']}. "
              f"Fix tools/{name}.py so that it works on every file in data/.")
    golden = [call("read_file", path=path), call("list_files", pattern="data/*"),
              call("run_shell", command=f"python3 {shown}"),
              call("edit_file", path=path, old=site["bad"], new=site["good"]),
              call("run_shell", command=f"python3 {shown}")]
    hidden = [run_check(" ".join(argv), argv, out) for argv, out in others]
    return task("repair_script", name, prompt, files, {path: site["script"]}, hidden, golden)


# ------------------------------------------------------------------ transform_files
GROUP_SCRIPT = '''"""Per-{g} {agg} of {v} over IN_DIR/*.csv: python3 tools/transform.py IN_DIR OUT_DIR"""
import csv
import os
import sys
from pathlib import Path


def main(src, dst):
    groups = {{}}
    for path in sorted(Path(src).glob("*.csv")):
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                groups.setdefault(row["{g}"], []).append(int(row["{v}"]))
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(dst, "summary.csv"), "w") as f:
        f.write("{g},{agg}\\n")
        for key in sorted(groups):
            f.write(f"{{key}},{{{fn}(groups[key])}}\\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
'''

TSV_SCRIPT = '''"""IN_DIR/*.json records as OUT_DIR/people.tsv: python3 tools/transform.py IN_DIR OUT_DIR"""
import json
import os
import sys
from pathlib import Path

COLUMNS = {cols!r}


def main(src, dst):
    rows = []
    for path in sorted(Path(src).glob("*.json")):
        rows += json.loads(path.read_text())
    rows.sort(key=lambda r: (r["{s}"], r["id"]))
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(dst, "people.tsv"), "w") as f:
        f.write("\\t".join(COLUMNS) + "\\n")
        for r in rows:
            f.write("\\t".join(str(r[c]) for c in COLUMNS) + "\\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
'''
AGGS = {"total": (sum, "sum"), "count": (len, "len"), "max": (max, "max")}


def transform_group(rng: random.Random) -> dict[str, Any]:
    g, *nums = rng.choice(SHAPES)
    v, agg = rng.choice(nums), rng.choice(sorted(AGGS))
    header = ["id", g, *nums]
    rng.shuffle(header)
    keys = rng.sample(WORDS, 4)

    def draw() -> dict[str, str]:
        out, ident = {}, 1
        for month in rng.sample(["jan", "feb", "mar", "apr", "may", "jun"], rng.randint(2, 3)):
            recs = []
            for _ in range(rng.randint(3, 5)):
                recs.append({"id": ident, g: rng.choice(keys), **{c: rng.randint(1, 99) for c in nums}})
                ident += 1
            out[f"{month}.csv"] = csv_text(header, [[r[c] for c in header] for r in recs])
        return out

    def expect(inputs: dict[str, str]) -> str:
        groups: dict[str, list[int]] = {}
        for name in sorted(inputs):
            head, *lines = inputs[name].splitlines()
            for line in lines:
                row = dict(zip(head.split(","), line.split(",")))
                groups.setdefault(row[g], []).append(int(row[v]))
        return f"{g},{agg}\n" + "".join(f"{k},{AGGS[agg][0](groups[k])}\n" for k in sorted(groups))
    what = {"total": f"the total of `{v}`", "count": "the number of rows", "max": f"the largest `{v}`"}[agg]
    return {"draw": draw, "expect": expect, "out": "summary.csv",
            "script": GROUP_SCRIPT.format(g=g, v=v, agg=agg, fn=AGGS[agg][1]),
            "spec": (f"reads every IN_DIR/*.csv (a header line, then rows) and writes OUT_DIR/summary.csv: "
                     f"the header `{g},{agg}`, then one line `<{g}>,<n>` per distinct {g} with {what} "
                     f"over all the files' rows, sorted by {g}")}


def transform_tsv(rng: random.Random) -> dict[str, Any]:
    fields = ["id", "first", "city", "age", "team"]
    cols = rng.sample(fields, rng.randint(2, 4))
    s = rng.choice(["age", "first", "city", "team"])

    def draw() -> dict[str, str]:
        out, ident = {}, rng.randint(1, 50)
        for part in rng.sample(["north", "south", "east", "west", "hq"], rng.randint(2, 3)):
            recs = []
            for _ in range(rng.randint(2, 4)):
                recs.append({"id": ident, "first": rng.choice(PEOPLE), "city": rng.choice(WORDS),
                             "age": rng.randint(18, 70), "team": rng.choice(["red", "blue", "green"])})
                ident += rng.randint(1, 5)
            out[f"{part}.json"] = json.dumps(recs, indent=1) + "\n"
        return out

    def expect(inputs: dict[str, str]) -> str:
        rows = [r for name in sorted(inputs) for r in json.loads(inputs[name])]
        rows.sort(key=lambda r: (r[s], r["id"]))
        return "".join("\t".join(map(str, r)) + "\n" for r in [cols, *[[r[c] for c in cols] for r in rows]])
    return {"draw": draw, "expect": expect, "out": "people.tsv",
            "script": TSV_SCRIPT.format(cols=cols, s=s),
            "spec": (f"reads every IN_DIR/*.json (each a list of records) and writes OUT_DIR/people.tsv: "
                     f"a tab-separated header line `{chr(9).join(cols)!s}` (the columns "
                     f"{', '.join(cols)}), then one line per record of all the files, sorted by "
                     f"`{s}`, ties by `id`")}


def fresh_check(cid: str, folder: str, inputs: dict[str, str], out: str, expect: str) -> dict[str, Any]:
    """A check that writes `inputs` to FOLDER/in, runs the model's script into FOLDER/out and
    reads OUT: a hand-written output file cannot pass it."""
    return {"id": cid, "module": "subprocess", "expect": [0, expect],
            "call": (f"[os.makedirs({folder!r} + '/in', exist_ok=True), "
                     f"*[open({folder!r} + '/in/' + n, 'w').write(t) for n, t in {inputs!r}.items()], "
                     f"run([sys.executable, 'tools/transform.py', {folder!r} + '/in', {folder!r} + '/out'], "
                     f"capture_output=True, timeout=5).returncode, "
                     f"open({folder!r} + '/out/{out}').read()][-2:]")}


def build_transform(rng: random.Random) -> dict[str, Any]:
    spec = rng.choice([transform_group, transform_tsv])(rng)
    inputs = spec["draw"]()
    out, expect = spec["out"], spec["expect"](inputs)
    files = {f"input/{n}": t for n, t in inputs.items()}
    files["README.md"] = "# exports\n\nData exports in input/; derived files go to output/.\n"
    files["tests/test_transform.py"] = (
        "import subprocess\nimport sys\nfrom pathlib import Path\n\n"
        f"EXPECTED = {expect!r}\n\n\n"
        "def test_transform_writes_the_output():\n"
        "    done = subprocess.run([sys.executable, 'tools/transform.py', 'input', 'output'], "
        "capture_output=True, text=True, timeout=5)\n"
        "    assert done.returncode == 0, done.stderr[-800:]\n"
        f"    assert Path('output/{out}').read_text() == EXPECTED\n")
    prompt = (f"Write `tools/transform.py IN_DIR OUT_DIR` (run as `python3 tools/transform.py input "
              f"output`, standard library only) that {spec['spec']}. It must create OUT_DIR when "
              "missing and work on any such input folder, not only input/. Run it once on input/ so "
              f"output/{out} is in the repository.")
    fixed = {"tools/transform.py": spec["script"], f"output/{out}": expect}
    first = sorted(inputs)[0]
    golden = [call("list_files", pattern="input/*"), call("read_file", path=f"input/{first}"),
              call("read_file", path="tests/test_transform.py"),
              call("write_file", path="tools/transform.py", content=spec["script"]),
              call("run_shell", command=f"python3 tools/transform.py input output && cat output/{out}")]
    hidden = [{"id": "transform input", "module": "subprocess", "expect": [0, expect],
               "call": ("[run([sys.executable, 'tools/transform.py', 'input', '.check/out0'], "
                        f"capture_output=True, timeout=5).returncode, open('.check/out0/{out}').read()]")}]
    for n in (1, 2):
        fresh = spec["draw"]()
        hidden.append(fresh_check(f"transform fresh[{n}]", f".check/fresh{n}", fresh, out, spec["expect"](fresh)))
    return task("transform_files", "transform", prompt, files, fixed, hidden, golden)


BUILDERS: dict[str, Callable[[random.Random], dict[str, Any]]] = {
    "repair_script": build_repair, "install_wheel": build_install, "transform_files": build_transform}


@register_domain
class RepoTerminal(RepoBugs):
    name = "repo_terminal"
    description = ("make a command work in a small repository: repair a CLI script, install a "
                   "vendored package offline, or write a file transform; scored by running it")
    tier = 2

    def sample_task(self, rng: random.Random) -> dict:
        task = build_terminal_task(rng)  # then RepoBugs.sample_task's post-processing
        files = task["repo"]["files"]
        listing = "\n".join(sorted(files))
        task["prompt"] = (f"{task['prompt']}\n\nThe repository's files:\n{listing}\n"
                          f"Visible tests: {', '.join(task['visible_tests'])}")
        task["reference_patch"] = make_diff(files, task.pop("fixed_files"))
        return self.normalize_task(task)
