"""Repository tasks naming a docker image (`image`), for real: `flywheel env build NAME
--requirements ... --wheelhouse ... --image` builds flywheel-env/NAME offline from a wheel of this
interpreter's pytest; a SWE-bench-style task naming it scores its reference 1 and the snapshot 0
on docker with no mount, and on local with the environment folder; an image whose own Python has
pytest in its site-packages (as a SWE-bench image's has) serves the checks the same way.

The images are built once per module and removed at the end; the docker parts skip, saying why,
where dockerd or the Docker SDK is missing (tests/conftest.py: docker_daemon).
"""

import base64
import hashlib
import importlib.util
import io
import json
import os
import shutil
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pytest

from flywheel.cli import main as cli_main
from flywheel.domains.registry import get_domain
from flywheel.sandbox import get_backend
from flywheel.sandbox.docker_image import IMAGE
from flywheel.verifiers import get_verifier

from tests.families.conftest import PYTEST_PACKAGES, environments_root

pytestmark = pytest.mark.xdist_group("repo_images")  # one worker: the images built once
ENV_NAME = "imgtest"
ENV_IMAGE = "flywheel-env/imgtest"
SITE_IMAGE = "flywheel-test/site-pytest:1"   # pytest in its Python's own site-packages
SITE = "/usr/lib/python3/dist-packages"        # on Debian's python3 sys.path


def pytest_files() -> dict[str, Path]:
    """Archive path -> file of pytest and its dependencies in this interpreter."""
    files = {}
    for name in PYTEST_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None:
            continue
        origin = Path(spec.origin)
        if origin.name != "__init__.py":
            files[origin.name] = origin
            continue
        for path in origin.parent.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                files[str(path.relative_to(origin.parent.parent))] = path
    return files


