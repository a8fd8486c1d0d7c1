"""`flywheel export`: one checkpoint of a run as a plain Hugging Face model folder.

    flywheel export --run-dir runs/demo --iteration 3 merged/
    flywheel export --run-dir gs://bucket/runs/demo --iteration initial gs://bucket/models/demo-0

The folder holds the model (a LoRA adapter merged into its base) and the tokenizer, written by
the policy backend's own `export`, so `AutoModelForCausalLM.from_pretrained(OUT)` and vLLM load
it without peft or Flywheel and compute the checkpoint's logits. The checkpoint is loaded as the
trainer loads it, so a checkpoint whose files no longer match its recorded digest is refused
rather than exported. `flywheel_export.json` beside the model says where it came from.
"""

from __future__ import annotations

import json
import os
import tempfile

import pyarrow.fs as pafs
from rich.markup import escape

from flywheel.schemas.storage import resolve_uri

# torch and Beam (checkpoints, the run's layout) are imported where used: `flywheel --help` and
# the other commands start without them.

PROVENANCE = "flywheel_export.json"


class ExportError(ValueError):
    """The export cannot be made as asked: the message says what was expected."""


def add_parser(sub) -> None:
    p = sub.add_parser("export", help="write a checkpoint as a merged Hugging Face model folder")
    p.add_argument("--run-dir", required=True, help="the run (local path or gs://...)")
    p.add_argument("--iteration", required=True,
                   help="the iteration whose checkpoint to export, or `initial` (the warm start)")
    p.add_argument("out", metavar="OUT", help="a new or empty folder (local path or gs://...)")


def run(args, console) -> int:
    from flywheel.policy.checkpoint import CheckpointDigestError
    try:
        info = export_checkpoint(args.run_dir, args.iteration, args.out)
    except (ExportError, CheckpointDigestError) as e:
        console.print(f"[red]error:[/] {escape(str(e))}", highlight=False)
        return 2
    console.print(f"wrote {escape(args.out)}: {info['backend']} checkpoint of iteration "
                  f"{info['iteration']} ({info['checkpoint_digest'][:19]}...)"
                  + (", LoRA adapter merged" if info["lora_merged"] else ""), highlight=False)
    return 0


def export_checkpoint(run_dir: str, iteration: int | str, out: str) -> dict:
    """Write the checkpoint of `iteration` (an int, or "initial") of `run_dir` into `out` as a
    Hugging Face model folder; returns the provenance written beside it. Raises ExportError for
    a missing run or iteration, a non-empty `out`, or a backend without a Hugging Face format."""
    from flywheel.settings.layout import RunLayout
    from flywheel.policy.checkpoint import load_checkpoint
    from flywheel.schemas.storage import join
    from flywheel.policy.backends import POLICIES

    layout = RunLayout(run_dir)
    if not layout.exists(layout.run_json):
        raise ExportError(f"{run_dir} holds no run (no run.json): expected a --run-dir of "
                          "`flywheel run`")
    wanted = _iteration(iteration)
    found = checkpoints(layout)
    if wanted not in found:
        raise ExportError(f"{run_dir} has no checkpoint of iteration {wanted}; it has: "
                          f"{', '.join(map(str, found)) or 'none'}")
    uri = layout.checkpoint(None if wanted == "initial" else wanted)
    backend = layout.read_json(join(uri, "config.json"))["backend"]
    if not hasattr(POLICIES.get(backend), "export"):
        raise ExportError(f"the checkpoint's policy backend `{backend}` has no Hugging Face "
                          "format; only checkpoints of a run with --policy hf can be exported")
    _check_empty(out)
    checkpoint = load_checkpoint(uri)  # refuses weights that do not match the recorded digest
    info = {"run_dir": run_dir, "iteration": wanted, "backend": backend,
            "checkpoint_digest": checkpoint.digest,
            "policy_version": checkpoint.meta.get("policy_version"),
            "lora_merged": bool(getattr(checkpoint.policy.options, "lora_r", 0))}
    if "://" in out and not out.startswith("file://"):
        from flywheel.policy.backends.hf.model_files import upload_dir
        with tempfile.TemporaryDirectory() as tmp:
            _write(checkpoint.policy, tmp, info)
            upload_dir(tmp, out)
    else:
        _write(checkpoint.policy, out.removeprefix("file://"), info)
    return info


def checkpoints(layout) -> list:
    """The complete checkpoints of a run (their config.json written): "initial", then the
    iterations in order."""
    from apache_beam.io.filesystems import FileSystems
    pattern = layout.join("checkpoints", "*", "config.json")
    names = {m.path.rstrip("/").split("/")[-2] for m in FileSystems.match([pattern])[0].metadata_list}
    numbers = sorted(int(n.split("=", 1)[1]) for n in names
                     if n.startswith("iteration=") and n.split("=", 1)[1].isdigit())
    return (["initial"] if "initial" in names else []) + numbers


def _iteration(value: int | str) -> int | str:
    if isinstance(value, int) or value == "initial":
        return value
    if str(value).isdigit():
        return int(value)
    raise ExportError(f"--iteration {value!r}: expected an iteration number (0, 1, ...) or "
                      "`initial`")


def _check_empty(out: str) -> None:
    fs, path = resolve_uri(out)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.File:
        raise ExportError(f"{out} is a file: expected a new or empty folder")
    if info.type == pafs.FileType.NotFound and isinstance(fs, pafs.LocalFileSystem):
        return
    inside = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    if inside:
        raise ExportError(f"{out} exists and is not empty ({len(inside)} entries, e.g. "
                          f"{os.path.basename(inside[0].path)}): expected a new or empty folder")


def _write(policy, directory: str, info: dict) -> None:
    os.makedirs(directory, exist_ok=True)
    policy.export(directory)
    with open(os.path.join(directory, PROVENANCE), "w") as f:
        json.dump(info, f, indent=2, sort_keys=True)
