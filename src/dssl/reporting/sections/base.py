"""A report section: one table or figure of a paper, measured, beside the paper, with its claims checked.

Each section is three steps, so that its numbers, its verdicts and its text cannot drift apart:
``data`` (long-form cells from the evaluation results; written as ``<name>.csv``) -> ``findings``
(one :class:`~dssl.reporting.claims.Finding` per checked claim) -> ``markdown``. Sections are registered
under the names ``params.yaml`` lists in ``report.sections``; their options are the keyword arguments
of ``__init__`` (an unknown option is a TypeError naming it).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Mapping

import pandas as pd

from dssl.config.checker import Checker, ParamsError
from dssl.config.protocols import PROTOCOL_SPECS
from dssl.registry import Registry
from dssl.reporting.claims import Finding
from dssl.reporting.figures import footer
from dssl.reporting.tables import runs_text


FOLDER = "sections"   # next to README.md: every section's CSV, and claims.csv
FIGURES = "figures/report"   # next to README.md: every figure a section draws (DVC plots)


@dataclass
class ReportContext:
    """What every section may read: the results, the build's profile and settings, the paper's numbers."""

    results: pd.DataFrame
    profile: str
    dataset: str                         # the downstream dataset the tables show
    paper: Mapping[str, Any]
    settings: Mapping[str, Any] = field(default_factory=dict)
    theory: str | None = None
    weight_distances: pd.DataFrame | None = None   # paper A's Table 5 (``results.load_weight_distances``)
    features: Path | None = None         # paper A's Fig. 3: the folder of the features stages' outputs
    data_figures: Mapping[str, Mapping[str, str]] = field(default_factory=dict)   # kind -> name -> path
    run: Mapping[str, Any] = field(default_factory=dict)   # what ran: stages, seconds, hardware (``readme``)
    graphs: Mapping[str, Mapping[str, float]] = field(default_factory=dict)   # graph -> its graph.json stats
    models: Mapping[str, Any] = field(default_factory=dict)       # params.yaml's models entries
    strategies: Mapping[str, Any] = field(default_factory=dict)   # params.yaml's strategies entries

    @property
    def seeds(self) -> list[int]:
        """The seeds of the evaluation results (every mean in the report is over them)."""
        return sorted({int(s) for s in self.results["seed"]}) if not self.results.empty else []

    def note(self, scored: str | None = None) -> str:
        """A figure's footer: the profile, how its cells were scored, the seeds."""
        return footer(self.profile, self.seeds, scored)


@dataclass
class SectionOutput:
    """A rendered section: its Markdown, its findings, its CSV data and the figures to draw."""

    name: str
    markdown: str
    findings: list[Finding]
    data: pd.DataFrame | None = None
    figures: dict[str, Callable[[Path], Path]] = field(default_factory=dict)


class ReportSection:
    """Base class: subclasses set ``title`` and implement ``data``, ``findings`` and ``markdown``."""

    name: ClassVar[str] = "base"
    title: ClassVar[str] = ""

    def data(self, ctx: ReportContext) -> pd.DataFrame:
        raise NotImplementedError

    def findings(self, data: pd.DataFrame, ctx: ReportContext) -> list[Finding]:
        return []

    def markdown(self, data: pd.DataFrame, findings: list[Finding], ctx: ReportContext) -> str:
        raise NotImplementedError

    def figures(self, data: pd.DataFrame, ctx: ReportContext) -> dict[str, Callable[[Path], Path]]:
        """Figure file name (in ``FIGURES``) -> a function drawing it at a given path (none by default)."""
        return {}

    def csv(self, data: pd.DataFrame) -> pd.DataFrame:
        """The section's CSV: its data, with each cell's runs as text ("seed s: <stage> (<MLflow run name>)")."""
        if "runs" in data:
            return data.assign(runs=[runs_text(runs) for runs in data["runs"]])
        return data

    def label_problems(self, report_dataset: str, dataset_names: Iterable[str]) -> list[str]:
        """What in the section's labels names a dataset its cells are not read on (none by default)."""
        return []

    def seed_problems(self, params: dict) -> list[str]:
        """Cells the section pairs seed by seed but whose seed lists share no seed (none by default)."""
        return []

    def read_problems(self, params: dict) -> list[str]:
        """Trained cells the section reads on a (dataset, protocol) their evaluation does not run (none by
        default)."""
        return []

    def empty_text(self) -> str:
        return "No results for this section in this build."

    def render(self, ctx: ReportContext) -> SectionOutput:
        data = self.data(ctx)
        heading = f"## {self.title}"
        if data is None or data.empty:
            return SectionOutput(self.name, f"{heading}\n\n{self.empty_text()}", [], None)
        findings = self.findings(data, ctx)
        body = self.markdown(data, findings, ctx)
        return SectionOutput(self.name, f"{heading}\n\n{body}", findings, self.csv(data), self.figures(data, ctx))


