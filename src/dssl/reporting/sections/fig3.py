"""Paper A's Fig. 3: the feature spaces of two stand-alone clients and the FL global model, per method.

Paper A (appendix A.3.1, Fig. 3): one column per D-SSL method (SimSiam, MAE and MAR on a ViT), one row per
model (client 1 alone, client 100 alone, the FL global model), each panel the model's features of test
images projected to 20 dimensions by PCA and embedded in 2-D (UMAP), coloured by class. The paper reads it
qualitatively (MIM's local features lie closer to each other and to the global ones than CL's) and gives
no numbers; Table 5 (section ``table5``) is the quantitative check. The ``features`` stages write the
embeddings (``pipeline/features.py``: t-SNE after the same PCA); this section draws them and checks no claim.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping

import pandas as pd

from dssl.artifacts import ArtifactError, read_json
from dssl.reporting.claims import Finding
from dssl.reporting.sections.base import (
    FIGURES, ReportContext, ReportSection, model_strategy_columns, register_section,
)
from dssl.reporting.tables import markdown_table

EMBEDDING_COLUMNS = ("model", "index", "label", "x", "y")


@register_section("fig3")
class Fig3(ReportSection):
    """``columns``: label -> ``"<model>:<strategy>"`` (an FL cell on ``partition`` that ``features.grids``
    lists), in the paper's column order."""

    title = "Fig. 3: feature spaces of local and global models"

    def __init__(self, columns: Mapping[str, str], partition: str = "fl-label") -> None:
        self.columns = model_strategy_columns(columns)
        self.partition = partition

    def _folder(self, ctx: ReportContext, label: str) -> Path | None:
        if ctx.features is None:
            return None
        model, strategy = self.columns[label]
        folder = Path(ctx.features) / model / self.partition / strategy
        return folder if (folder / "embedding.csv").is_file() else None

    def data(self, ctx: ReportContext) -> pd.DataFrame:
        frames = []
        self._records: dict[str, dict] = {}
        for label in self.columns:
            folder = self._folder(ctx, label)
            if folder is None:
                continue
            self._records[label] = read_json(folder / "features.json", ("stage", "seed", "dataset", "images", "models"))
            embedding = pd.read_csv(folder / "embedding.csv")
            missing = sorted(set(EMBEDDING_COLUMNS) - set(embedding.columns))
            if missing:
                raise ArtifactError(folder / "embedding.csv", f"missing columns {missing}")
            frames.append(embedding.assign(column=label))
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def markdown(self, data: pd.DataFrame, findings: list[Finding], ctx: ReportContext) -> str:
        cells = pd.DataFrame([{"column": label, "global model": f"fl/{m}/{self.partition}/{s}",
                               "local models": f"local/{m}/{self.partition}, " + ", ".join(
                                   r for r in self._records[label]["models"] if r != "global"),
                               "seed": self._records[label]["seed"],
                               "test images": f"{self._records[label]['images']} of {self._records[label]['dataset']}",
                               "stage": self._records[label]["stage"]}
                              for label, (m, s) in self.columns.items() if label in self._records])
        absent = [label for label in self.columns if label not in self._records]
        return "\n\n".join([
            f"![Fig. 3: 2-D embeddings of test features]({FIGURES}/fig3.png)",
            "Each panel embeds one model's encoder features of the same test images: PCA to 20 dimensions, then "
            "a 2-D t-SNE (the paper uses UMAP, which is not among this project's packages), coloured by class. "
            "Paper A reads the figure qualitatively (MIM's local features lie closer to each other and to the "
            "global ones than CL's) and prints no numbers, so no claim is checked here; Table 5 measures the "
            "same models' weight distances.",
            markdown_table(cells, index=False),
            *([f"No features stage output for: {', '.join(absent)}."] if absent else [])])

    def figures(self, data: pd.DataFrame, ctx: ReportContext) -> dict[str, Callable[[Path], Path]]:
        from dssl.reporting.figures import feature_grid, footer

        first = next(iter(self._records.values()))
        title = (f"Fig. 3: test features (PCA 20, t-SNE 2-D) of stand-alone clients and the FL global model, "
                 f"{self.partition}")
        note = footer(ctx.profile, [first["seed"]], f"test split of {first['dataset']}") + " (of the pretraining)"
        return {"fig3.png": lambda path: feature_grid(data, path, title, note)}

    def csv(self, data: pd.DataFrame) -> None:  # type: ignore[override]
        return None   # the features stages write the embeddings (reports/features/)

    def empty_text(self) -> str:
        return f"No features stage output on {self.partition} in this build (params 'features')."
