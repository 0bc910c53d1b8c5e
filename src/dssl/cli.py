"""The ``dssl`` command: validate params, run one pipeline stage, manage the tracking store.

Each sub-command imports only what it needs (torch, MLflow and seaborn are expensive to import), so
``dssl validate`` answers in well under a second.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

EXIT_BAD_INPUT = 2
EXIT_TRACKING_UNAVAILABLE = 69   # EX_UNAVAILABLE: results written, runs wait for `dssl tracking sync`

def _cmd_validate(args: argparse.Namespace) -> int:
    from dssl.pipeline.validate import load_params_fully

    load_params_fully(args.file)
    print(f"{args.file}: valid")
    return 0


def _cmd_stage(args: argparse.Namespace) -> int:
    from dssl.pipeline.catalogue import KINDS_BY_NAME

    from dssl.config.params import load_params
    from dssl.pipeline.placement import check_stage

    kind = KINDS_BY_NAME[args.stage]
    values = [getattr(args, name) for name in kind.args]
    name = f"{args.stage}{'@' if values else ''}{'-'.join(values)}"
    check_stage(kind, values, args.params, load_params(args.params))   # before any work: a stage, in its folder
    run = getattr(importlib.import_module(kind.module), kind.function)
    if not kind.training:  # no checkpoints: a SIGTERM ends it at once, as any process
        out = run(*values, args.params)
    else:
        from dssl.training import preemption

        # Every training and evaluation kind checkpoints: a scheduler's SIGUSR1 (its time limit is near)
        # or SIGTERM asks it to stop at its next safe point, checkpoint written, then to be run again.
        preemption.install()
        try:
            out = run(*values, args.params)
        except preemption.Preempted as stopped:
            from dssl.pipeline.requeue import requeue_slurm_job

            print(f"{name}: {stopped}", file=sys.stderr, flush=True)
            print(f"{name}: {requeue_slurm_job()}", file=sys.stderr, flush=True)
            return preemption.EXIT_PREEMPTED
    print(f"{name}: wrote {out}")
    return 0


def _cmd_dag(args: argparse.Namespace) -> int:
    from dssl.pipeline.validate import load_params_fully
    from dssl.pipeline.dvcfile import (
        dangling_stages,
        folder_owner,
        git_tracked_outputs,
        is_stale,
        render_files,
        write_files,
    )
    from dssl.pipeline.layout import project_folder

    root = project_folder()
    params = load_params_fully(args.params)
    params_file = args.params.resolve()
    if args.action == "files":
        print("\n".join(render_files(params, root, params_file)))
        return 0
    owner = folder_owner(params, root, params_file)
    if owner:
        print(f"{args.params}: its pipeline folder holds the pipeline of {owner} (the same profile, "
              f"{params.get('profile')!r}); give {args.params} a profile of its own", file=sys.stderr)
        return 1
    tracked = git_tracked_outputs(params, root, params_file)
    if tracked:
        print(f"git tracks files inside stage outputs, which DVC refuses to save (after running the stage): "
              f"{', '.join(tracked)}; remove them from git first: git rm --cached {' '.join(tracked)}",
              file=sys.stderr)
        return 1
    dangling = dangling_stages(params, root)
    if dangling:
        print(f"{args.params}: no table or figure reads stages {', '.join(dangling)}, so `dvc repro` would never "
              "run them; give their framework an evaluation protocol (evaluate.protocols) or drop their grid",
              file=sys.stderr)
        return 1
    if args.action == "check":
        if is_stale(params, root, params_file):
            print(f"the dvc.yaml files are stale for {args.params}: run `dssl dag write --params {args.params}`",
                  file=sys.stderr)
            return 1
        print("dvc.yaml files are up to date")
        return 0
    written = write_files(params, root, params_file)
    print(f"wrote {', '.join(written)} from the stage catalogue and {args.params}")
    return 0


def _cmd_plan(args: argparse.Namespace) -> int:
    import json

    from dssl.planning.plan import as_json, make_plan, render
    from dssl.tracking import project_root

    plan = make_plan(args.params, project_root(), gpu=args.gpu, share=args.share, gpu_name=args.gpu_name,
                     results=args.results, profile=args.profile)
    print(json.dumps(as_json(plan), indent=1, sort_keys=True) if args.json else render(plan, stages=args.stages))
    return 0


def _cmd_tracking_init(args: argparse.Namespace) -> int:
    from dssl.config.params import load_params
    from dssl.tracking import init_store, project_root, tracking_uri

    params = load_params(args.params)
    root = project_root()
    experiment = init_store(root, str(params.get("profile", "default")))
    print(f"tracking store {tracking_uri(root)} ready (experiment id {experiment})")
    return 0


def _cmd_tracking_sync(args: argparse.Namespace) -> int:
    from dssl.tracking import outbox, project_root, sync, tracking_uri

    root = project_root()
    logged, problems = sync(root)
    waiting = len(outbox.pending(root))
    print(f"logged {logged} waiting run(s) to {tracking_uri(root)}; {waiting} still waiting")
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return EXIT_TRACKING_UNAVAILABLE if waiting else 0


def _cmd_readme_sync(args: argparse.Namespace) -> int:
    from dssl.reporting.readme import sync_readme
    from dssl.tracking import project_root

    root = project_root()
    changed = sync_readme(root / "README.md", root / "reports" / "README.md", check=args.check)
    if args.check and changed:
        print("README.md's expected results differ from reports/README.md: run `dssl readme sync`", file=sys.stderr)
        return 1
    print("README.md expected results " + ("updated" if changed else "up to date"))
    return 0


def _cmd_verdicts_export(args: argparse.Namespace) -> int:
    from dssl.pipeline.verdicts import export
    from dssl.tracking import project_root

    out = export(project_root(), args.params, args.label)
    print(f"wrote {out}: this run's claims and source; list it in report.verdicts_elsewhere of the build to compare")
    return 0


def _cmd_tracking_serve(args: argparse.Namespace) -> int:
    from dssl.tracking.server import ServerError, serve

    try:
        return serve(args.artifacts, args.host, args.port, args.backend_store_uri, args.postgres,
                     args.postgres_port, args.workers)
    except ServerError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dssl", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    validate = sub.add_parser("validate", help="check a params file; exit 2 listing every problem")
    validate.add_argument("file", nargs="?", default="params.yaml", type=Path)
    validate.set_defaults(func=_cmd_validate)

    from dssl.pipeline.catalogue import KINDS

    for kind in KINDS:
        stage = sub.add_parser(kind.name, help=kind.help)
        for name in kind.args:
            stage.add_argument(name, help=f"a {name} from params.yaml")
        stage.add_argument("--params", default="params.yaml", type=Path)
        stage.set_defaults(func=_cmd_stage, stage=kind.name)

    dag = sub.add_parser("dag", help="the dvc.yaml files from the stage catalogue")
    dag.add_argument("action", choices=["write", "check", "files"],
                     help="write the dvc.yaml files, exit 1 if one is stale, or list them (project-relative); "
                          "a params file other than the project's params.yaml has them in runs/<profile>/")
    dag.add_argument("--params", default="params.yaml", type=Path)
    dag.set_defaults(func=_cmd_dag)

    _add_plan_parser(sub)

    tracking = sub.add_parser("tracking", help="the MLflow store")
    tracking_sub = tracking.add_subparsers(dest="action", required=True)
    init = tracking_sub.add_parser("init", help="create the store and experiment once, before parallel jobs")
    init.add_argument("--params", default="params.yaml", type=Path)
    init.set_defaults(func=_cmd_tracking_init)
    serve = tracking_sub.add_parser(
        "serve", help="an MLflow tracking server (PostgreSQL + artifact folder) for jobs on many nodes; "
                      "jobs log to it with MLFLOW_TRACKING_URI=http://<host>:<port>")
    store = serve.add_mutually_exclusive_group(required=True)
    store.add_argument("--postgres", type=Path, metavar="DIR",
                       help="a private PostgreSQL cluster in DIR (created on first use, stopped on exit)")
    store.add_argument("--backend-store-uri", metavar="URI", help="an existing database, postgresql://...")
    serve.add_argument("--postgres-port", type=int, default=5433, help="port of the private PostgreSQL")
    serve.add_argument("--artifacts", type=Path, required=True, help="folder the server stores artifacts in")
    serve.add_argument("--host", default="127.0.0.1", help="interface to listen on (0.0.0.0: every node)")
    serve.add_argument("--port", type=int, default=5000)
    serve.add_argument("--workers", type=int, default=2, help="server worker processes")
    serve.set_defaults(func=_cmd_tracking_serve)
    tracking_sync = tracking_sub.add_parser(
        "sync", help="log the runs that wait in mlflow-outbox/ (their store was unreachable when the stage "
                     "ended); no output is rewritten: a result's run is named after it")
    tracking_sync.set_defaults(func=_cmd_tracking_sync)

    warm = sub.add_parser("warm", help="a server that pays the heavy imports once for all stages")
    warm.add_argument("action", choices=["start", "stop", "serve"],
                      help="serve: run the server in the foreground (what start launches in the background)")
    warm.add_argument("--params", type=Path, help="with start: also create the tracking store (as 'tracking init')")
    warm.set_defaults(func=_cmd_warm)

    repro = sub.add_parser("repro", help="what `dvc repro` does, with independent stages at the same time "
                                         "(what `make repro` runs)")
    repro.add_argument("--params", type=Path, default=Path("params.yaml"),
                       help="the params file whose pipeline to reproduce (its dvc.yaml files: `dssl dag write`)")
    repro.add_argument("--jobs", "-j", type=int, default=None,
                       help="stages at once, one core each (default: every core this process may use; 1 with a GPU)")
    repro.set_defaults(func=_cmd_repro)

    readme = sub.add_parser("readme", help="README.md's expected results from the generated report")
    readme.add_argument("action", choices=["sync"])
    readme.add_argument("--check", action="store_true", help="exit 1 if README.md differs, change nothing")
    readme.set_defaults(func=_cmd_readme_sync)

    verdicts = sub.add_parser("verdicts", help="a finished run's claims kept for another build's report")
    verdicts.add_argument("action", choices=["export"])
    verdicts.add_argument("--label", required=True, help="where it ran, e.g. avx2-kernels (reports/verdicts/<label>/)")
    verdicts.add_argument("--params", type=Path, default=Path("params.yaml"))
    verdicts.set_defaults(func=_cmd_verdicts_export)
    _add_lineage_parser(sub)
    _add_verify_parser(sub)
    return parser


def _bad_input_errors() -> tuple[type[BaseException], ...]:
    """Exception types that mean 'the input is wrong', reported in one message with exit 2."""
    from dssl.config.checker import ParamsError
    from dssl.pipeline.common import StageError
    from dssl.pipeline.placement import PlacementError

    from dssl.artifacts import ArtifactError

    errors: list[type[BaseException]] = [ParamsError, StageError, ArtifactError, PlacementError]
    # Only modules a stage actually imported can have raised their errors.
    for module, name in [("dssl.data.imageset", "DatasetError"), ("dssl.data.partition", "PartitionError")]:
        if module in sys.modules:
            errors.append(getattr(sys.modules[module], name))
    return tuple(errors)


def _with_producer(err: Exception, params_path: Path | None) -> Exception:
    """A damaged artifact's error names the stage that rebuilds it (from the catalogue)."""
    from dssl.artifacts import ArtifactError, default_recovery

    if not isinstance(err, ArtifactError) or err.stage or params_path is None:
        return err
    from dssl.config.params import read_params
    from dssl.pipeline.catalogue import producer
    from dssl.tracking import project_root

    try:
        path = err.path.resolve().relative_to(project_root()) if err.path.is_absolute() else err.path
        stage = producer(read_params(params_path), path)
    except (OSError, ValueError, KeyError, TypeError):
        return err
    if stage is None:
        return err
    if err.recovery != default_recovery(err.path):   # the reader's own advice (delete a checkpoint)
        return ArtifactError(err.path, err.problem, stage.name, err.recovery)
    from dssl.pipeline.dvcfile import recovery_command

    if err.path.exists():
        recovery = (f"Restore the recorded version with `{recovery_command(stage, 'restore', err.path.as_posix())}` "
                    f"or rebuild it with `{recovery_command(stage, 'rebuild')}`.")
    else:
        recovery = f"Stage {stage.name} writes it: run `{recovery_command(stage, 'produce')}`."
    return ArtifactError(err.path, err.problem, stage.name, recovery)


