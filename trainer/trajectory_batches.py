"""Trajectory Parquet -> training tensors.

The rollout writes `<run>/tables/trajectories/iteration=K/domain=D/*.parquet`; `iteration` and
`domain` live only in the Hive path. `read_trajectories` reads one such folder (local or gs://)
and `make_batch` turns rows into right-padded tensors aligned with next-token targets.
"""
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import torch

from flywheel.schemas import PARTITION_COLUMNS, TRAJECTORIES
from flywheel.schemas.validation import check_table_versions
from flywheel.schemas.uris import resolve_uri

TRAIN_COLUMNS = [
    "prompt_token_ids",
    "response_token_ids",
    "response_logprobs",
    "advantage",
    "sampling_temperature",
    "filtered",
]
# Partition keys, typed as in the logical schema; a key above the folder read comes from the URI.
PARTITIONS = pa.schema([TRAJECTORIES.field(name) for name in PARTITION_COLUMNS["trajectories"]])


def read_trajectories(uri: str, columns: list[str] | None = None) -> pa.Table:
    """All rows under a Hive-partitioned Parquet folder, partition keys as columns.

    Files that carry a `schema_version` column (all that Flywheel writes) must have a known major
    version; a folder without files gives an empty table of the logical schema.
    """
    fs, path = resolve_uri(uri)
    if fs.get_file_info(path).type != pafs.FileType.Directory:
        raise FileNotFoundError(f"no trajectories folder at {uri}")
    hive = ds.partitioning(PARTITIONS, flavor="hive")
    dataset = ds.dataset(path, filesystem=fs, format="parquet", partitioning=hive)
    if not dataset.files:
        return TRAJECTORIES.empty_table().select(list(columns or TRAJECTORIES.names))
    if "schema_version" in dataset.schema.names:
        check_table_versions(dataset.to_table(columns=["schema_version"]), uri)
    wanted = dataset.schema.names if columns is None else list(columns)
    missing = [c for c in wanted if c not in dataset.schema.names]
    if missing:
        raise KeyError(f"columns {missing} not in trajectories at {uri}")
    table = dataset.to_table(columns=wanted)
    from_uri = {k: v for seg in path.split("/") if "=" in seg for k, v in [seg.split("=", 1)]}
    for name, value in from_uri.items():
        if name in table.column_names and name in PARTITIONS.names and table[name].null_count == len(table):
            column = pa.array([value] * len(table)).cast(PARTITIONS.field(name).type)
            table = table.set_column(table.schema.get_field_index(name), name, column)
    return table


def make_batch(rows: list[dict], pad_id: int,
               device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """Rows -> right-padded tensors. With L = longest prompt+response:

    input_ids (B, L) long, filled with the policy's `pad_id`; attn_mask (B, L) bool;
    response_mask (B, L-1) float, 1 where target input_ids[:, t+1] is a response token;
    old_logprobs (B, L-1) float, the sampler's log-probs at those positions, 0 elsewhere;
    advantages (B,) float; temperatures (B,) float.
    """
    seqs = [list(r["prompt_token_ids"]) + list(r["response_token_ids"]) for r in rows]
    B, L = len(rows), max(len(s) for s in seqs)
    input_ids = torch.full((B, L), pad_id, dtype=torch.long)
    attn_mask = torch.zeros((B, L), dtype=torch.bool)
    response_mask = torch.zeros((B, L - 1))
    old_logprobs = torch.zeros((B, L - 1))
    for i, (r, s) in enumerate(zip(rows, seqs)):
        p, n = len(r["prompt_token_ids"]), len(r["response_token_ids"])
        assert p >= 1, "a prompt holds at least one token"
        input_ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        attn_mask[i, : len(s)] = True
        response_mask[i, p - 1 : p - 1 + n] = 1.0  # position t predicts token t+1
        if n:
            old_logprobs[i, p - 1 : p - 1 + n] = torch.tensor(list(r["response_logprobs"]))
    batch = {
        "input_ids": input_ids,
        "attn_mask": attn_mask,
        "response_mask": response_mask,
        "old_logprobs": old_logprobs,
        "advantages": torch.tensor([float(r["advantage"]) for r in rows]),
        "temperatures": torch.tensor([float(r["sampling_temperature"]) for r in rows]),
    }
    return {k: v.to(device) for k, v in batch.items()}
