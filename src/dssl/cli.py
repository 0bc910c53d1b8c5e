"""The ``dssl`` command: validate params, run one pipeline stage, manage the tracking store.

Each sub-command imports only what it needs (torch, MLflow and seaborn are expensive to import), so
``dssl validate`` answers in well under a second.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

EXIT_BAD_INPUT = 2

# stage kind (= sub-command) -> (module under dssl.pipeline, function, its positional arguments, help)
STAGES = {
    "prepare": ("prepare", "run", ["dataset"], "Prepare a dataset (params section 'datasets')."),
    "partition": ("partition", "run", ["partition"], "Split a prepared dataset among clients."),
    "graph": ("graph", "run", ["graph"], "Build a communication graph and its mixing matrices."),
    "pretrain_fl": ("pretrain", "run_fl", ["model", "partition"], "Federated SSL pretraining (FedAvg)."),
    "pretrain_decl": ("pretrain", "run_decl", ["model", "graph"], "Decentralized SSL pretraining on a graph."),
    "pretrain_central": ("pretrain", "run_central", ["model"], "Centralised SSL pretraining (reference)."),
    "evaluate_fl": ("evaluate", "run_fl", ["model", "partition", "dataset", "protocol"], "Evaluate an FL model."),
    "evaluate_decl": ("evaluate", "run_decl", ["model", "graph", "dataset", "protocol"], "Evaluate a DecL model."),
    "evaluate_central": ("evaluate", "run_central", ["model", "dataset", "protocol"], "Evaluate a central model."),
    "evaluate_random": ("evaluate", "run_random", ["backbone", "dataset", "protocol"],
                        "Evaluate a randomly initialised backbone (reference)."),
    "graph_improve": ("graph_improve", "run", ["graph"], "Add edges to a graph greedily (params 'improved_graphs')."),
    "theory": ("theory", "run", [], "Paper A's linear-model theory checked numerically (params 'theory')."),
    "report": ("report", "run", [], "Tables, figures and reports/README.md from the evaluation results."),
}


def _cmd_validate(args: argparse.Namespace) -> int:
    from dssl.config.params import load_params

    load_params(args.file)
    print(f"{args.file}: valid")
    return 0


def _cmd_stage(args: argparse.Namespace) -> int:
    module_name, function, arg_names, _ = STAGES[args.stage]
    values = [getattr(args, name) for name in arg_names]
    run = getattr(importlib.import_module(f"dssl.pipeline.{module_name}"), function)
    out = run(*values, args.params)
    print(f"{args.stage}{'@' if values else ''}{'-'.join(values)}: wrote {out}")
    return 0


def _cmd_tracking_init(args: argparse.Namespace) -> int:
    from dssl.config.params import load_params
    from dssl.tracking import init_store, project_root, tracking_uri

    params = load_params(args.params)
    root = project_root()
    experiment = init_store(root, str(params.get("profile", "default")))
    print(f"tracking store {tracking_uri(root)} ready (experiment id {experiment})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dssl", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    validate = sub.add_parser("validate", help="check a params file; exit 2 listing every problem")
    validate.add_argument("file", nargs="?", default="params.yaml", type=Path)
    validate.set_defaults(func=_cmd_validate)

    for kind, (_, _, arg_names, help_text) in STAGES.items():
        stage = sub.add_parser(kind, help=help_text)
        for name in arg_names:
            stage.add_argument(name, help=f"a {name} name from params.yaml")
        stage.add_argument("--params", default="params.yaml", type=Path)
        stage.set_defaults(func=_cmd_stage, stage=kind)

    tracking = sub.add_parser("tracking", help="the MLflow store")
    tracking_sub = tracking.add_subparsers(dest="action", required=True)
    init = tracking_sub.add_parser("init", help="create the store and experiment once, before parallel jobs")
    init.add_argument("--params", default="params.yaml", type=Path)
    init.set_defaults(func=_cmd_tracking_init)

    warm = sub.add_parser("warm", help="a server that pays the heavy imports once for all stages")
    warm.add_argument("action", choices=["start", "stop"])
    warm.set_defaults(func=_cmd_warm)
    return parser


def _bad_input_errors() -> tuple[type[BaseException], ...]:
    """Exception types that mean 'the input is wrong', reported in one message with exit 2."""
    from dssl.config.params import ParamsError
    from dssl.pipeline.common import StageError

    errors: list[type[BaseException]] = [ParamsError, StageError]
    # Only modules a stage actually imported can have raised their errors.
    for module, name in [("dssl.data.imageset", "DatasetError"), ("dssl.data.partition", "PartitionError")]:
        if module in sys.modules:
            errors.append(getattr(sys.modules[module], name))
    return tuple(errors)


def _cmd_warm(args: argparse.Namespace) -> int:
    from dssl.pipeline import warm
    from dssl.tracking import project_root

    root = project_root()
    if args.action == "start":
        print(f"warm stage server started (pid {warm.start(root)})")
    else:
        print("warm stage server stopped" if warm.stop(root) else "no warm stage server was running")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in STAGES:
        from dssl.pipeline.warm import try_delegate
        from dssl.tracking import project_root

        status = try_delegate(argv, project_root())
        if status is not None:
            return status
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except Exception as err:  # noqa: BLE001 - filtered just below
        if isinstance(err, _bad_input_errors()):
            print(f"error: {err}", file=sys.stderr)
            return EXIT_BAD_INPUT
        raise


if __name__ == "__main__":
    sys.exit(main())
