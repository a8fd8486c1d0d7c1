"""A request naming its image (`ExecRequest.image`) on the real docker backend: it runs in that
image, with the image's own Python (its `flywheel.python` label, else found in the image) and
the packages in that Python's site-packages, as locked down as in the default image; a missing
image or a bad name fails clearly; backends that cannot run an image refuse it.

The images are built once per module from flywheel-sandbox (a COPY and a LABEL, offline) and
removed at the end; everything skips, saying why, where dockerd or the Docker SDK is missing.
"""

import io
import os
import tarfile

import pytest

from flywheel.sandbox import ExecRequest, SandboxError, get_backend
from flywheel.sandbox.docker_image import IMAGE, rootfs_tar
from tests.sandbox.unsupported import assert_refused_where_unsupported

MARKED = "flywheel-test/marked:1"       # a marker file, a module in site-packages, a label
PROBED = "flywheel-test/probed:1"       # no label: /usr/local/bin/python3 is found first
WITH_VOLUME = "flywheel-test/volume:1"  # declares a VOLUME: refused
SITE = "/usr/lib/python3/dist-packages"  # on Debian's python3 sys.path, empty in flywheel-sandbox
pytestmark = pytest.mark.xdist_group("request_images")  # one worker: the images built once


def context(dockerfile: str, files: dict[str, str]) -> io.BytesIO:
    """An in-memory build context: the Dockerfile and `files` (path -> text)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, text in {"Dockerfile": dockerfile, **files}.items():
            entry = tarfile.TarInfo(name)
            entry.size, entry.mode = len(text.encode()), 0o644
            tar.addfile(entry, io.BytesIO(text.encode()))
    buf.seek(0)
    return buf


def build(client, tag: str, dockerfile: str, files: dict[str, str] | None = None) -> None:
    client.images.build(fileobj=context(dockerfile, files or {}), custom_context=True, tag=tag,
                        rm=True, pull=False, network_mode="none")


def unlabelled_rootfs() -> bytes:
    """flywheel-sandbox's rootfs plus /usr/local/bin/python3 -> /usr/bin/python3, for a
    `docker import` without the label (as a user's own image would come)."""
    buf = io.BytesIO(rootfs_tar())
    with tarfile.open(fileobj=buf, mode="a") as tar:
        for name in ("usr/local", "usr/local/bin"):
            entry = tarfile.TarInfo(name)
            entry.type, entry.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(entry)
        link = tarfile.TarInfo("usr/local/bin/python3")
        link.type, link.linkname = tarfile.SYMTYPE, "/usr/bin/python3"
        tar.addfile(link)
    return buf.getvalue()


@pytest.fixture(scope="module")
def images(docker_daemon):
    """(a docker backend, MARKED's python) once MARKED, PROBED and WITH_VOLUME are built; removed after."""
    backend = docker_daemon.backend()  # builds flywheel-sandbox when missing
    client = docker_daemon.client()
    # the label names the real file behind the base image's python3 (the rootfs holds both)
    label = os.path.realpath(client.images.get(IMAGE).labels.get("flywheel.python", "/usr/bin/python3"))
    build(client, MARKED, f"FROM {IMAGE}\nCOPY marker.txt /etc/flywheel-marker\n"
                          f"COPY flywheel_marked.py {SITE}/flywheel_marked.py\n"
                          f"LABEL flywheel.python={label}\n",
          {"marker.txt": "marked image\n", "flywheel_marked.py": "WHERE = 'site-packages'\n"})
    client.api.import_image_from_data(unlabelled_rootfs(), repository=PROBED.split(":")[0], tag="1")
    build(client, WITH_VOLUME, f"FROM {IMAGE}\nVOLUME /data\n")
    yield backend, label
    backend.close()
    for tag in (MARKED, PROBED, WITH_VOLUME):
        client.images.remove(tag, force=True)


def run(backend, code: str, image: str | None = None):
    return backend.run(ExecRequest({"main.py": code}, ("python", "main.py"), image=image))


def lines_of(backend, code: str, image: str) -> list[str]:
    """The lines `code` prints in `image`, once it has exited 0."""
    result = run(backend, code, image)
    assert result.exit_code == 0, result
    return result.stdout.splitlines()


WHERE = ("import os, sys\n"
         "print(os.path.exists('/etc/flywheel-marker'), sys.executable)\n")


def test_a_request_runs_in_its_image_and_without_one_in_the_default(images):
    backend, label = images
    marked = run(backend, WHERE + "print(open('/etc/flywheel-marker').read().strip())", MARKED)
    assert marked.stdout.splitlines() == [f"True {label}", "marked image"], marked
    default = run(backend, WHERE)
    assert default.exit_code == 0 and default.stdout.split()[0] == "False", default


def test_an_unlabelled_image_gets_the_first_python_found(images):
    backend, _ = images
    result = run(backend, WHERE, PROBED)
    assert (result.exit_code, result.stdout) == (0, "False /usr/local/bin/python3\n"), result


def test_site_packages_of_the_image_serve_the_command_and_its_children(images):
    """`python` runs with -I (no work dir on sys.path), not -S: the image's site-packages stay."""
    backend, _ = images
    code = ("import subprocess, sys\n"
            "import flywheel_marked\n"
            "print(flywheel_marked.WHERE, flywheel_marked.__file__)\n"
            "child = [sys.executable, '-I', '-B', '-c', 'import flywheel_marked; print(flywheel_marked.WHERE)']\n"
            "print(subprocess.run(child, capture_output=True, text=True).stdout.strip())\n")
    assert lines_of(backend, code, MARKED) == [f"site-packages {SITE}/flywheel_marked.py", "site-packages"]
    # the work dir still shadows nothing: a module the code writes is not importable by name
    shadow = backend.run(ExecRequest({"main.py": "import flywheel_marked; print(flywheel_marked.WHERE)",
                                      "flywheel_marked.py": "WHERE = 'work dir'\n"},
                                     ("python", "-c", "import runpy; runpy.run_path('main.py')"),
                                     image=MARKED))
    assert shadow.stdout == "site-packages\n", shadow


def test_the_custom_image_is_as_locked_down(images):
    backend, _ = images
    code = ("import os\n"
            "s = open('/proc/self/status').read()\n"
            "print(os.getuid(), [l.split()[1] for l in s.splitlines() if l.startswith(('CapEff', 'NoNewPrivs'))])\n"
            "print(sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]))\n"
            "root = [l.split()[3] for l in open('/proc/mounts') if l.split()[1] == '/']\n"
            "print(root[0].split(',')[0])\n"
            "try:\n"
            "    open('/usr/new.txt', 'w')\n"
            "    print('wrote')\n"
            "except OSError as e:\n"
            "    print('refused', e.errno)\n"
            "import socket\n"
            "try:\n"
            "    socket.create_connection(('1.1.1.1', 53), timeout=2)\n"
            "    print('connected')\n"
            "except OSError:\n"
            "    print('no network')\n")
    assert lines_of(backend, code, MARKED) == ["65534 ['0000000000000000', '1']", "['lo']",
                                               "ro", "refused 30", "no network"]


def test_a_missing_image_is_an_environment_error_naming_it(images):
    backend, _ = images
    with pytest.raises(SandboxError, match=r"no image 'flywheel-test/absent:9'.*docker pull "
                                           r"flywheel-test/absent:9.*flywheel env build"):
        run(backend, "print(1)", "flywheel-test/absent:9")


def test_an_image_declaring_a_volume_is_refused(images):
    backend, _ = images
    with pytest.raises(SandboxError, match="declares VOLUME /data"):
        run(backend, "print(1)", WITH_VOLUME)


@pytest.mark.parametrize("image", ["", "has space", "-rm", "x" * 401, "a;b", "a\nb", 3])
def test_a_bad_image_name_is_refused_where_the_request_is_built(image):
    with pytest.raises(ValueError, match="docker image reference"):
        ExecRequest({}, ("true",), image=image)


def test_good_image_names():
    for image in ("flywheel-env/swe-py311", "registry.example.com:5000/org/repo:tag",
                  "swebench/sweb.eval.x86_64.django_1776_django-11099:latest",
                  "ubuntu@sha256:" + "a" * 64):
        assert ExecRequest({}, ("true",), image=image).image == image


def test_backends_that_cannot_run_an_image_refuse_and_local_ignores_it():
    request = ExecRequest({}, ("python", "-c", "print(1)"), image="flywheel-env/x")
    assert_refused_where_unsupported(request, "images")
    try:
        local = get_backend("local", warm=False)
    except SandboxError as e:
        pytest.skip(f"local cannot run here: {e}")
    with local:
        assert local.run(request).stdout == "1\n"