def _cmd_lineage(args: argparse.Namespace) -> int:
    from dssl.lineage import LineageError, as_json, lineage, mismatch_line, render_text
    from dssl.tracking import project_root

    try:
        answer = lineage(project_root(), args.target, args.row, args.column)
    except LineageError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(as_json(answer) if args.json else render_text(answer))
    problem = mismatch_line(answer)   # the answer is printed, but a script must not take it as the record
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    from dssl.data.prepared_array import verify_prepared

    for split, blocks, size in verify_prepared(args.prepared_dir, args.split or None):
        print(f"{args.prepared_dir}/{split}: {blocks} block(s) ({size / 2**30:,.2f} GiB) match meta.json")
    return 0


def _add_verify_parser(sub) -> None:
    verify = sub.add_parser("verify", help="check every block of a prepared image folder's arrays against its "
                                           "meta.json (readers check only the header, size and end blocks)")
    verify.add_argument("prepared_dir", type=Path, help="e.g. data/prepared/imagenet")
    verify.add_argument("--split", action="append", help="only this split (repeatable; default: every split)")
    verify.set_defaults(func=_cmd_verify)


def _add_lineage_parser(sub) -> None:
    lineage = sub.add_parser("lineage", help="the stages, runs, params and file md5s behind a result or table cell")
    lineage.add_argument("target", type=Path, help="a result JSON, or a table CSV (reports/table1.csv)")
    lineage.add_argument("row", nargs="?", help="with a table: the row label, e.g. 'SimSiam + CNN'")
    lineage.add_argument("column", nargs="?", help="with a table: dataset and setting, e.g. 'digits IID'")
    lineage.add_argument("--json", action="store_true", help="machine-readable output")
    lineage.set_defaults(func=_cmd_lineage)


