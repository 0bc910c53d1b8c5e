"""The comparison table: rows x columns of pretrained cells of one model under one framework, with one claim.

Paper A's Fig. 2b and Tables 2, 6-8 and paper B's tables are subclasses that set the claim. Rows and columns
are parsed by ``comparison_layout`` (a row names a strategy, a column a place, either may pin the other or
name another model or framework); row and column labels are the paper's own keys, so the paper's values print
beside ours. ``references`` are rows printed beside the others but left out of the claim (paper B's
centralised BYOL: an upper bound, not a competitor). Each table states one claim of the form "row R is above
every other row", checked per column by ``comparison_claim`` and gated on R's pretraining beating random init;
``comparison_text`` writes what each row ran.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Mapping

import pandas as pd

from dssl.reporting.claims import Finding, PretrainingGate
from dssl.reporting.results import accuracy_summary
from dssl.reporting.sections.base import FIGURES, ReportContext, ReportSection, check_protocols, unevaluated
from dssl.reporting.sections.comparison_claim import claimed_row_finding
from dssl.reporting.sections.comparison_layout import PLACE, CellSpec, cell_spec, column_places, select_cell
from dssl.reporting.sections.comparison_text import model_text, paper_table, read_on_text, strategy_text
from dssl.reporting.tables import CELL_NOTE, cell_name, format_summary, markdown_table


class StrategyComparison(ReportSection):
    """Rows (strategies) x columns (partitions or graphs) of one model; subclasses set the claim."""

    paper_key: ClassVar[str | None] = None       # key in paper_numbers.yaml (rows x columns)
    best_row: ClassVar[str] = ""                 # the row the paper finds best
    claim: ClassVar[str] = ""
    intro: ClassVar[str] = ""
    note: ClassVar[str] = ""                     # which definitions the rows use, where a paper and its code differ

    def __init__(self, model: str, rows: Mapping[str, Any], columns: Mapping[str, Any], framework: str = "fl",
                 protocol: str = "finetune", best: str | None = None, references: tuple[str, ...] | list[str] = (),
                 paper_scale_only: tuple[str, ...] | list[str] = (), dataset: str | None = None) -> None:
        """``best``: the label of the paper's best row when this build labels it differently (Table 2
        has a FedMAR row per backbone); ``references``: rows shown but not compared; ``paper_scale_only``:
        the paper's rows or columns this profile does not run (named in the report, so a reader sees what
        is missing and why). ``dataset``: the downstream dataset every cell is read on (default the report's
        ``report.dataset``); a column given as ``{place: <partition or graph>, dataset: <name>}`` is read on
        its own (Table 2's CIFAR-10, CIFAR-100 and ImageNet columns of one partition)."""
        if framework not in ("fl", "decl"):
            raise ValueError(f"framework must be one of fl, decl, got {framework!r}")
        if not rows or not columns:
            raise ValueError("rows (label -> strategy) and columns (label -> partition or graph) must be non-empty")
        check_protocols([protocol])
        self.model, self.framework, self.protocol, self.dataset = model, framework, protocol, dataset
        self.rows = dict(rows)
        self.columns, self.column_datasets = column_places(columns)
        if best is not None:
            self.best_row = best
        if self.best_row not in self.rows:
            raise ValueError(f"the claim's row {self.best_row!r} is not among the rows {sorted(self.rows)}")
        self.references, self.paper_scale_only = tuple(references), tuple(str(x) for x in paper_scale_only)
        unknown = (sorted(set(self.references) - set(self.rows))
                   + ([self.best_row] if self.best_row in self.references else []))
        if unknown:
            raise ValueError(f"references {unknown} must be rows other than the claim's row {self.best_row!r}")
        for row in self.rows:
            for column in self.columns:
                self.spec(row, column)   # every cell spec parses

    def spec(self, row: str, column: str) -> CellSpec | None:
        """(framework, model, strategy, place) of a cell (``comparison_layout.cell_spec``); None when the row
        skips the column."""
        return cell_spec(self.rows, self.columns, row, column, self.framework, self.model)

    def label_problems(self, report_dataset: str, dataset_names: Iterable[str]) -> list[str]:
        """Columns labelled with a dataset's name that their cells are not read on."""
        names = set(dataset_names)
        return [f"column {label!r} names a dataset, but its cells are read on "
                f"{read_on!r}: label it after what it reads (e.g. {read_on!r})"
                for label in self.columns if label in names
                and label != (read_on := self.column_datasets.get(label) or self.dataset or report_dataset)]

    def column_dataset(self, column: str, ctx: ReportContext) -> str:
        """The one downstream dataset a column's cells are read on: the column's, the section's, the report's."""
        return self.column_datasets.get(column) or self.dataset or ctx.dataset

    def data(self, ctx: ReportContext) -> pd.DataFrame:
        specs = {(row, column): spec for row in self.rows for column in self.columns
                 if (spec := self.spec(row, column)) is not None}
        read_on = {column: self.column_dataset(column, ctx) for column in self.columns}
        self._cells = {key: cell for key, spec in specs.items()
                       if not (cell := select_cell(ctx.results, spec, self.protocol, read_on[key[1]])).empty}
        return pd.DataFrame([{"row": row, "column": column, **dict(zip(("framework", "model", "strategy", "place"),
                                                                        specs[(row, column)])),
                              "dataset": read_on[column],
                              "cell": cell_name(cell.iloc[0]), "scheme": cell.iloc[0]["scheme"],
                              "alpha": cell.iloc[0]["alpha"], **accuracy_summary(cell)}
                             for (row, column), cell in self._cells.items()])

    def findings(self, data: pd.DataFrame, ctx: ReportContext) -> list[Finding]:
        gate = PretrainingGate(ctx.results)
        return [finding for column in self.columns if (finding := self.column_finding(column, gate)) is not None]

    def compared_rows(self, column: str) -> list[str]:
        """The rows the claimed row is paired with, seed by seed, in ``column``: every other row but the
        references."""
        return [row for row in self.rows if row != self.best_row and row not in self.references
                and self.spec(row, column) is not None]

    def seed_problems(self, params: dict) -> list[str]:
        """Rows the claim pairs with the claimed row in a column but whose cells share no seed with its cell
        (the claim could not be computed after the run); none where a seed list is malformed (reported where
        it is declared)."""
        from dssl.config.grids import cell_seeds

        def seeds(spec: CellSpec) -> set[int]:
            framework, model, strategy, place = spec   # a central cell has no place, a stand-alone no strategy
            return set(cell_seeds(params, framework, tuple(part for part in (model, place, strategy) if part)))

        problems = []
        for column in self.columns:
            claimed = self.spec(self.best_row, column)
            for row in self.compared_rows(column) if claimed is not None else []:
                try:
                    mine, theirs = seeds(claimed), seeds(self.spec(row, column))
                except (AttributeError, KeyError, TypeError, ValueError):
                    continue
                if not mine & theirs:
                    problems.append(f"column {column!r}: rows {self.best_row!r} (seeds {sorted(mine)}) and {row!r} "
                                    f"(seeds {sorted(theirs)}) share no seed, and the claim pairs them seed by "
                                    "seed: give their grids a common seed")
        return problems

    def read_problems(self, params: dict) -> list[str]:
        """Trained FL / DecL cells of the table whose evaluation does not run its protocol on the column's
        dataset (``base.unevaluated``)."""
        report_dataset = str((params.get("report") or {}).get("dataset", ""))
        problems = []
        for row in self.rows:
            for column in self.columns:
                spec = self.spec(row, column)
                if spec is None or spec[0] not in ("fl", "decl"):
                    continue
                framework, model, strategy, place = spec
                dataset = self.column_datasets.get(column) or self.dataset or report_dataset
                if why := unevaluated(params, framework, (model, place, strategy), dataset, self.protocol):
                    problems.append(f"row {row!r}, column {column!r}: {why}")
        return problems

    def column_finding(self, column: str, gate: PretrainingGate) -> Finding | None:
        """The claim in one column: the best row against every other row (None when a side is missing)."""
        best = self._cells.get((self.best_row, column))
        others = {row: cell for row in self.compared_rows(column)
                  if (cell := self._cells.get((row, column))) is not None}
        if best is None or not others:
            return None
        subject = f"{self.framework.upper()} {column}: {self.best_row} vs {', '.join(others)}"
        return claimed_row_finding(self.name, self.claim, subject, self.best_row, best, others, gate)

    def markdown(self, data: pd.DataFrame, findings: list[Finding], ctx: ReportContext) -> str:
        measured = pd.DataFrame({"row": data["row"], "column": data["column"], "cell": data["cell"],
                                 "accuracy (%)": [format_summary(r) for r in data.itertuples()]})
        parts = [f"![{self.title}]({FIGURES}/{self.name}.png)",
                 f"{self.intro} Model {self.model}, {self.framework.upper()}, scored with {self.protocol} on "
                 f"{read_on_text(data)}; "
                 f"{CELL_NOTE}. "
                 "Each row names its cell as framework/model/" + PLACE[self.framework] + "/strategy (central/<model>: "
                 "trained on the pooled data; local/<model>/<partition>: each client trained alone, scored as the "
                 "mean over clients)."
                 + (f" Reference rows, not part of the claim: {', '.join(self.references)}." if self.references else "")
                 + (f" Paper-scale only (not run in this profile): {', '.join(self.paper_scale_only)}."
                    if self.paper_scale_only else "")]
        parts += self.choices(data, ctx)
        parts += ["**Measured (this pipeline)**", markdown_table(measured, index=False)]
        paper = paper_table(ctx.paper, self.paper_key)
        if paper is not None:
            parts += ["**Paper A** (its setting; mean of 3 trials)", markdown_table(paper)]
        parts.append(f"**Claim check**: {self.claim} (paired by seed, per column)\n\n"
                     + ("\n".join(f.line() for f in findings)
                        or "- no column has the paper's best row and another row"))
        return "\n\n".join(parts)

    def choices(self, data: pd.DataFrame, ctx: ReportContext) -> list[str]:
        """Paragraphs saying which definition each row ran: every model and strategy of the cells as
        params.yaml configures them (strategy options with their defaults filled in, and the entry's
        ``train`` overrides). Sections whose rows depend on a choice between a paper's definition and its
        authors' code add their own sentence (``note``)."""
        models = dict.fromkeys(m for m in data["model"] if m in ctx.models)
        strategies = dict.fromkeys(s for s in data["strategy"] if s and s in ctx.strategies)
        if not models and not strategies:
            return [self.note] if self.note else []
        ran = [f"{m} = {model_text(ctx.models[m])}" for m in models]
        ran += [f"{s} = {strategy_text(s, ctx.strategies[s])}" for s in strategies]
        return [f"**What ran**: {'; '.join(ran)}." + (f" {self.note}" if self.note else "")]

    def figures(self, data: pd.DataFrame, ctx: ReportContext) -> dict[str, Callable[[Path], Path]]:
        """The table as a dot plot: per column, every row's mean with its 95 % seed interval."""
        from dssl.reporting.figures import dot_plot

        title = f"{self.title}\n{self.framework.upper()} {self.model}; * the paper's best row ({self.best_row})"
        note = ctx.note(self.scored(ctx)) + " · dots: mean, bars: 95 % seed interval"
        return {f"{self.name}.png": lambda path: dot_plot(data, path, self.best_row, title,
                                                          f"{self.protocol} top-1 accuracy (%)", note)}

    def scored(self, ctx: ReportContext) -> str:
        """How the table's cells were scored: its protocol on the downstream datasets of its cells."""
        datasets = ", ".join(dict.fromkeys(cell.iloc[0]["dataset"] for cell in self._cells.values())) or ctx.dataset
        return f"{self.protocol} on {datasets}"

    def empty_text(self) -> str:
        return (f"No {self.framework.upper()} {self.protocol} results of {self.model} for this table's cells "
                "in this build.")
