"""Installed repositories: a package with pyproject.toml (src and flat layouts) or setup.py only is
importable in its sandbox, as after `pip install -e .` (importlib.metadata knows its version),
with nothing installed and no network; the gold patch scores 1 and validates clean; a package
that does not import at the snapshot is an environment error with its message, never the
model's failure."""

import pytest

from flywheel.domains.registry import get_domain
from flywheel.families.repository.repo_install import install_plan
from flywheel.families.repository.task_checks import repo_problems
from flywheel.families.repository.unified_diff import make_diff
from flywheel.verifiers import get_verifier

OPS = "def total(xs):\n    s = 0\n    for x in xs:\n        s -= x\n    return s\n"
TESTS = ("import importlib.metadata\n\nfrom {pkg}.ops import total\n\n\n"
         "def test_total():\n    assert total([4, 5]) == 9\n\n\n"
         "def test_installed():\n    assert importlib.metadata.version({dist!r}) == {version!r}\n")
LAYOUTS = {  # name -> (files, package, distribution, version)
    "src": ({"pyproject.toml": '[project]\nname = "acme-calc"\nversion = "1.2.3"\n\n'
                               '[tool.setuptools.packages.find]\nwhere = ["src"]\n',
             "src/acme_calc/__init__.py": "", "src/acme_calc/ops.py": OPS, "README.md": "calc\n"},
            "acme_calc", "acme-calc", "1.2.3"),
    "flat": ({"pyproject.toml": '[project]\nname = "flatcalc"\ndynamic = ["version"]\n',
              "flatcalc/__init__.py": "__version__ = '0.4'\n", "flatcalc/ops.py": OPS},
             "flatcalc", "flatcalc", "0.4"),
    "setup.py": ({"setup.py": "from setuptools import setup, find_packages\n"
                              "setup(name='shopcalc', version='2.0', package_dir={'': 'lib'},\n"
                              "      packages=find_packages(where='lib'))\n",
                  "lib/shopcalc/__init__.py": "", "lib/shopcalc/ops.py": OPS},
                 "shopcalc", "shopcalc", "2.0"),
}


def layout_task(name, **extra):
    files, pkg, dist, version = LAYOUTS[name]
    ops = next(p for p in files if p.endswith("/ops.py"))
    row = {"task_id": f"install-{name}", "domain": "repo", "prompt": "total() subtracts.",
           "repo": {"files": files}, "environment": "pytest-env",
           "test_patch": make_diff({}, {"tests/test_x.py": TESTS.format(pkg=pkg, dist=dist, version=version)}),
           "reference_patch": make_diff(files, {ops: OPS.replace("-=", "+=")}),
           "hidden_tests": [{"id": "tests/test_x.py::test_total", "pytest": "tests/test_x.py::test_total"}],
           "regression_tests": [{"id": "tests/test_x.py::test_installed",
                                 "pytest": "tests/test_x.py::test_installed"}], **extra}
    return get_domain("repo").normalize_task(row)


def test_the_plan_follows_what_each_project_declares():
    got = {name: install_plan(files) for name, (files, *_) in LAYOUTS.items()}
    assert got == {
        "src": {"name": "acme-calc", "version": "1.2.3", "roots": ["src"], "top_level": ["acme_calc"]},
        "flat": {"name": "flatcalc", "version": "0.4", "roots": [], "top_level": ["flatcalc"]},
        "setup.py": {"name": "shopcalc", "version": "2.0", "roots": ["lib"], "top_level": ["shopcalc"]}}
    others = {  # hatch, poetry, pdm, flit, setup.cfg; and a project naming paths out of its tree
        "hatch": {"pyproject.toml": '[project]\nname="h"\nversion="1"\n[tool.hatch.build.targets.wheel]\n'
                                    'packages=["code/hpkg"]\n', "code/hpkg/__init__.py": ""},
        "poetry": {"pyproject.toml": '[tool.poetry]\nname="p"\nversion="1"\n'
                                     'packages=[{include="ppkg", from="source"}]\n', "source/ppkg/__init__.py": ""},
        "pdm": {"pyproject.toml": '[project]\nname="d"\nversion="1"\n[tool.pdm.build]\npackage-dir="pylib"\n',
                "pylib/dpkg/__init__.py": ""},
        "flit": {"pyproject.toml": '[project]\nname="f-dist"\nversion="1"\n[tool.flit.module]\nname="fmod"\n',
                 "src/fmod/__init__.py": ""},
        "setup.cfg": {"setup.cfg": "[metadata]\nname = c\nversion = 5\n[options]\npackage_dir =\n    =src\n",
                      "src/cpkg/__init__.py": ""},
        "outside": {"pyproject.toml": '[project]\nname="../x"\nversion="1\\nName: y"\n'
                                      '[tool.setuptools]\npackage-dir={""="../../etc"}\n', "mod.py": ""}}
    roots = {name: (install_plan(files)["roots"], install_plan(files)["name"]) for name, files in others.items()}
    assert roots == {"hatch": (["code"], "h"), "poetry": (["source"], "p"), "pdm": (["pylib"], "d"),
                     "flit": (["src"], "f-dist"), "setup.cfg": (["src"], "c"), "outside": ([], "mod")}
    assert install_plan(others["outside"])["version"] == "0+unknown"
    assert install_plan({"calc/ops.py": OPS}) is None  # nothing declared: nothing to install


def test_an_environment_holding_the_package_itself_is_refused(environments):
    import shutil
    shadowed = environments / "shadowed"
    (shadowed / "acme_calc").mkdir(parents=True)
    (shadowed / "acme_calc" / "__init__.py").write_text("")
    try:
        problems = get_domain("repo").validate_task(layout_task("src", environment="shadowed"))
    finally:
        shutil.rmtree(shadowed)
    assert problems == ["field `environment`: environment 'shadowed' holds the repository's own package "
                        "'acme_calc', which is imported before the repository's copy (edits would not "
                        "count); build it from the project's dependencies only"]
    assert get_domain("repo").validate_task(layout_task("src")) == []


@pytest.mark.parametrize("name", ["src"])
def test_a_src_layout_scores_gold_one_and_empty_zero(environments, repo_sandbox, name):
    task = layout_task(name)
    domain, verify = get_domain("repo"), get_verifier("repo_tests")
    gold = verify(task, task["reference_patch"], domain.run(repo_sandbox, task, task["reference_patch"]))
    assert (gold.reward, gold.verdict) == (1.0, "pass"), gold.detail
    empty = verify(task, "", domain.run(repo_sandbox, task, ""))
    assert empty.reward == 0.0 and "test_total" in empty.detail


@pytest.mark.slow
def test_every_layout_validates_clean(environments, sandbox):
    for name in LAYOUTS:
        assert repo_problems(layout_task(name), sandbox) == [], name


def test_a_package_that_does_not_import_is_an_environment_error(environments, sandbox):
    files = dict(LAYOUTS["src"][0], **{"src/acme_calc/__init__.py": "import attr_not_installed\n"})
    task = layout_task("src", repo={"files": files},
                       reference_patch=make_diff(files, {"src/acme_calc/ops.py": OPS.replace("-=", "+=")}))
    problems = repo_problems(task, sandbox)
    assert len(problems) == 1 and "does not import" in problems[0], problems
    assert "ModuleNotFoundError: No module named 'attr_not_installed'" in problems[0]
    domain = get_domain("repo")
    with pytest.raises(ValueError, match="environment.*attr_not_installed"):
        get_verifier("repo_tests")(task, task["reference_patch"], domain.run(sandbox, task, task["reference_patch"]))