def _add_plan_parser(sub) -> None:
    from dssl.planning.throughput import DEFAULT_GPU, DEFAULT_SHARE, GPU_PEAKS

    plan = sub.add_parser("plan", help="what a params file costs: images, FLOPs, GPU-hours and bytes per stage and "
                                       "table, prepared-data disk, SLURM jobs past their runtime")
    plan.add_argument("params", nargs="?", default=Path("params.yaml"), type=Path)
    plan.add_argument("--gpu", default=DEFAULT_GPU, choices=sorted(GPU_PEAKS),
                      help="the GPU whose peak an assumed throughput is a share of (default %(default)s)")
    plan.add_argument("--share", type=float, default=DEFAULT_SHARE,
                      help="assumed share of that peak where gpu_round.py measured nothing (default %(default)s)")
    plan.add_argument("--gpu-name", help="use only gpu_round.py results of GPUs whose name contains this")
    plan.add_argument("--results", type=Path, help="gpu_round.py's results (default benchmarks/results/gpu_round.json)")
    plan.add_argument("--profile", type=Path, help="the Snakemake profile whose runtimes the jobs are checked "
                                                   "against (default profiles/slurm)")
    plan.add_argument("--stages", action="store_true", help="also print every GPU stage")
    plan.add_argument("--json", action="store_true", help="machine-readable output")
    plan.set_defaults(func=_cmd_plan)


