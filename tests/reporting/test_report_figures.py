"""The report on constructed results: its head (what ran, the verdict counts, the claims overview figure
first), every figure (a PNG that names its profile, protocol and seeds), complete cell names in every row."""

from __future__ import annotations

import pandas as pd
import pytest
from PIL import Image

from dssl.reporting.claims import Finding
from dssl.reporting.readme import claims_forest, untestable_reason
from dssl.reporting.stats import Interval

from report_helpers import build_report


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    return build_report(tmp_path_factory.mktemp("report"))


def figure_notes(folder) -> dict[str, str]:
    """Each figure's footer, which the PNG carries as its Description."""
    return {path.name: Image.open(path).text.get("Description", "") for path in sorted(folder.glob("*.png"))}


def test_every_section_figure_is_drawn_and_names_profile_protocol_and_seeds(reports):
    notes = figure_notes(reports / "figures" / "report")
    assert set(notes) == {"claims.png", "pretraining_gain.png", "table1.png", "fig2a.png", "fig2b.png", "table8.png",
                          "fig3.png"}
    for name, note in notes.items():
        assert note.startswith("profile embedded"), name
        assert "seeds 0, 1, 2" in note or (name == "fig3.png" and "seed 0 (of the pretraining)" in note), (name, note)
    assert "finetune on digits" in notes["table1.png"] and "finetune on digits" in notes["table8.png"]
    for path in (reports / "figures" / "report").glob("*.png"):
        width, height = Image.open(path).size
        assert width > 300 and height > 150, path.name


def test_the_report_opens_with_what_ran_the_verdict_counts_and_the_claims_figure(reports):
    text = (reports / "README.md").read_text()
    head = text[:text.index("\n## ", text.index("## Summary") + 1)]
    assert head.startswith("# ") and "## Summary" in head
    assert "**What ran:** profile **embedded**; pretraining on digits at 16 px; scored on Digits; seeds 0, 1, 2; " \
           "12 stages, 30 s inside stages, 33 s from the first stage's start to the last one's end" in head
    claims = pd.read_csv(reports / "sections" / "claims.csv")
    checked = claims[claims["section"] != "pretraining_gain"]
    counts = checked["verdict"].value_counts()
    assert f"**{len(checked)} claims of the papers checked: {counts.get('supported', 0)} supported, " in head
    assert head.index("claims of the papers checked") < head.index("](figures/report/claims.png)")
    # every section's figure is shown in its section
    for name in ("table1", "fig2a", "fig2b", "table8", "fig3", "pretraining_gain"):
        assert f"](figures/report/{name}.png)" in text, name
    assert "](figures/partitions/fl-label.png)" in text and "](theory/improvement.png)" in text


def test_settings_are_a_list_and_every_claim_row_names_its_cells_completely(reports):
    text = (reports / "README.md").read_text()
    assert "**Models**\n\n- `mae-vit`: mae on vit_small" in text
    gain = pd.read_csv(reports / "sections" / "pretraining_gain.csv")
    # two strategies of one model and partition: two rows, told apart by their complete cell names
    assert {"fl/mae-vit/fl-label/fedavg", "fl/mae-vit/fl-label/fedmar"} <= set(gain["cell"])
    assert gain.groupby(["cell", "protocol", "dataset"]).size().max() == 1
    claims = pd.read_csv(reports / "sections" / "claims.csv")
    assert claims["cells"].str.startswith("finetune on digits: ").all()
    table8 = claims[claims["section"] == "table8"].iloc[0]
    assert table8["cells"] == "finetune on digits: fl/mae-vit/fl-label/fedmar vs fl/mae-vit/fl-label/fedavg"
    drop = claims[(claims["section"] == "table1") & claims["subject"].str.startswith("SimSiam")].iloc[0]
    assert drop["cells"] == "finetune on digits: fl/simsiam-cnn/fl-label/fedavg vs fl/simsiam-cnn/fl-iid/fedavg"
    assert "| random init + ViT (random/vit_small) |" in text   # Table 1's reference rows name their cell too


def test_claims_forest_orients_each_difference_to_the_papers_side():
    interval = Interval(-0.02, -0.03, -0.01, 0.01, 3, "student-t")
    drop = Finding("table1", "non-IID lowers accuracy", "row", "supported", interval, "non-IID - IID",
                   expected_sign=-1)
    rise = Finding("fig2a", "accuracy rises", "row", "contradicted", interval, "high - low")
    blocked = Finding("fig2a", "accuracy rises", "other", "untestable", None,
                      "untestable at this scale: uniform-3: pretraining does not beat random init (-1.00 pp); "
                      "uniform-10: pretraining does not beat random init (-2.00 pp)")
    rows = claims_forest([drop, rise, blocked]).set_index("label")
    assert rows.loc["row", "difference"].tolist() == pytest.approx([2.0, -2.0])
    assert rows.loc["row", "low"].tolist() == pytest.approx([1.0, -3.0])
    assert untestable_reason(blocked) == "untestable: uniform-3, uniform-10 do not beat random init"
    assert rows.loc["other", "reason"] == untestable_reason(blocked)
