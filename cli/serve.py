"""`flywheel serve`: a model or a run's checkpoint behind the OpenAI chat-completions API, every
interaction and every piece of feedback recorded as table rows (feedback/serve.py).

    flywheel serve --model smollm2 --record-dir records/app
    flywheel serve --run-dir runs/demo [--iteration 3] --record-dir records/app \\
                   --host 0.0.0.0 --token-file tokens.txt [--allowed-host serve.example.org]
    flywheel sql "SELECT client, count(*) FROM interactions GROUP BY 1" --run-dir records/app

It prints the URL to give an OpenAI client (`base_url`) and where its token is (`api_key`), the
record dir, then serves until SIGTERM or SIGINT: the requests already queued are answered,
every buffered row is written, and it exits 0. Without --token-file it issues its own token:
made once, printed once, kept 0600 in the config folder (web/service_token.py
`default_token`) and reused, recorded as the client `default`; `--no-token` serves anyone on
loopback as `anonymous` (any local user or process could then add rows to the record dir). It
refuses to start (exit 2, one line on stderr) without a model, with a token file that holds no
valid token, and on an address beyond loopback without --token-file. docs/SERVE.md says how to
point an application at it.
"""

from __future__ import annotations

import argparse
import os
import sys

from flywheel.settings.option_items import parse_options, split_items
from flywheel.web.same_origin import parse_allowed_host
from flywheel.web.service_limits import ServiceLimits
from flywheel.web.service_token import default_token, is_loopback, read_named_tokens
from flywheel.cli.arg_types import nonnegative_int, positive_float, positive_int

# torch, the policy and the server are imported in run(): `flywheel --help` stays fast.

TOKEN_NAME = "serve-token"  # the issued token's file in the config folder


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("serve", help="serve a model with the OpenAI chat API, recording every "
                                     "interaction and feedback as tables")
    which = p.add_argument_group("the model (one of)")
    which.add_argument("--model", help="an hf model: a local Hugging Face folder, a .gguf file, "
                                       "or a named model (tiny-llama, smollm2)")
    which.add_argument("--run-dir", help="serve this run's checkpoint (local path or gs://...)")
    p.add_argument("--iteration", default=None,
                   help="with --run-dir: the iteration, or `initial` (default: the last committed)")
    p.add_argument("--policy", default="hf", help="the policy backend of --model (default: %(default)s; "
                                                  "`tiny` serves the built-in tiny policy, for tests)")
    p.add_argument("--policy-options", default="", help="comma-separated KEY=VALUE policy options, "
                                                        "e.g. system_prompt=...,dtype=bfloat16")
    p.add_argument("--record-dir", required=True,
                   help="where the interactions and feedback tables are written (local or gs://)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    p.add_argument("--port", type=nonnegative_int, default=8800,
                   help="0 picks a free port (default: %(default)s)")
    p.add_argument("--token-file", default=None,
                   help="bearer tokens clients must send (an OpenAI client's api_key): one token, "
                        "or lines name:token (the name is recorded as `client`); make one with "
                        "`openssl rand -hex 32 > FILE`. Default: a token issued once and kept in "
                        "~/.config/flywheel/serve-token ($FLYWHEEL_CONFIG_DIR), loopback only")
    p.add_argument("--no-token", action="store_true",
                   help="answer anyone who reaches loopback, recorded as `anonymous` (any local "
                        "user or process could add rows to the record dir)")
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME[:PORT]",
                   help="a further Host name clients use (a proxy's, a DNS name); requests naming "
                        "any other host are refused (DNS rebinding). Repeatable")
    p.add_argument("--max-batch", type=positive_int, default=8,
                   help="rows sampled together (default: %(default)s)")
    p.add_argument("--max-queue", type=positive_int, default=64,
                   help="requests waiting; more are answered 503 (default: %(default)s)")
    p.add_argument("--max-tokens-cap", type=positive_int, default=512,
                   help="a request's max_tokens is cut to this (default: %(default)s)")
    p.add_argument("--flush-rows", type=positive_int, default=64,
                   help="write the buffered rows once this many wait (default: %(default)s)")
    p.add_argument("--flush-seconds", type=positive_float, default=5.0,
                   help="... or once the oldest waited this long (default: %(default)s)")
    p.add_argument("--max-connections", type=positive_int, default=64,
                   help="connections held at once; more are answered 503 (default: %(default)s)")
    p.add_argument("--max-body-kb", type=positive_int, default=1024,
                   help="largest request body; larger ones are refused (413) unread (default: %(default)s)")
    return p