def _cmd_warm(args: argparse.Namespace) -> int:
    from dssl.pipeline import warm
    from dssl.tracking import project_root

    root = project_root()
    if args.action == "serve":
        warm.serve(root, main)
    elif args.action == "start":
        process = warm.launch(root, [sys.executable, "-m", "dssl.cli", "warm", "serve"])
        if args.params is not None:  # while the server imports, prepare the tracking store
            _cmd_tracking_init(args)
        print(f"warm stage server started (pid {warm.wait_ready(root, process)})")
    else:
        print("warm stage server stopped" if warm.stop(root) else "no warm stage server was running")
    return 0


def _cmd_repro(args: argparse.Namespace) -> int:
    from dssl.pipeline.dvcfile import Pipeline, folder_owner
    from dssl.pipeline.layout import project_folder
    from dssl.pipeline.repro import ReproBusy, ReproError, default_jobs, reproduce, stage_sizes
    from dssl.pipeline.validate import load_params_fully
    from dssl.pipeline.workers import available_cores
    from dssl.training.device import resolve_device

    if args.jobs is not None and args.jobs < 1:
        print(f"error: --jobs must be at least 1, got {args.jobs}", file=sys.stderr)
        return EXIT_BAD_INPUT
    root = project_folder()
    params = load_params_fully(args.params)
    pipeline_file = Pipeline.of(params, root, args.params.resolve()).path("dvc.yaml")
    owner = folder_owner(params, root, args.params.resolve())
    if owner:   # its stages would write into another params file's outputs and dvc.lock files
        print(f"error: {args.params}: its pipeline folder {Path(pipeline_file).parent}/ holds the pipeline of "
              f"{owner} (the same profile, {params.get('profile')!r}); give {args.params} a profile of its own",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    if not (root / pipeline_file).is_file():
        print(f"error: {pipeline_file} does not exist: run `dssl dag write --params {args.params}` first",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    jobs = args.jobs or default_jobs(available_cores(), resolve_device().type)
    started = time.monotonic()
    try:
        ran = reproduce(root, [pipeline_file], jobs, stage_sizes(params))
    except ReproBusy as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ReproError as err:
        print(f"ERROR: {err}", file=sys.stderr)
        return 1
    print(f"{ran} stages ran in {time.monotonic() - started:.0f} s" if ran else "Data and pipelines are up to date.")
    return 0


def main(argv: list[str] | None = None) -> int:
    from dssl.pipeline.catalogue import KINDS_BY_NAME

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in KINDS_BY_NAME:
        from dssl.pipeline.layout import project_folder
        from dssl.pipeline.warm import try_delegate

        # the server runs in the project; a stage may run in a pipeline folder inside it (runs/<profile>/)
        status = try_delegate(argv, project_folder())
        if status is not None:
            return status
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except Exception as err:  # noqa: BLE001 - filtered just below
        if isinstance(err, _bad_input_errors()):
            print(f"error: {_with_producer(err, getattr(args, 'params', None))}", file=sys.stderr)
            return EXIT_BAD_INPUT
        status = _retry_status(err)
        if status is not None:
            print(f"error: {err}", file=sys.stderr)
            return status
        failed_write = _write_failure(err)
        if failed_write is not None:
            print(f"error: {failed_write}", file=sys.stderr)
            return EXIT_BAD_INPUT
        raise


def _write_failure(err: Exception) -> Exception | None:
    """A full disk or a read-only folder met outside the writers that report it themselves (``WriteError``):
    an ``OSError`` (ENOSPC, EDQUOT, EFBIG, EROFS, EACCES, EPERM) or torch's failed writer, raised or
    behind what was raised, as one ``WriteError`` line naming the file and what to do; None for any
    other error, which keeps its traceback. A write to an open file fails without a file name: the line
    then says so and names the folders to check."""
    import tempfile

    from dssl.artifacts import WriteError, write_error

    link: BaseException | None = err
    seen: set[int] = set()
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        converted = write_error(link, Path.cwd()) if isinstance(link, Exception) else None
        if converted is not None and isinstance(link, OSError) and not link.filename:
            reason = converted.problem.removeprefix("cannot be written ")
            return WriteError(Path.cwd(), f"a write of this command failed {reason} and the error names no file",
                              recovery=f"Check the space and permissions of the folders it writes to (`df -h . "
                                       f"{tempfile.gettempdir()}`: the project, the DVC cache, the temporary "
                                       "folder), then run the same command again (training resumes from its "
                                       "last checkpoint).")
        if converted is not None:
            return converted
        link = link.__cause__ or link.__context__
    return None


def _retry_status(err: Exception) -> int | None:
    """The exit status of a stage that stopped to be run again: preempted (its checkpoint written), or
    its tracking store unreachable (its results written)."""
    preemption, tracking = sys.modules.get("dssl.training.preemption"), sys.modules.get("dssl.tracking.outbox")
    if preemption is not None and isinstance(err, preemption.Preempted):
        return preemption.EXIT_PREEMPTED
    if tracking is not None and isinstance(err, tracking.TrackingUnavailable):
        return EXIT_TRACKING_UNAVAILABLE
    return None


if __name__ == "__main__":
    sys.exit(main())
