"""Where an `hf` model's files are: a local directory or GGUF file, a copy of a URI in a local
cache, or a named model; a GGUF file's dequantized copy; and copying a saved directory up to a URI.

`transformers` reads local files only, so a `gs://` (any pyarrow.fs URI) model is copied once
per machine into FLYWHEEL_MODEL_CACHE (default ~/.cache/flywheel/models). The cache key holds
the URI and its files' sizes and modification times, so a checkpoint rewritten at the same URI
(a resumed run rewrites an interrupted iteration) is copied again, never served stale.
"""
from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow.fs as pafs

from flywheel.schemas.storage import join, resolve_uri


def cache_root() -> Path:
    return Path(os.environ.get("FLYWHEEL_MODEL_CACHE", Path.home() / ".cache" / "flywheel" / "models"))


def is_remote(uri: str) -> bool:
    return "://" in uri and not uri.startswith("file://")


def local_path(uri: str) -> str:
    """A local copy of `uri` (a folder or one file); a local path or file:// URI is itself."""
    if not is_remote(uri):
        return uri[len("file://"):] if uri.startswith("file://") else uri
    fs, path = resolve_uri(uri)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(f"no model at {uri}")
    files = ([info] if info.type == pafs.FileType.File else
             [f for f in fs.get_file_info(pafs.FileSelector(path, recursive=True))
              if f.type == pafs.FileType.File])
    listing = "\n".join(f"{f.path}\t{f.size}\t{f.mtime_ns}" for f in sorted(files, key=lambda f: f.path))
    key = hashlib.sha256(f"{uri}\n{listing}".encode()).hexdigest()[:20]
    dest = cache_root() / key
    if not (dest / ".complete").exists():
        tmp = cache_root() / f"{key}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        for f in files:
            rel = Path(f.path).name if info.type == pafs.FileType.File else os.path.relpath(f.path, path)
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            _download(fs, f.path, tmp / rel)
        (tmp / ".complete").write_text(uri)
        try:
            os.replace(tmp, dest)
        except OSError:  # another process finished the same copy first
            shutil.rmtree(tmp, ignore_errors=True)
    if info.type == pafs.FileType.File:
        return str(dest / Path(path).name)
    return str(dest)


def _download(fs: pafs.FileSystem, src: str, dest: Path) -> None:
    with fs.open_input_stream(src) as inp, open(dest, "wb") as out:
        shutil.copyfileobj(inp, out, length=8 << 20)


def dequantized(directory: str, gguf: str, dtype: str, load: Callable[[], tuple]) -> str:
    """A plain model folder (safetensors, config, tokenizer) holding the GGUF file `gguf` of
    `directory` dequantized to `dtype`, made once per machine in the model cache with
    `load()` -> (model, tokenizer): reading a GGUF file parses it three times (config, tokenizer,
    weights), ~20 s for SmolLM2-135M; the saved folder loads in about a second, the same
    weights bit for bit. The copy takes the dequantized model's size on disk (that of the model
    in memory). Keyed, as a URI's copy is, by the file's path, size and modification time, plus
    the dtype and the transformers version (which does the dequantizing): a changed file or
    reader is never served stale."""
    import transformers
    path = os.path.realpath(os.path.join(directory, gguf))
    st = os.stat(path)
    key = f"{path}\t{st.st_size}\t{st.st_mtime_ns}\n{dtype}\n{transformers.__version__}"
    dest = cache_root() / f"gguf-{Path(gguf).stem}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    if not (dest / ".complete").exists():
        tmp = cache_root() / f"{dest.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        model, tokenizer = load()
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / ".complete").write_text(path)
        try:
            os.replace(tmp, dest)
        except OSError:  # another process finished the same copy first
            shutil.rmtree(tmp, ignore_errors=True)
    return str(dest)


def model_location(path: str) -> tuple[str, str | None]:
    """(directory for from_pretrained, GGUF file name in it or None) of a local model path."""
    p = Path(path)
    if p.is_file() and p.suffix == ".gguf":
        return str(p.parent), p.name
    if p.is_dir():
        if not (p / "config.json").exists():
            raise FileNotFoundError(f"{path} has no config.json: expected a Hugging Face model "
                                    "directory (save_pretrained) or a .gguf file")
        return str(p), None
    raise FileNotFoundError(f"no model at {path}: expected a Hugging Face model directory, a "
                            ".gguf file, a gs:// (or other pyarrow.fs) URI or a named model")


def upload_dir(local_dir: str, uri: str) -> None:
    """Copy every file under `local_dir` to the folder `uri` (relative paths kept), streaming."""
    for root, _, names in os.walk(local_dir):
        for name in names:
            rel = os.path.relpath(os.path.join(root, name), local_dir).replace(os.sep, "/")
            fs, path = resolve_uri(join(uri, rel))
            with open(os.path.join(root, name), "rb") as inp, fs.open_output_stream(path) as out:
                shutil.copyfileobj(inp, out, length=8 << 20)