def unevaluated(params: dict, framework: str, cell: tuple[str, ...], dataset: str, protocol: str) -> str | None:
    """Why a trained cell a section reads on ``protocol`` on ``dataset`` would be missing after the run: its
    evaluation does not run that pair (``evaluate.grids`` of its tables leaves it out); None when it does, or
    when no grid trains the cell (a table may name rows only another profile trains)."""
    from dssl.config.evaluation_plan import cell_grids, cell_pairs

    grids = cell_grids(params, framework, cell)
    pairs = cell_pairs(params, framework, cell) if grids else []
    if not grids or (dataset, protocol) in pairs:
        return None
    runs = ", ".join(f"{p} on {d}" for d, p in pairs) or "nothing"
    return (f"{framework}/{'/'.join(cell)} is read on {protocol} on {dataset}, but its evaluation runs {runs}: "
            f"add {protocol} to evaluate.grids of its tables ({', '.join(grids)})")


def model_strategy_columns(columns: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """Column label -> (model, strategy) from params' ``"<model>:<strategy>"`` (an FL cell on the section's
    partition); raises ValueError naming a malformed or missing column."""
    if not columns:
        raise ValueError("columns (label -> '<model>:<strategy>') must be non-empty")
    parsed = {label: tuple(str(spec).split(":", 1)) for label, spec in columns.items()}
    bad = [label for label, spec in parsed.items() if len(spec) != 2 or not all(spec)]
    if bad:
        raise ValueError(f"columns {bad} must read '<model>:<strategy>'")
    return parsed  # type: ignore[return-value]


def check_protocols(names: Iterable[str]) -> None:
    """Every name a section's options give as a protocol must be one of the evaluation registry's: a
    misspelt name fails ``dssl validate`` here rather than leaving the section's cells "untestable"
    after the run."""
    unknown = sorted({name for name in names if name not in PROTOCOL_SPECS})
    if unknown:
        raise ValueError(f"unknown protocol(s) {unknown}; protocols: {', '.join(PROTOCOL_SPECS.names())}")


def known_protocols(protocol: str, protocols: Mapping[str, str] | None = None) -> dict[str, str]:
    """A section's ``protocol`` and its per-model ``protocols`` (model -> protocol), checked
    (``check_protocols``); returns ``protocols`` as a dict."""
    named = dict(protocols or {})
    check_protocols([protocol, *named.values()])
    return named


SECTIONS: Registry[type[ReportSection]] = Registry("report section")


def register_section(name: str) -> Callable[[type[ReportSection]], type[ReportSection]]:
    """Class decorator: make a section available to ``report.sections`` in params.yaml."""

    def register(cls: type[ReportSection]) -> type[ReportSection]:
        cls.name = name
        return SECTIONS.register(name)(cls)

    return register


def check_report_params(c: Checker) -> None:
    """``report.sections`` against the registry: known names, options each section accepts, no label that
    names a dataset the section's cells are not read on (a column "cifar100" of cells scored on digits), no
    pair of cells a claim compares seed by seed whose seed lists share no seed, and no trained cell read on a
    protocol its evaluation does not run (``evaluate.grids`` may leave one out)."""
    from dssl.data.datasets import DATASETS

    sections = (c.params.get("report") or {}).get("sections") or {}
    report_dataset, dataset_names = str((c.params.get("report") or {}).get("dataset", "")), sorted(DATASETS)
    for name, options in sections.items():
        path = f"report.sections.{name}"
        if name not in SECTIONS:
            c.add(path, "unknown report section", f"one of: {', '.join(sorted(SECTIONS))}")
            continue
        try:
            section = create_section(name, options if isinstance(options, dict) else None)
        except (TypeError, ValueError) as err:
            c.add(path, str(err))
            continue
        for problem in [*section.label_problems(report_dataset, dataset_names), *section.seed_problems(c.params),
                        *section.read_problems(c.params)]:
            c.add(path, problem)


def check_sections_or_raise(params: dict, source: str) -> None:
    """``check_report_params`` as one ParamsError (the report stage calls it before any work)."""
    checker = Checker(params, Path("."))
    check_report_params(checker)
    if checker.problems:
        raise ParamsError(source, checker.problems)


def create_section(name: str, options: Mapping[str, Any] | None = None) -> ReportSection:
    """A section by registry name with its params.yaml options; unknown options fail naming the allowed."""
    cls = SECTIONS[name]
    allowed = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    unknown = sorted(set(options or {}) - set(allowed))
    if unknown:
        raise TypeError(f"report section {name!r} has no option(s) {unknown}; its options: {allowed or 'none'}")
    return cls(**(options or {}))
