"""``report``: its dataset and sections' datasets among those evaluated, and the verdict records shown
beside it."""

from __future__ import annotations

from dssl.config.checker import Checker


def check_report(c: Checker) -> None:
    """Structure only: section names and options are checked against the report's registry by
    ``pipeline.validate`` (the report's code is not part of every stage's lineage)."""
    report = c.section("report")
    if not report:
        return
    c.unknown_keys(report, {"dataset", "sections", "verdicts_elsewhere"}, "report")
    from dssl.config.evaluation_plan import evaluated_datasets

    evaluated = evaluated_datasets(c.params)
    c.name_of(report, "dataset", evaluated, "report", "evaluate.datasets or evaluate.grids")
    sections = c.mapping(report.get("sections", {}), "report.sections")
    for name, options in (sections or {}).items():
        if options is not None and c.mapping(options, f"report.sections.{name}") is not None:
            _check_section_datasets(c, options, f"report.sections.{name}", evaluated)
    elsewhere = (c.mapping(report["verdicts_elsewhere"], "report.verdicts_elsewhere")
                 if "verdicts_elsewhere" in report else None)
    for label, folder in (elsewhere or {}).items():
        path = f"report.verdicts_elsewhere.{label}"
        if not isinstance(folder, str):
            c.add(path, f"must be a folder path, got {folder!r}", "a folder written by `dssl verdicts export`")
        elif not (c.root / folder / "source.json").is_file():
            c.add(path, f"{folder}/source.json does not exist",
                  f"record a finished run's verdicts there: `dssl verdicts export --label {label}`")


def _check_section_datasets(c: Checker, options: dict, path: str, evaluated: list[str]) -> None:
    """A section's ``dataset`` and its columns' (``columns.<label>.dataset``) must be datasets some evaluation
    stage reads, or the section's cells would be empty after the run."""
    named = [(f"{path}.dataset", options.get("dataset"))] if options.get("dataset") is not None else []
    columns = options.get("columns")
    if isinstance(columns, dict):
        named += [(f"{path}.columns.{label}.dataset", spec.get("dataset")) for label, spec in columns.items()
                  if isinstance(spec, dict) and spec.get("dataset") is not None]
    for where, dataset in named:
        if dataset not in evaluated:
            c.add(where, f"{dataset!r} is not evaluated on", f"one of evaluate.datasets or evaluate.grids: "
                                                            f"{', '.join(evaluated) or '(none)'}")