def pytest_wheel(folder: Path) -> str:
    """A pure-Python wheel `pytestbundle` of this interpreter's pytest (no network: pip installs
    it from `folder` alone); the requirement naming it."""
    info = "pytestbundle-1.0.dist-info"
    blobs = {arc: path.read_bytes() for arc, path in pytest_files().items()}
    blobs[f"{info}/METADATA"] = b"Metadata-Version: 2.1\nName: pytestbundle\nVersion: 1.0\n"
    blobs[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    def digest(data: bytes) -> str:
        return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record = [f"{arc},sha256={digest(data)},{len(data)}" for arc, data in blobs.items()]
    blobs[f"{info}/RECORD"] = ("\n".join(record + [f"{info}/RECORD,,"]) + "\n").encode()
    with zipfile.ZipFile(folder / "pytestbundle-1.0-py3-none-any.whl", "w") as z:
        for arc, data in blobs.items():
            z.writestr(arc, data)
    return "pytestbundle==1.0\n"


def site_pytest_image(client) -> None:
    """SITE_IMAGE: flywheel-sandbox with pytest copied into its Python's site-packages."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        dockerfile = f"FROM {IMAGE}\nCOPY site/ {SITE}/\n".encode()
        entry = tarfile.TarInfo("Dockerfile")
        entry.size = len(dockerfile)
        tar.addfile(entry, io.BytesIO(dockerfile))
        for arc, path in pytest_files().items():
            entry = tar.gettarinfo(str(path), f"site/{arc}")
            entry.mode, entry.uid, entry.gid = 0o644, 0, 0
            with open(path, "rb") as f:
                tar.addfile(entry, f)
    buf.seek(0)
    client.images.build(fileobj=buf, custom_context=True, tag=SITE_IMAGE, rm=True, pull=False,
                        network_mode="none")


@pytest.fixture(scope="module")
def env_root():
    """$FLYWHEEL_ENVIRONMENTS for the module, under /tmp (the local sandbox's uid must reach it)."""
    root = Path(tempfile.mkdtemp(prefix="flywheel-envs-images-"))
    os.chmod(root, 0o755)
    with environments_root(root):
        yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def docker_sandbox(docker_daemon, env_root, tmp_path_factory):
    """The docker backend, once `flywheel env build imgtest ... --image` (through the CLI, from
    a local wheelhouse) and SITE_IMAGE are built; both images removed after."""
    work = tmp_path_factory.mktemp("wheels")
    (work / "reqs.txt").write_text(pytest_wheel(work))
    assert cli_main.main(["env", "build", ENV_NAME, "--requirements", str(work / "reqs.txt"),
                          "--wheelhouse", str(work), "--image", "--docker-host", docker_daemon.url]) == 0
    client = docker_daemon.client()
    site_pytest_image(client)
    backend = docker_daemon.backend()
    yield backend
    backend.close()
    for tag in (ENV_IMAGE, SITE_IMAGE):
        client.images.remove(tag, force=True)


def score(backend, task, response):
    domain = get_domain("repo")
    return get_verifier(domain.verifier)(task, response, domain.run(backend, task, response))


def reference_and_snapshot(backend, task):
    """(reward of the reference patch, reward of doing nothing), with the verdicts' details."""
    good, nothing = score(backend, task, task["reference_patch"]), score(backend, task, "")
    assert nothing.components["hidden_pass_rate"] == 0.0, nothing.detail
    assert "tests/test_x.py::test_total: failed" in nothing.detail
    return good.reward, nothing.reward, good.detail


def test_a_task_naming_the_env_image_scores_on_docker_without_a_mount(docker_sandbox, calc_row):
    domain = get_domain("repo")
    task = domain.normalize_task(calc_row(environment=None, image=ENV_IMAGE))
    assert domain.validate_task(task) == []
    request = domain.request(task, "")
    assert (request.image, request.mounts) == (ENV_IMAGE, ())
    good, nothing, detail = reference_and_snapshot(docker_sandbox, task)
    assert (good, nothing) == (1.0, 0.0), detail


def test_the_same_task_on_local_uses_the_environment_folder(docker_sandbox, env_root, calc_row):
    assert (env_root / ENV_NAME / "pytest" / "__init__.py").is_file()
    task = get_domain("repo").normalize_task(calc_row(environment=ENV_NAME, image=ENV_IMAGE))
    with get_backend("local") as local:  # the image is ignored there, the folder mounted
        good, nothing, detail = reference_and_snapshot(local, task)
    assert (good, nothing) == (1.0, 0.0), detail


def test_pytest_in_the_images_own_site_packages_serves_the_checks(docker_sandbox, calc_row):
    task = get_domain("repo").normalize_task(calc_row(environment=None, image=SITE_IMAGE))
    good, nothing, detail = reference_and_snapshot(docker_sandbox, task)
    assert (good, nothing) == (1.0, 0.0), detail


def test_without_pytest_in_the_image_the_task_cannot_be_scored(docker_sandbox, calc_row):
    """The flywheel-sandbox image itself has no pytest: the harness says so, and the verifier
    raises (an environment error), whatever the response; with neither image nor environment
    it raises before anything runs."""
    domain = get_domain("repo")
    task = domain.normalize_task(calc_row(environment=None, image=IMAGE))
    execution = domain.run(docker_sandbox, task, task["reference_patch"])
    assert '"pytest_missing": true' in execution.stdout
    with pytest.raises(ValueError, match="the sandbox could not import it"):
        get_verifier(domain.verifier)(task, task["reference_patch"], execution)
    with pytest.raises(ValueError, match="names no `environment` \\(nor an `image`"):
        get_verifier(domain.verifier)(domain.normalize_task(calc_row(environment=None)), "", None)


def test_tasks_validate_runs_an_image_task_in_its_image(docker_sandbox, docker_daemon, calc_row,
                                                          tmp_path, monkeypatch, capsys):
    """`flywheel tasks validate --sandbox docker` runs the task in the image it names (snapshot
    fails the hidden check, the reference passes all); on local, where images are ignored, the
    report says to validate it on docker."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(calc_row(environment=None, image=ENV_IMAGE)) + "\n")
    monkeypatch.setenv("DOCKER_HOST", docker_daemon.url)
    assert cli_main.main(["tasks", "validate", str(tasks), "--sandbox", "docker"]) == 0
    assert "1 valid tasks, 0 problems" in capsys.readouterr().out
    assert cli_main.main(["tasks", "validate", str(tasks)]) == 1
    assert f"names docker image '{ENV_IMAGE}': validate it with --sandbox docker" in capsys.readouterr().out


def test_the_domains_default_image_and_bad_names(calc_row):
    domain = type(get_domain("repo"))()
    domain.image = "acme/tests:1"
    task = domain.normalize_task(calc_row(environment=None))
    assert domain.request(task, "").image == "acme/tests:1"
    assert domain.request({**task, "image": ENV_IMAGE}, "").image == ENV_IMAGE
    assert get_domain("repo").request(task, "").image is None
    [problem] = domain.validate_task({**task, "image": "not an image"})
    assert problem.startswith("field `image`: image 'not an image' is not a docker image reference")


def test_a_swebench_row_keeps_its_image(tmp_path, monkeypatch):
    from flywheel.domains.task_files import task_rows
    monkeypatch.setenv("FLYWHEEL_SNAPSHOT_STORE", str(tmp_path / "store"))
    (tmp_path / "acme__calc-1" / "calc").mkdir(parents=True)
    (tmp_path / "acme__calc-1" / "calc" / "ops.py").write_text("X = 1\n")
    row = {"instance_id": "acme__calc-1", "problem_statement": "p",
           "FAIL_TO_PASS": ["tests/test_x.py::test_total"], "PASS_TO_PASS": []}
    rows = [row, {**row, "image_name": "sweb.eval.x86_64.acme__calc-1:latest"},
            {**row, "image": "acme/calc:1", "image_name": "ignored:1"}]
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    images = [task.get("image") for _, task, _, _ in task_rows(str(path), path.read_bytes())]
    assert images == [None, "sweb.eval.x86_64.acme__calc-1:latest", "acme/calc:1"]


def test_env_build_image_refuses_a_name_docker_cannot_take_before_pip(env_root, tmp_path, capsys):
    (tmp_path / "reqs.txt").write_text("nothing-here==1\n")
    assert cli_main.main(["env", "build", "Swe-Py311", "--requirements", str(tmp_path / "reqs.txt"),
                          "--wheelhouse", str(tmp_path), "--image"]) == 1
    assert "cannot name a docker image" in capsys.readouterr().out
    assert not (env_root / "Swe-Py311").exists()


def test_the_readme_says_how_to_prepare_an_image_offline():
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    assert "--image" in readme and "flywheel.python" in readme and "docker load" in readme
