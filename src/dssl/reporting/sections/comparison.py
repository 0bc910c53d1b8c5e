"""Tables that compare strategies of one model: paper A's Fig. 2b and Tables 6-8.

A comparison table is rows x columns of pretrained cells of one model under one framework. A row names a
strategy (a named entry of params.yaml's ``strategies``), a column a place (a partition for FL, a graph
for DecL); either may pin the other part with ``"<strategy>@<place>"`` (Table 6's FL reference row is
``decl-uniform@complete``), a row may name another model with ``"<model>:<strategy>"`` (paper B's tables
compare methods), a row may name a cell of another framework with ``"central/<model>"`` (the model trained
on the pooled data) or ``"local/<model>"`` (its stand-alone clients on the column's partition, scored as
their mean), and a row may give one spec per column (Table 7, whose columns are values of gamma).
``references`` are rows printed beside the others but left out of the claim (paper B's centralised BYOL:
an upper bound, not a competitor). Row and column labels are the paper's own keys, so the paper's values
print beside ours. Each table states one claim of the form "row R is above every other row", checked per
column on paired per-seed differences (supported when R beats every other row beyond its interval,
contradicted when some row beats R beyond its interval, otherwise inconclusive), and untestable where R's
pretraining does not beat random init: R is the arm the claim needs (``gated_rows``). The other rows run the
same schedule and may fall below random init (an ablated model collapsing, a baseline learning less): that is
an outcome the claim predicts, not a reason to call it untestable. A subclass whose claim needs every row
sets ``gated_rows = ALL_ROWS``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Mapping

import pandas as pd

from dssl.config.strategies import declared_strategies
from dssl.reporting.claims import UNTESTABLE, Finding, PretrainingGate, compare
from dssl.reporting.results import accuracy_summary
from dssl.reporting.sections.base import FIGURES, ReportContext, ReportSection, check_protocols, register_section
from dssl.reporting.stats import CONTRADICTED, INCONCLUSIVE, SUPPORTED
from dssl.reporting.tables import CELL_NOTE, cell_name, compared_cells, format_summary, markdown_table
from dssl.topology.mixing import DEFAULT_RULE

PLACE = {"fl": "partition", "decl": "graph", "local": "partition"}
CLAIMED_ROW, ALL_ROWS = "claimed row", "all rows"   # which rows a comparison's gate reads
OTHER_FRAMEWORKS = ("central", "local")   # row specs "<framework>/<model>"
CellSpec = tuple[str, str, str, str]   # (framework, model, strategy or "", place or "")


def column_places(columns: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """(label -> place, label -> dataset) of a section's ``columns``: a column is a place (``"fl-label"``,
    ``"<strategy>@<place>"``) or ``{place: ..., dataset: ...}``; raises ValueError naming a malformed one."""
    places, datasets = {}, {}
    for label, spec in columns.items():
        if isinstance(spec, Mapping):
            unknown = sorted(set(spec) - {"place", "dataset"})
            if unknown or not isinstance(spec.get("place"), str) or not isinstance(spec.get("dataset", ""), str):
                raise ValueError(f"column {label!r} must be a place or {{place: <partition or graph>, "
                                 f"dataset: <downstream dataset>}}, got {dict(spec)}")
            places[label] = spec["place"]
            if spec.get("dataset"):
                datasets[label] = spec["dataset"]
        elif isinstance(spec, str) and spec:
            places[label] = spec
        else:
            raise ValueError(f"column {label!r} must name a partition or graph, got {spec!r}")
    return places, datasets


def read_on_text(data: pd.DataFrame) -> str:
    """The downstream dataset the cells are read on, or each column's where they differ (every cell and claim
    reads one dataset)."""
    by_column = dict(zip(data["column"], data["dataset"]))
    datasets = list(dict.fromkeys(by_column.values()))
    if len(datasets) == 1:
        return datasets[0]
    return "one dataset per column (" + ", ".join(f"{column}: {d}" for column, d in by_column.items()) + ")"


def model_text(spec: Mapping[str, Any]) -> str:
    """``byol on cnn_small (predictor=False)``: a models entry as params.yaml states it."""
    hparams = ", ".join(f"{k}={v}" for k, v in (spec.get("hparams") or {}).items())
    return f"{spec.get('method')} on {spec.get('backbone')}" + (f" ({hparams})" if hparams else "")


def strategy_text(spec: Mapping[str, Any]) -> str:
    """``fedema (aggregation=uniform, divergence=paper, ...; train: rounds=200)``: a strategies entry with every
    option it runs with (the strategy's declared defaults filled in) and its training overrides."""
    declared = declared_strategies().get(spec.get("name"))
    options = (declared.resolved(dict(spec)) if declared
               else {k: v for k, v in spec.items() if k not in ("name", "train")})
    options.update({k: spec[k] for k in ("mixing", "order") if k in spec})
    text = ", ".join(f"{k}={v}" for k, v in options.items())
    train = spec.get("train") or {}
    if train:
        text += "; train: " + ", ".join(f"{k}={_inline(v)}" for k, v in train.items())
    return f"{spec.get('name')} ({text})"


def _inline(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}"
    return str(value)


class StrategyComparison(ReportSection):
    """Rows (strategies) x columns (partitions or graphs) of one model; subclasses set the claim."""

    paper_key: ClassVar[str | None] = None       # key in paper_numbers.yaml (rows x columns)
    best_row: ClassVar[str] = ""                 # the row the paper finds best
    claim: ClassVar[str] = ""
    intro: ClassVar[str] = ""
    # The rows whose pretraining must beat random init for the claim to be tested: the claim's row (the one
    # it says is higher), or every compared row.
    gated_rows: ClassVar[str] = CLAIMED_ROW
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
        """(framework, model, strategy, place) of a cell: a row's parts win over the column's; None when the
        row skips the column. Central cells have no strategy or place, stand-alone cells no strategy."""
        row_spec = self.rows[row]
        if isinstance(row_spec, Mapping):
            row_spec = row_spec.get(column)
            if row_spec is None:
                return None
        column_spec = self.columns[column]
        column_strategy, _, column_place = column_spec.rpartition("@") if "@" in column_spec else ("", "", column_spec)
        if "/" in str(row_spec):
            return self._other_framework(str(row_spec), column_place, row, column)
        model, _, row_spec = str(row_spec).rpartition(":")
        row_strategy, _, row_place = row_spec.partition("@")
        strategy, place = row_strategy or column_strategy, row_place or column_place
        if not strategy or not place:
            raise ValueError(f"cell ({row}, {column}) names no {'strategy' if not strategy else 'place'}")
        return self.framework, model or self.model, strategy, place

    @staticmethod
    def _other_framework(row_spec: str, column_place: str, row: str, column: str) -> CellSpec:
        """``central/<model>`` or ``local/<model>[@<partition>]``."""
        framework, _, rest = row_spec.partition("/")
        model, _, place = rest.partition("@")
        if framework not in OTHER_FRAMEWORKS or not model or ":" in model or (framework == "central" and place):
            raise ValueError(f"cell ({row}, {column}): {row_spec!r} is not 'central/<model>' or 'local/<model>'")
        return framework, model, "", (place or column_place) if framework == "local" else ""

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

    def _cell(self, results: pd.DataFrame, framework: str, model: str, strategy: str, place: str,
              dataset: str) -> pd.DataFrame:
        chosen = ((results["framework"] == framework) & (results["model"] == model)
                  & (results["protocol"] == self.protocol) & (results["dataset"] == dataset))
        if strategy:
            chosen &= results["strategy"] == strategy
        if place:
            chosen &= results[PLACE[framework]] == place
        return results[chosen]

    def data(self, ctx: ReportContext) -> pd.DataFrame:
        specs = {(row, column): spec for row in self.rows for column in self.columns
                 if (spec := self.spec(row, column)) is not None}
        read_on = {column: self.column_dataset(column, ctx) for column in self.columns}
        self._cells = {key: cell for key, spec in specs.items()
                       if not (cell := self._cell(ctx.results, *spec, read_on[key[1]])).empty}
        return pd.DataFrame([{"row": row, "column": column, **dict(zip(("framework", "model", "strategy", "place"),
                                                                        specs[(row, column)])),
                              "dataset": read_on[column],
                              "cell": cell_name(cell.iloc[0]), "scheme": cell.iloc[0]["scheme"],
                              "alpha": cell.iloc[0]["alpha"], **accuracy_summary(cell)}
                             for (row, column), cell in self._cells.items()])

    def findings(self, data: pd.DataFrame, ctx: ReportContext) -> list[Finding]:
        gate = PretrainingGate(ctx.results)
        return [finding for column in self.columns if (finding := self.column_finding(column, gate)) is not None]

    def column_finding(self, column: str, gate: PretrainingGate) -> Finding | None:
        """The claim in one column: the best row against every other row (None when a side is missing)."""
        best = self._cells.get((self.best_row, column))
        others = {row: cell for (row, col), cell in self._cells.items()
                  if col == column and row != self.best_row and row not in self.references}
        if best is None or not others:
            return None
        subject = f"{self.framework.upper()} {column}: {self.best_row} vs {', '.join(others)}"
        named = compared_cells(best, *others.values())
        arms = {self.best_row: best, **(others if self.gated_rows == ALL_ROWS else {})}
        blocked = gate.untestable(arms)
        if blocked:
            return Finding(self.name, self.claim, subject, UNTESTABLE, None, blocked, cells=named, gated=tuple(arms))
        compared = [(row, *compare(best, cell, +1)) for row, cell in others.items()]
        outcomes = [outcome for _, _, outcome in compared]
        overall = (CONTRADICTED if CONTRADICTED in outcomes
                   else SUPPORTED if all(o == SUPPORTED for o in outcomes) else INCONCLUSIVE)
        row, diff, _ = min(compared, key=lambda c: c[1].mean)
        return Finding(self.name, self.claim, subject, overall, diff, f"{self.best_row} - {row} (the closest row)",
                       cells=named, gated=tuple(arms))

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
        paper = self._paper(ctx.paper)
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
        ran += [f"{s} = {strategy_text(ctx.strategies[s])}" for s in strategies]
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

    def _paper(self, paper: Mapping[str, Any]) -> pd.DataFrame | None:
        table = paper.get(self.paper_key) if self.paper_key else None
        if not table:
            return None
        rows = {row: dict(zip(table["columns"], values)) for row, values in table["rows"].items()}
        return pd.DataFrame({column: [f"{rows[r][column]:.2f}" if column in rows.get(r, {}) else ""
                                      for r in rows] for column in table["columns"]},
                            index=pd.Index(list(rows), name="row"))

    def empty_text(self) -> str:
        return (f"No {self.framework.upper()} {self.protocol} results of {self.model} for this table's cells "
                "in this build.")


@register_section("fig2b")
class Fig2b(StrategyComparison):
    """Paper A Fig. 2b: MAR (MAE + gamma * A-MMD) against plain MAE across label skew alpha."""

    title = "Fig. 2b: MAR against MAE across label skew"
    best_row = "MAR"
    claim = "MAR is more accurate than MAE under label non-IID data (paper A, Fig. 2b)"
    intro = ("Paper A's Fig. 2b plots MAR and MAE over alpha (1 to 0.001) in FL and DecL and gives its values "
             "only in the figure. Rows must be labelled MAE and MAR; columns are label-skew partitions.")

    def __init__(self, model: str, rows: Mapping[str, Any], columns: Mapping[str, Any], framework: str = "fl",
                 protocol: str = "finetune", dataset: str | None = None) -> None:
        if set(rows) != {"MAE", "MAR"}:
            raise ValueError(f"fig2b rows must be exactly MAE and MAR, got {sorted(rows)}")
        super().__init__(model, rows, columns, framework, protocol, dataset=dataset)

    def figures(self, data: pd.DataFrame, ctx: ReportContext) -> dict[str, Callable[[Path], Path]]:
        """Accuracy against the label skew alpha of each column's partition, MAE and MAR as lines."""
        from dssl.reporting.figures import IID_ALPHA, alpha_lines

        points = data.assign(alpha=[IID_ALPHA if scheme == "iid" else alpha
                                    for scheme, alpha in zip(data["scheme"], data["alpha"])])
        points = points[points["alpha"].notna()]
        if points.empty:
            return {}
        places = ", ".join(dict.fromkeys(data["place"]))
        title = (f"{self.title} ({self.framework.upper()})\n{self.framework}/{self.model}/<{PLACE[self.framework]}>/"
                 f"<strategy>: MAE = {self.rows['MAE']}, MAR = {self.rows['MAR']}; {places}")
        note = ctx.note(self.scored(ctx)) + " · bars: 95 % seed interval"
        return {f"{self.name}.png": lambda path: alpha_lines(points, path, title, f"{self.protocol} top-1 accuracy (%)",
                                                             note)}


@register_section("fig2b_decl")
class Fig2bDecl(Fig2b):
    """Fig. 2b's DecL panel (columns are graphs on label-skew partitions)."""

    title = "Fig. 2b (DecL): DecMAR against MAE across label skew"

    def __init__(self, model: str, rows: Mapping[str, Any], columns: Mapping[str, Any], framework: str = "decl",
                 protocol: str = "finetune", dataset: str | None = None) -> None:
        super().__init__(model, rows, columns, framework, protocol, dataset)


@register_section("table6")
class Table6(StrategyComparison):
    """Paper A Table 6: DecL consensus rules at two connectivities, with the FL reference."""

    title = "Table 6: DecL consensus rules"
    paper_key = "table6_consensus"
    best_row = "fl_reference"
    claim = "FL is above DecL under every consensus rule (paper A, Table 6)"
    intro = ("Paper A's Table 6 trains decentralized MIM with four consensus rules; its values differ by at most "
             "1.4 pp between rules, and FL is above all of them.")

    def __init__(self, model: str, rows: Mapping[str, Any], columns: Mapping[str, Any], framework: str = "decl",
                 protocol: str = "finetune", best: str | None = None, dataset: str | None = None) -> None:
        super().__init__(model, rows, columns, framework, protocol, best, dataset=dataset)

    def choices(self, data: pd.DataFrame, ctx: ReportContext) -> list[str]:
        """Adds, per graph of the table, its degrees and each rule's distance from uniform mixing: on a graph
        whose clients all have the same |A_i| the rules' matrices coincide and the table cannot separate them."""
        return super().choices(data, ctx) + [text for graph in dict.fromkeys(data["place"])
                                             if (text := self.mixing_text(graph, data, ctx))]

    def mixing_text(self, graph: str, data: pd.DataFrame, ctx: ReportContext) -> str:
        stats = ctx.graphs.get(graph)
        if stats is None:
            return ""
        rules = {row: (ctx.strategies.get(strategy) or {}).get("mixing", DEFAULT_RULE)
                 for row, strategy, place in zip(data["row"], data["strategy"], data["place"]) if place == graph}
        distances = [f"{row} ({rule}) {stats[f'distance_to_uniform_{rule}']:.3g}" for row, rule in rules.items()
                     if f"distance_to_uniform_{rule}" in stats]
        same = [row for row, rule in rules.items() if stats.get(f"distance_to_uniform_{rule}", 1.0) < 1e-9]
        text = (f"**Mixing on {graph}**: |A_i| from {stats['connectivity_min']:.0f} to {stats['connectivity_max']:.0f} "
                f"(mean {stats['connectivity_mean']:.2f}); each rule's largest weight difference from uniform mixing "
                f"(1/|A_i|), max_ij |W_ij - U_ij|: " + ", ".join(distances) + ".")
        if same:
            text += (f" {', '.join(same)} mix exactly as uniform weights on this graph: any accuracy gap between "
                     "them is seed and hardware noise.")
        return text


@register_section("table7")
class Table7(StrategyComparison):
    """Paper A Table 7: the alignment metric of MAR's regulariser."""

    title = "Table 7: alignment metric of the MAR loss"
    paper_key = "table7_alignment_metric"
    best_row = "ammd_mean_sigma"
    claim = "A-MMD with the mean-distance bandwidth is the best alignment metric (paper A, Table 7)"
    intro = "Paper A's Table 7 replaces A-MMD by other alignment metrics at two values of gamma."


@register_section("table8")
class Table8(StrategyComparison):
    """Paper A Table 8: constant gamma against the cosine schedule of MAR's weight."""

    title = "Table 8: gamma schedule of the MAR loss"
    paper_key = "table8_gamma_schedule"
    best_row = "cosine_0.1_to_0.001"
    claim = "the cosine gamma schedule beats every constant gamma (paper A, Table 8)"
    intro = ("Paper A's Table 8 compares constant weights gamma of the A-MMD term with its cosine schedule "
             "(gamma 0 = MAE).")


@register_section("table2")
class Table2(StrategyComparison):
    """Paper A Table 2: MAR against the federated SSL baselines (rows labelled with the paper's keys)."""

    note = ("FedU's threshold and FedEMA's constant lambda are read on the norm paper B's code tuned them on: "
            "`divergence: paper` is its ||W_g - W_k|| in that code's mean of per-kernel L2 norms over the encoder's "
            "convolutions (`paper_flat`: one flattened norm, several times larger; `code`: the code's own drift "
            "during the previous local training). A FedEMA client that skipped the previous round restarts from "
            "the global model (`skipped: restart`, paper B's code under client sampling; `blend` blends its stale "
            "model). A baseline whose strategy entry carries `train.optimizer` trains with its authors' recipe.")
    title = "Table 2: FedMAR against federated SSL baselines"
    paper_key = "table2_sota"
    best_row = "fedmar_r18"
    claim = "FedMAR is more accurate than every federated SSL baseline (paper A, Table 2)"
    intro = ("Paper A's Table 2 compares FedMAR with FedU, FedEMA, Orchestra, FeatARC, L-DAWA and FedU2 "
             "(100 clients, alpha 0.1); label rows with its keys (e.g. fedmar_r18, fedema_r18) to print its values.")

    def markdown(self, data: pd.DataFrame, findings: list[Finding], ctx: ReportContext) -> str:
        sizes = self.sizes(data, ctx)
        text = super().markdown(data, findings, ctx)
        if sizes.empty:
            return text
        return (f"{text}\n\n**Model sizes (this pipeline)**, millions of parameters: the whole pretrained model "
                "(encoder, heads, predictor, target networks: what the paper's Params column counts) and the "
                "encoder the protocols evaluate.\n\n" + markdown_table(sizes))

    def sizes(self, data: pd.DataFrame, ctx: ReportContext) -> pd.DataFrame:
        """Per row: its model and parameter counts (M), read from the evaluation results."""
        results, rows = ctx.results, []
        for row, framework, model in dict.fromkeys(zip(data["row"], data["framework"], data["model"])):
            runs = results[(results["framework"] == framework) & (results["model"] == model)]
            counts = {key: next((float(v) for v in runs[key] if v is not None and v == v), None)
                      for key in ("method_parameters", "encoder_parameters")}
            if counts["method_parameters"] is None and counts["encoder_parameters"] is None:
                continue
            rows.append({"row": row, "model": model, **{f"{k.split('_')[0]} (M)": "" if v is None else f"{v / 1e6:.3f}"
                                                         for k, v in counts.items()}})
        return pd.DataFrame(rows).set_index("row") if rows else pd.DataFrame()


@register_section("fedssl_methods")
class FedSSLMethods(StrategyComparison):
    """Paper B's generalised methods: FedSimCLR, FedMoCo, FedBYOL, FedSimSiam under IID and non-IID data."""

    note = ("MoCo's defaults are its own papers' definition (one loss direction, v2's head without BN, key "
            "encoder and queue kept per client across rounds); paper B's code is `symmetric`, `head_bn`, "
            "`reset_key_encoder`, `reset_queue` and, for v1, `jitter_strength: 0.5` with a constant learning rate: "
            "a row runs what its model entry lists above.")
    title = "Paper B: generalised FedSSL methods"
    best_row = "FedBYOL"
    claim = "FedBYOL is the best of the generalised FedSSL methods (paper B)"
    intro = ("Paper B generalises four SSL methods to FL (upload and average the online network) and finds FedBYOL "
             "the best and FedSimSiam the worst; its cells were not recoverable, so only the ordering is checked.")


@register_section("fedema")
class FedEMATable(StrategyComparison):
    """Paper B's linear evaluation: FedEMA against stand-alone training, FedBYOL and FedU (centralised BYOL
    as a reference row where a profile runs it)."""

    note = ("FedU's threshold and FedEMA's constant lambda are read on the norm paper B's code tuned them on: "
            "`divergence: paper` is its ||W_g - W_k|| in that code's mean of per-kernel L2 norms over the encoder's "
            "convolutions (`paper_flat`: one flattened norm, several times larger; `code`: the code's own drift "
            "during the previous local training). Paper B trains every client in every round, so `skipped` never "
            "applies here.")
    title = "Paper B: FedEMA against stand-alone training, FedBYOL and FedU"
    best_row = "FedEMA"
    claim = ("FedEMA outperforms the other rows: stand-alone training, FedBYOL, FedU "
             "(paper B: by 3-4 % in linear evaluation)")
    intro = ("Paper B reports FedEMA at 83.34 % linear accuracy on CIFAR-10 non-IID, 3-4 % above the existing methods; "
             "its stand-alone row trains and evaluates each client on its own (here: their mean).")


@register_section("fedema_non_iid_level")
class FedEMANonIIDLevel(FedEMATable):
    """Paper B's non-IID level: FedEMA against FedBYOL and FedU as the classes per client vary (columns)."""

    title = "Paper B: FedEMA across non-IID levels (classes per client)"
    claim = "FedEMA outperforms FedBYOL and FedU at every non-IID level (paper B)"
    intro = ("Paper B varies how many whole classes each of its 5 clients holds; columns are classes per client "
             "(all of them: every client holds a fifth of every class).")


@register_section("fedssl_predictor")
class FedSSLPredictor(StrategyComparison):
    """Paper B's ablation: the predictor is necessary (without it FedSimSiam and FedBYOL collapse)."""

    title = "Paper B ablation: the predictor"
    best_row = "with predictor"
    claim = "the predictor is necessary: with it accuracy is higher (paper B)"
    intro = "Paper B finds that without a predictor FedSimSiam and FedBYOL collapse."


@register_section("fedssl_stop_gradient")
class FedSSLStopGradient(StrategyComparison):
    """Paper B's ablation: stop-gradient is necessary for FedSimSiam, not for FedBYOL.

    Two claims: in the columns of ``works_without`` (BYOL: its EMA target keeps it from collapsing) the
    model trained without stop-gradient still beats its random-init backbone ("works"), paired by seed
    and gated on the model with stop-gradient beating it too; in the other columns (SimSiam) the row
    with stop-gradient is the more accurate.
    """

    note = ("Without stop-gradient follows SimSiam's definition: the loss is differentiated through the target "
            "branch, and BYOL's target, which the gradient reaches, is stepped by the optimiser "
            "(`target_optimized: true`, the default). Paper B's code keeps the target out of its optimiser "
            "(`target_optimized: false`, with the strategy's `first_round_target: online`), which equals the "
            "stop-gradient run after a client's first round.")
    title = "Paper B ablation: stop-gradient"
    best_row = "with stop-gradient"
    claim = "stop-gradient is necessary for FedSimSiam: with it accuracy is higher (paper B)"
    claim_works = "FedBYOL works without stop-gradient: it beats the random-init backbone (paper B)"
    intro = "Paper B finds stop-gradient not always necessary: FedBYOL works without it, FedSimSiam does not."

    def __init__(self, model: str, rows: Mapping[str, Any], columns: Mapping[str, Any], framework: str = "fl",
                 protocol: str = "finetune", works_without: tuple[str, ...] | list[str] = ("BYOL",),
                 dataset: str | None = None) -> None:
        super().__init__(model, rows, columns, framework, protocol, dataset=dataset)
        unknown = sorted(set(works_without) - set(self.columns))
        if unknown:
            raise ValueError(f"works_without names columns {unknown} that are not among {sorted(self.columns)}")
        without = [row for row in self.rows if row != self.best_row]
        if len(without) != 1:
            raise ValueError(f"fedssl_stop_gradient needs two rows, {self.best_row!r} and one without, "
                             f"got {sorted(rows)}")
        self.works_without, self.without_row = tuple(works_without), without[0]

    def column_finding(self, column: str, gate: PretrainingGate) -> Finding | None:
        if column not in self.works_without:
            return super().column_finding(column, gate)
        with_sg, without_sg = self._cells.get((self.best_row, column)), self._cells.get((self.without_row, column))
        if with_sg is None or without_sg is None:
            return None
        subject = f"{self.framework.upper()} {column}: {self.without_row} vs random init"
        baseline = gate.baseline(without_sg)
        named = compared_cells(without_sg, baseline)
        gated = (self.best_row,)
        blocked = gate.untestable({self.best_row: with_sg})
        if blocked:
            return Finding(self.name, self.claim_works, subject, UNTESTABLE, None, blocked, cells=named, gated=gated)
        if baseline.empty:
            return Finding(self.name, self.claim_works, subject, UNTESTABLE, None, gate.check(without_sg).reason,
                           cells=named, gated=gated)
        diff, outcome = compare(without_sg, baseline, +1)
        return Finding(self.name, self.claim_works, subject, outcome, diff, f"{self.without_row} - random init",
                       cells=named, gated=gated)

    def markdown(self, data: pd.DataFrame, findings: list[Finding], ctx: ReportContext) -> str:
        return super().markdown(data, findings, ctx).replace(
            f"**Claim check**: {self.claim}", f"**Claim check**: {self.claim}; {self.claim_works}")


@register_section("fedssl_ema")
class FedSSLEma(StrategyComparison):
    """Paper B's ablation: an EMA target network helps."""

    note = ("Without EMA the target is the online network itself (`ema_target: false`, BYOL's tau = 0); "
            "paper B's code freezes the target instead (`momentum: 1.0` with the strategy's "
            "`first_round_target: online`).")
    title = "Paper B ablation: the EMA target"
    best_row = "with EMA"
    claim = "an EMA target network helps (paper B)"
    intro = "Paper B finds that an EMA target improves the generalised methods."


@register_section("fedema_lambda")
class FedEMALambda(ReportSection):
    """Paper B's lambda sweep: FedEMA with a constant lambda, accuracy against lambda (a figure).

    ``points``: lambda (as written in params.yaml) -> the strategy entry that runs FedEMA with it, on
    ``model`` and ``partition``. Paper B shows the sweep as a figure without printed values and states no
    ordering to check, so the section draws the measured curve and checks no claim.
    """

    title = "Paper B: FedEMA's accuracy against a constant lambda"

    def __init__(self, model: str, partition: str, points: Mapping[str, str], protocol: str = "linear_probe",
                 framework: str = "fl", dataset: str | None = None) -> None:
        try:
            self.points = {float(value): str(strategy) for value, strategy in points.items()}
        except (TypeError, ValueError) as err:
            raise ValueError(f"points must map lambda values to strategy entries, got {dict(points)}") from err
        if len(self.points) < 2:
            raise ValueError("a sweep needs at least two lambda values")
        check_protocols([protocol])
        self.model, self.partition, self.protocol, self.framework = model, partition, protocol, framework
        self.dataset = dataset   # the one downstream dataset the sweep is read on (default the report's)

    def data(self, ctx: ReportContext) -> pd.DataFrame:
        results = ctx.results
        rows = []
        for value, strategy in self.points.items():
            cell = results[(results["framework"] == self.framework) & (results["model"] == self.model)
                           & (results["strategy"] == strategy) & (results["partition"] == self.partition)
                           & (results["protocol"] == self.protocol)
                           & (results["dataset"] == (self.dataset or ctx.dataset))]
            if not cell.empty:
                rows.append({"x": value, "strategy": strategy, "cell": cell_name(cell.iloc[0]),
                             "dataset": cell.iloc[0]["dataset"], **accuracy_summary(cell)})
        return pd.DataFrame(rows)

    def markdown(self, data: pd.DataFrame, findings: list[Finding], ctx: ReportContext) -> str:
        table = pd.DataFrame({"lambda": data["x"], "cell": data["cell"],
                              "accuracy (%)": [format_summary(r) for r in data.itertuples()]})
        ran = "; ".join(f"{strategy} = {strategy_text(ctx.strategies[strategy])}" for strategy in data["strategy"]
                        if strategy in ctx.strategies)
        return (f"![lambda sweep]({FIGURES}/fedema_lambda.png)\n\n"
                f"Model {self.model} on {self.partition}, scored with {self.protocol}; {CELL_NOTE}. Paper B draws "
                "this sweep without printed values and states no ordering, so no claim is checked here. Lambda "
                "multiplies the divergence each strategy runs with (paper B tuned 0.4-1.6 on its code's per-kernel "
                "norm, `divergence: paper`)" + (f"; what ran: {ran}." if ran else ".") + "\n\n"
                + markdown_table(table, index=False))

    def figures(self, data: pd.DataFrame, ctx: ReportContext) -> dict[str, Callable[[Path], Path]]:
        from dssl.reporting.figures import sweep_figure

        title = f"Paper B: FedEMA with a constant lambda ({self.framework}/{self.model}/{self.partition}/<strategy>)"
        datasets = ", ".join(dict.fromkeys(data["dataset"]))
        note = ctx.note(f"{self.protocol} on {datasets}") + " · bars: 95 % seed interval"
        return {"fedema_lambda.png": lambda path: sweep_figure(data, path, "lambda", f"{self.protocol} accuracy (%)",
                                                               title, note)}