def run(args, console) -> int:
    from flywheel.feedback.serve import ChatServer
    from flywheel.feedback.serve_api import ApiLimits
    from flywheel.feedback.serve_recorder import TableRecorder
    try:  # everything that can refuse the command is checked before the model loads
        if args.no_token and args.token_file:
            raise ValueError("give --token-file or --no-token, not both")
        tokens = read_tokens(args.token_file) if args.token_file else None
        if not tokens and not is_loopback(args.host):
            raise ValueError(f"refusing to listen on {args.host!r} without a token: anyone who "
                             "reaches it could use the model; give --token-file or bind 127.0.0.1")
        for entry in args.allowed_host:
            parse_allowed_host(entry)
        if not (args.model or args.run_dir or args.policy != "hf"):
            raise ValueError("give --model (an hf model) or --run-dir (a run's checkpoint)")
        if args.model and args.run_dir:
            raise ValueError("give --model or --run-dir, not both")
        if not args.run_dir and args.iteration is not None:
            raise ValueError("--iteration picks a checkpoint of --run-dir: give --run-dir too")
        if args.run_dir and args.policy_options:
            raise ValueError("--policy-options apply to --model: a checkpoint keeps its own options")
        if min(args.max_batch, args.max_queue, args.flush_rows) < 1 or not args.flush_seconds > 0:
            raise ValueError("--max-batch, --max-queue and --flush-rows must be >= 1, "
                             "--flush-seconds > 0")
        api = ApiLimits(max_tokens_cap=args.max_tokens_cap)
        limits = ServiceLimits(max_body=args.max_body_kb << 10, max_connections=args.max_connections)
        options = parse_options(split_items(args.policy_options, "--policy-options"), "--policy-options")
        issued = None
        if not tokens and not args.no_token:  # the last check: a refused command issues nothing
            issued = default_token(TOKEN_NAME)
            tokens = {"default": issued[1]}
        served = load_policy(args.model, args.run_dir, args.iteration, args.policy, options)
    except (ValueError, KeyError, OSError) as e:
        print(f"error: {e.args[0] if isinstance(e, KeyError) else e}", file=sys.stderr)
        return 2
    recorder = TableRecorder(args.record_dir, args.flush_rows, args.flush_seconds)
    try:
        server = ChatServer(served, recorder, args.host, args.port, tokens=tokens,
                            max_batch=args.max_batch, max_queue=args.max_queue, api=api, limits=limits,
                            allowed_hosts=args.allowed_host)
    except (OSError, ValueError) as e:  # the address is taken, or the record dir unreadable
        recorder.close()
        print(f"error: {e}" if isinstance(e, ValueError) else
              f"error: cannot serve on {args.host}:{args.port} recording to {args.record_dir}: {e}",
              file=sys.stderr)
        return 2 if isinstance(e, ValueError) else 1
    return _serve(server, tokens, args.record_dir, issued)


def _serve(server, tokens, record_dir: str, issued=None) -> int:
    import signal
    import threading
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server.start()
    if issued:
        auth = f"token required: the one in {issued[0]}, OPENAI_API_KEY=$(cat {issued[0]})"
    else:
        auth = f"token required ({', '.join(tokens)})" if tokens else "no token: anyone on loopback"
    print(f"serving {server.served.name} at {server.url}/v1 ({auth}); recording to {record_dir}",
          flush=True)
    if issued and issued[2]:  # shown once, when made; afterwards the file holds it
        print(f"issued a new token (kept in {issued[0]}): {issued[1]}", flush=True)
    stop.wait()
    print("stopping: answering the queued requests, writing the buffered rows", flush=True)
    try:
        server.close()
    except Exception as e:  # the last write failed: say what was lost, never exit 0
        print(f"error: writing the last {server.recorder.buffered()} buffered rows under "
              f"{record_dir} failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    rows = server.recorder.rows_written
    print(f"recorded {rows['interactions']} interaction rows and {rows['feedback']} feedback rows "
          f"in {len(server.recorder.files)} files under {record_dir}", flush=True)
    return 0


def load_policy(model: str | None = None, run_dir: str | None = None,
                iteration: int | str | None = None, backend: str = "hf",
                options: dict | None = None):
    """The ServedPolicy of a run's checkpoint (`iteration`, "initial", or by default the last
    committed one), or of a fresh `backend` policy of `model` and `options`."""
    from flywheel.feedback.serve import ServedPolicy
    from flywheel.policy.checkpoint import checkpoint_exists, load_checkpoint, policy_digest
    from flywheel.policy.backends import POLICIES
    from flywheel.policy.device import pick_device
    device = pick_device()  # a GPU where there is one
    if run_dir:
        from flywheel.settings.layout import RunLayout
        if model:
            raise ValueError("give --model or --run-dir, not both")
        layout = RunLayout(run_dir)
        committed = layout.committed_iterations()
        if iteration is None:
            iteration = committed[-1] if committed else "initial"
        elif iteration != "initial" and not (str(iteration).isdigit() and int(iteration) in committed):
            raise ValueError(f"{run_dir}: iteration {iteration} is not committed; committed: "
                             f"{', '.join(map(str, committed)) or 'none'}")
        uri = layout.checkpoint(None if iteration == "initial" else int(iteration))
        if not checkpoint_exists(uri):
            raise ValueError(f"{run_dir} has no checkpoint at {uri}")
        checkpoint = load_checkpoint(uri, device=device)  # refuses weights not matching their digest
        checkpoint.policy.module.eval()
        label = "initial" if iteration == "initial" else f"iteration-{iteration}"
        return ServedPolicy(checkpoint.policy, checkpoint.digest,
                            f"{os.path.basename(run_dir.rstrip('/'))}@{label}")
    options = dict(options or {})
    if model:
        if backend != "hf":
            raise ValueError(f"--model names an hf model; the {backend} policy takes --policy-options")
        options["model"] = model
    policy = POLICIES.get(backend).create(options, seed=0, device=device)
    policy.module.eval()
    name = str(options.get("model") or getattr(getattr(policy, "options", None), "model", backend))
    return ServedPolicy(policy, policy_digest(policy), os.path.basename(name.rstrip("/")))


def read_tokens(path: str) -> dict[str, str]:
    """{client name: token} from a token file: one bare token (the client "default"), or lines
    `name:token` (web/service_token.py `read_named_tokens`)."""
    return read_named_tokens(path)
