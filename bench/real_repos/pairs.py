"""The release pairs of the real-repository suite (build.py): each a bug fix (or a small feature)
between two consecutive releases of a public Python package, with its problem statement written
from the release notes (statements.py: what was wrong, never how it was fixed)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pair:
    instance_id: str
    repo: str            # owner/name on GitHub, as SWE-bench names it
    dist: str            # the name on PyPI
    old: str             # the base release (the snapshot; base_commit)
    new: str             # the release with the fix (the patch and the test_patch)
    keep: tuple          # folders of the sdist the snapshot keeps (with pyproject.toml/setup.*)
    source: tuple        # what the patch covers (files or folders), less `tests`
    tests: tuple         # the test files the test_patch covers and the checks run
    created_at: str = ""
    timeout_s: int = 120
    max_p2p: int = 150   # PASS_TO_PASS: at most this many, evenly spread (bounds a scoring run)
    drop: tuple = ()     # PASS_TO_PASS left out, by id prefix (needing what a sandbox lacks)
    only_f2p: tuple = ()  # FAIL_TO_PASS kept only where an id holds one of these
    run: tuple = ()      # what the builder's pytest runs (node ids), where not the test files
    skip: tuple = ()     # file suffixes the snapshot leaves out (rendered docs, images)
    environment: str = "real-repos"  # requirements/NAME.txt: pytest and the tests' dependencies


def _pyparsing(old, new, tests, created_at, **kw):
    # test_unit.py runs its ~900 tests six times over (packrat variants): the builder runs the
    # plain class once, and the other test modules whole
    run = tuple(f"{t}::Test02_WithoutPackrat" if t.endswith("test_unit.py") else t for t in tests)
    return Pair(f"pyparsing__pyparsing-{new}", "pyparsing/pyparsing", "pyparsing", old, new,
                ("pyparsing", "tests", "examples"), ("pyparsing",), tests, created_at, run=run,
                skip=(".html", ".svg", ".png", ".jpg", ".gif", ".css", ".js", ".pdf"), **kw)


def _more(old, new, tests, created_at, **kw):
    return Pair(f"more-itertools__more-itertools-{new}", "more-itertools/more-itertools",
                "more-itertools", old, new, ("more_itertools", "tests"), ("more_itertools",),
                tests, created_at, **kw)


# os.utime()s a template in the test tree: the trusted run takes that for a changed test tree
MTIME_TEST = "tests/test_loader.py::TestFileSystemLoader::test_caches_template_based_on_mtime"


# run `cat` as a pager and `sed` as an editor: the docker backend's minimal image has neither
CLICK_BINARY_TESTS = ("tests/test_utils.py::test_echo_via_pager", "tests/test_termui.py::test_fast_edit")


def _pallets(name, old, new, tests, created_at, **kw):
    kw.setdefault("drop", {"jinja2": (MTIME_TEST,), "click": CLICK_BINARY_TESTS}.get(name, ()))
    return Pair(f"pallets__{name}-{new}", f"pallets/{name}", name, old, new, ("src", "tests"),
                (f"src/{name}",), tests, created_at, **kw)


PAIRS = [
    _pyparsing("3.0.6", "3.0.7", ("tests/test_unit.py",), "2022-01-21"),
    _pyparsing("3.0.7", "3.0.8", ("tests/test_unit.py",), "2022-04-10"),
    _pyparsing("3.0.8", "3.0.9", ("tests/test_unit.py",), "2022-05-10"),
    _pyparsing("3.1.0", "3.1.1", ("tests/test_unit.py",), "2023-07-30"),
    _pyparsing("3.1.1", "3.1.2", ("tests/test_unit.py",), "2024-03-06"),
    _pyparsing("3.1.2", "3.1.3", ("tests/test_unit.py", "tests/test_simple_unit.py"), "2024-08-25"),
    _pyparsing("3.2.0", "3.2.1", ("tests/test_unit.py",), "2024-12-31"),
    _pyparsing("3.2.1", "3.2.2", ("tests/test_unit.py", "tests/test_util.py"), "2025-03-23"),
    _pyparsing("3.2.2", "3.2.3", ("tests/test_unit.py",), "2025-03-25"),
    _more("9.1.0", "10.0.0", ("tests/test_more.py", "tests/test_recipes.py"), "2023-07-24"),
    _more("10.0.0", "10.1.0", ("tests/test_more.py", "tests/test_recipes.py"), "2023-08-03"),
    _more("10.1.0", "10.2.0", ("tests/test_more.py", "tests/test_recipes.py"), "2024-01-08"),
    _more("10.2.0", "10.3.0", ("tests/test_more.py", "tests/test_recipes.py"), "2024-06-04"),
    _more("10.3.0", "10.4.0", ("tests/test_more.py", "tests/test_recipes.py"), "2024-08-05"),
    _more("10.5.0", "10.6.0", ("tests/test_more.py", "tests/test_recipes.py"), "2025-01-13"),
    _pallets("click", "8.1.2", "8.1.3", tuple(f"tests/{n}" for n in (
        "test_arguments.py", "test_basic.py", "test_commands.py", "test_options.py", "test_termui.py",
        "test_types.py", "test_utils.py", "test_shell_completion.py")), "2022-04-28"),
    _pallets("click", "8.1.3", "8.1.4", tuple(f"tests/{n}" for n in (
        "conftest.py", "test_arguments.py", "test_command_decorators.py", "test_commands.py",
        "test_defaults.py", "test_formatting.py", "test_options.py", "test_shell_completion.py",
        "test_termui.py", "test_types.py", "test_utils.py")), "2023-07-06"),
    _pallets("click", "8.1.7", "8.1.8", tuple(f"tests/{n}" for n in (
        "test_commands.py", "test_defaults.py", "test_imports.py", "test_normalization.py",
        "test_options.py", "test_testing.py", "test_types.py", "test_utils.py")), "2024-12-21"),
    _pallets("jinja2", "3.1.2", "3.1.3", tuple(f"tests/{n}" for n in (
        "test_ext.py", "test_filters.py", "test_inheritance.py", "test_loader.py")), "2024-01-10"),
    _pallets("jinja2", "3.1.3", "3.1.4", tuple(f"tests/{n}" for n in (
        "test_api.py", "test_filters.py", "test_inheritance.py", "test_regression.py")), "2024-05-05"),
    _pallets("jinja2", "3.1.4", "3.1.5", tuple(f"tests/{n}" for n in (
        # (test_async*.py need trio, which the environment does not hold)
        "test_api.py", "test_compile.py", "test_core_tags.py",
        "test_filters.py", "test_loader.py", "test_nativetypes.py", "test_regression.py",
        "test_runtime.py", "test_security.py", "test_utils.py")), "2024-12-21"),
    _pallets("markupsafe", "2.1.4", "2.1.5", ("tests/test_markupsafe.py",), "2024-02-02",
             environment="real-repos-pytest"),  # no markupsafe of its own in the environment
    Pair("jquast__wcwidth-0.2.13", "jquast/wcwidth", "wcwidth", "0.2.12", "0.2.13",
         ("wcwidth", "tests"), ("wcwidth",), ("tests/test_core.py", "tests/test_table_integrity.py"),
         "2024-01-06"),
]
