"""Report sections on constructed results: cells, verdicts, the gate, options, files."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from dssl.config.checker import Checker
from dssl.reporting.readme import _seeds_text, what_ran, write_report
from dssl.reporting.results import load_results
from dssl.reporting.sections import SECTIONS, ReportContext, check_report_params, create_section
from dssl.reporting.tables import load_paper_numbers

from report_helpers import decl_result, result, write_results

ROOT = Path(__file__).resolve().parents[2]

SEEDS = (0, 1, 2)
NOISE = (0.0, 0.01, -0.01)


def table1_records(iid: float, label: float, random: float = 0.5, protocol: str = "finetune") -> list[dict]:
    """SimSiam and MAE on the CNN at IID / label non-IID, and the random-init CNN, for three seeds."""
    records = []
    for seed, noise in zip(SEEDS, NOISE):
        for method, drop in (("simsiam", 0.0), ("mae_cnn", 0.02)):
            records.append(result("fl", method, "cnn_small", "iid", protocol=protocol, test_acc=iid + noise, seed=seed,
                                  n_test=450))
            records.append(result("fl", method, "cnn_small", "dirichlet_balanced", protocol=protocol,
                                  test_acc=label + drop + noise, seed=seed, n_test=450))
        records.append(result("random", None, "cnn_small", None, protocol=protocol, test_acc=random + noise, seed=seed,
                              n_test=450))
    return records


def context(tmp_path, records) -> ReportContext:
    return ReportContext(load_results(write_results(tmp_path / "results", records)), "embedded", "digits",
                         load_paper_numbers())


def test_table1_cells_and_claims(tmp_path):
    out = create_section("table1").render(context(tmp_path, table1_records(iid=0.90, label=0.85)))
    cells = out.data.set_index(["row", "setting"])
    assert cells.loc[("SimSiam + CNN", "IID"), "mean"] == pytest.approx(90.0)
    assert cells.loc[("MAE + CNN", "L/non-IID"), "mean"] == pytest.approx(87.0)
    assert cells.loc[("random init + CNN", "IID"), "n"] == 3
    verdicts = {(f.claim.split(" (")[0], f.subject): f.verdict for f in out.findings}
    # identical seed noise in both arms: the paired difference is exact, so the drop is decided
    assert verdicts[("non-IID pretraining lowers accuracy", "SimSiam + CNN, Digits L/non-IID")] == "supported"
    assert verdicts[("MAE loses less accuracy to non-IID data than SimSiam", "CNN, Digits L/non-IID")] == "supported"
    assert "87.00 ± " in out.markdown and "(↓3.00)" in out.markdown and "(test ± " in out.markdown


def test_table1_claims_are_untestable_when_pretraining_does_not_beat_random_init(tmp_path):
    out = create_section("table1").render(context(tmp_path, table1_records(iid=0.90, label=0.85, random=0.95)))
    assert out.findings and {f.verdict for f in out.findings} == {"untestable"}
    assert all("does not beat random init" in f.detail for f in out.findings)


def test_table1_drop_contradicted_when_non_iid_is_higher(tmp_path):
    out = create_section("table1").render(context(tmp_path, table1_records(iid=0.85, label=0.90)))
    drops = [f for f in out.findings if f.claim.startswith("non-IID")]
    assert {f.verdict for f in drops} == {"contradicted"}


def test_table1_reads_a_model_on_its_declared_protocol(tmp_path):
    """MAE + CNN read on kNN, where it beats random init; SimSiam + CNN on the table's protocol, where only
    it does: each row and its gate use the row's own protocol, the random-init row is shown on both, and
    the MAE-vs-SimSiam claim, whose rows sit on two protocols, is untestable saying so."""
    records = [r for r in table1_records(iid=0.90, label=0.85, protocol="linear_probe_10pct")]
    records += [r for r in table1_records(iid=0.80, label=0.76, random=0.70, protocol="knn")]
    options = {"protocol": "linear_probe_10pct", "protocols": {"mae_cnn-cnn": "knn"}}
    out = create_section("table1", options).render(context(tmp_path, records))
    cells = out.data.set_index(["row", "setting"])
    assert cells.loc[("MAE + CNN", "IID"), "mean"] == pytest.approx(80.0)        # its kNN cell
    assert cells.loc[("SimSiam + CNN", "IID"), "mean"] == pytest.approx(90.0)    # the 10 %-label probe cell
    assert cells.loc[("random init + CNN", "IID"), "mean"] == pytest.approx(50.0)
    assert cells.loc[("random init + CNN · knn", "IID"), "mean"] == pytest.approx(70.0)
    verdicts = {(f.claim.split(" (")[0], f.subject): f for f in out.findings}
    drop = verdicts[("non-IID pretraining lowers accuracy", "MAE + CNN, Digits L/non-IID")]
    assert drop.verdict == "supported" and drop.difference.mean == pytest.approx(-0.02)   # kNN: 78 % vs 80 %
    mae = verdicts[("MAE loses less accuracy to non-IID data than SimSiam", "CNN, Digits L/non-IID")]
    assert mae.verdict == "untestable" and "different protocols (knn, linear_probe_10pct)" in mae.detail
    assert "(mae_cnn-cnn, knn)" in out.markdown and "mae_cnn-cnn on knn" in out.markdown


def test_table1_reads_a_model_on_its_declared_strategy_entry(tmp_path):
    """SimSiam + CNN's rows from its longer cells (fedavg-r120, five seeds), MAE + CNN's from FedAvg: the
    rows say which entry they are, the drop claims pair each row with its own IID cell, and the
    MAE-vs-SimSiam claim, whose rows trained different depths, is untestable saying so."""
    records = [{**r, "strategy": "fedavg"} if r["framework"] == "fl" else r for r in table1_records(0.90, 0.85)]
    longer = [{**r, "strategy": "fedavg-r120", "test_acc": r["test_acc"] + 0.05, "rounds": 120}
              for r in records if r["method"] == "simsiam"]
    longer += [{**r, "seed": r["seed"] + 3} for r in longer if r["seed"] < 2]   # seeds 3 and 4
    records += longer + [{**r, "seed": r["seed"] + 3} for r in records if r["framework"] == "random" and r["seed"] < 2]
    ctx = context(tmp_path, records)
    assert "seeds 0, 1, 2, 3, 4 (3 or 5 per cell);" in what_ran(ctx)   # the report's opening names both counts
    out = create_section("table1", {"strategies": {"simsiam-cnn": "fedavg-r120"}}).render(ctx)
    cells = out.data.set_index(["row", "setting"])
    assert cells.loc[("SimSiam + CNN", "IID"), "mean"] == pytest.approx(95.2)   # seed noise 0, +1, -1, 0, +1 pp
    assert cells.loc[("SimSiam + CNN", "IID"), "n"] == 5 and cells.loc[("MAE + CNN", "IID"), "n"] == 3
    verdicts = {(f.claim.split(" (")[0], f.subject): f for f in out.findings}
    drop = verdicts[("non-IID pretraining lowers accuracy", "SimSiam + CNN, Digits L/non-IID")]
    assert drop.verdict == "supported" and drop.difference.n == 5
    mae = verdicts[("MAE loses less accuracy to non-IID data than SimSiam", "CNN, Digits L/non-IID")]
    assert mae.verdict == "untestable" and "different strategy entries (fedavg, fedavg-r120)" in mae.detail
    assert "SimSiam + CNN (simsiam-cnn, fedavg-r120)" in out.markdown
    assert "simsiam-cnn's fedavg-r120 (120 rounds, seeds 0, 1, 2, 3, 4)" in out.markdown
    # a non-IID cell of other seeds than its IID cell (grids that set their own): untestable, not paired
    other = [r for r in records if not (r["method"] == "simsiam" and r["scheme"] == "iid" and r["seed"] > 2)]
    out = create_section("table1", {"strategies": {"simsiam-cnn": "fedavg-r120"}}).render(
        context(tmp_path / "b", other))
    drop = next(f for f in out.findings if f.subject == "SimSiam + CNN, Digits L/non-IID")
    assert drop.verdict == "untestable" and "different seeds (0, 1, 2 and 0, 1, 2, 3, 4)" in drop.detail
    with pytest.raises(ValueError, match="strategies must map a model"):
        create_section("table1", {"strategies": {"simsiam-cnn": 120}})


@pytest.mark.parametrize("section, key", [("table1", "protocols"), ("table5", "protocols"), ("fig2a", "protocol"),
                                          ("table8", "protocol"), ("fig2b", "protocol"),
                                          ("pretraining_gain", "protocols")])
def test_a_misspelt_protocol_fails_validation_in_every_section(section, key):
    """Each section that reads a protocol checks the name against the evaluation registry when
    ``dssl validate`` builds it, the shared check of ``sections/base.py``, rather than reporting its cells
    untestable after the run."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    options = params["report"]["sections"][section]
    options[key] = {"mae-vit": "knm"} if key == "protocols" and section != "pretraining_gain" else (
        ["knm"] if key == "protocols" else "knm")
    checker = Checker(params, ROOT)
    check_report_params(checker)
    assert [problem.path for problem in checker.problems] == [f"report.sections.{section}"]
    assert "unknown protocol(s) ['knm']" in str(checker.problems[0])


def fig2a_records(accuracy: dict[tuple[str, float], float], random: float = 0.5) -> list[dict]:
    records = []
    for seed, noise in zip(SEEDS, (0.0, 0.004, -0.004)):
        for (topology, connectivity), acc in accuracy.items():
            records.append(decl_result(topology, connectivity, acc + noise, seed=seed))
        records.append(result("random", None, "vit_small", None, test_acc=random + noise, seed=seed))
    return records


def test_fig2a_rise_and_fl_claims(tmp_path):
    accuracy = {("uniform", 3): 0.70, ("uniform", 5): 0.72, ("uniform", 10): 0.75, ("complete", 20): 0.80,
                ("general", 3): 0.74, ("general", 10): 0.71}
    out = create_section("fig2a").render(context(tmp_path, fig2a_records(accuracy)))
    verdicts = {f.subject: f.verdict for f in out.findings}
    assert verdicts["uniform topology, |A| 3 -> 10"] == "supported"
    assert verdicts["general topology, |A| 3 -> 10"] == "contradicted"
    assert verdicts["uniform topology, FL vs every |A|"] == "supported"
    assert set(out.figures) == {"fig2a.png"}


def test_fig2a_fl_below_a_decl_point_contradicts(tmp_path):
    accuracy = {("uniform", 3): 0.70, ("uniform", 10): 0.85, ("complete", 20): 0.80}
    out = create_section("fig2a").render(context(tmp_path, fig2a_records(accuracy)))
    fl = [f for f in out.findings if f.subject.endswith("FL vs every |A|")]
    assert fl[0].verdict == "contradicted" and "uniform-10" in fl[0].detail


def test_pretraining_gain_rows(tmp_path):
    out = create_section("pretraining_gain").render(context(tmp_path, table1_records(iid=0.90, label=0.45)))
    gains = out.data.set_index(["model", "setting"])
    assert gains.loc[("simsiam-cnn", "fl-iid"), "gain"] == pytest.approx(40.0)
    assert bool(gains.loc[("simsiam-cnn", "fl-iid"), "beats_random"])
    assert gains.loc[("simsiam-cnn", "fl-label"), "gain"] == pytest.approx(-5.0)
    assert not bool(gains.loc[("simsiam-cnn", "fl-label"), "beats_random"])


def test_sections_without_results_say_so(tmp_path):
    ctx = context(tmp_path, table1_records(iid=0.9, label=0.85))
    assert "No DecL finetune results" in create_section("fig2a").render(ctx).markdown
    assert create_section("table1", {"protocol": "knn"}).render(ctx).findings == []


def test_section_options_are_checked_against_the_registry():
    checker = Checker({"report": {"sections": {"table1": {"protocl": "knn"}, "table9": {}, "fig2a": {}}}}, None)
    check_report_params(checker)
    problems = {p.path: str(p) for p in checker.problems}
    assert set(problems) == {"report.sections.table1", "report.sections.table9"}
    assert "protocl" in problems["report.sections.table1"] and "protocol" in problems["report.sections.table1"]
    assert "fig2a" in problems["report.sections.table9"]
    assert {"table1", "fig2a", "pretraining_gain", "theory", "lineage"} <= set(SECTIONS)


def test_write_report_numbers_match_the_csvs(tmp_path):
    records = table1_records(iid=0.90, label=0.85) + fig2a_records({("uniform", 3): 0.7, ("uniform", 10): 0.75,
                                                                     ("complete", 20): 0.8})
    write_results(tmp_path / "results", records)
    sections = {"pretraining_gain": {}, "table1": {}, "fig2a": {}, "theory": {}, "lineage": {}}
    written = write_report(tmp_path / "results", tmp_path / "out", sections,
                           {"profile": "embedded", "dataset": "digits", "theory": "The theory text."})
    readme = (tmp_path / "out" / "README.md").read_text()
    table1 = pd.read_csv(tmp_path / "out" / "sections" / "table1.csv")
    for row in table1.itertuples():
        assert f"{row.mean:.2f}" in readme
        if not math.isnan(row.ci):
            assert f"{row.mean:.2f} ± {row.ci:.2f} [n={row.n}]" in readme
    claims = pd.read_csv(tmp_path / "out" / "sections" / "claims.csv")
    assert set(claims["verdict"]) <= {"supported", "contradicted", "inconclusive", "untestable"}
    for claim in claims.itertuples():
        assert f"**{claim.verdict}**" in readme
    assert "The theory text." in readme and (tmp_path / "out" / "figures" / "report" / "fig2a.png").stat().st_size > 0
    assert readme.index("## Summary") < readme.index("## Claims at a glance") < readme.index("## Table 1")
    assert set(written) >= {"readme", "html", "claims.csv", "table1.csv", "fig2a.csv", "pretraining_gain.csv",
                            "fig2a.png", "table1.png", "pretraining_gain.png", "claims.png"}


def test_readme_sync_copies_the_summary_and_the_verdicts_per_claim_from_the_report(tmp_path):
    from dssl.artifacts import ArtifactError
    from dssl.reporting.readme import BLOCK_END, BLOCK_START, sync_readme

    write_results(tmp_path / "results", table1_records(iid=0.90, label=0.85))
    write_report(tmp_path / "results", tmp_path / "reports", {"table1": {}, "pretraining_gain": {}},
                 {"profile": "embedded", "dataset": "digits"})
    readme = tmp_path / "README.md"
    readme.write_text(f"# Project\n\n## Expected results\n{BLOCK_START}\nold numbers\n{BLOCK_END}\n\n## Next\n")
    assert sync_readme(readme, tmp_path / "reports" / "README.md", check=True)
    assert "old numbers" in readme.read_text()                    # --check changes nothing
    assert sync_readme(readme, tmp_path / "reports" / "README.md")
    text = readme.read_text()
    assert "old numbers" not in text and "### Summary" in text and "### Verdicts per claim" in text
    assert "**What ran:** profile **embedded**" in text and "claims of the papers checked:" in text
    assert "### Table 1" not in text and "### Does SSL pretraining" not in text and text.endswith("## Next\n")
    assert "![" not in text   # figures exist only after a run: the README links, the report shows them
    assert not sync_readme(readme, tmp_path / "reports" / "README.md")   # idempotent
    readme.write_text("no markers")
    with pytest.raises(ArtifactError, match="needs exactly one block"):
        sync_readme(readme, tmp_path / "reports" / "README.md")


def test_readme_sync_without_a_report_or_its_block_is_one_error_line(tmp_path, monkeypatch, capsys):
    """A clean clone has no reports/README.md, an edited README may have lost its block: the command says
    which in one line with the fix (exit 2), no traceback, and leaves the README alone."""
    from dssl.cli import EXIT_BAD_INPUT, main
    from dssl.reporting.readme import BLOCK_END, BLOCK_START

    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    readme = tmp_path / "README.md"
    readme.write_text(f"# Project\n{BLOCK_START}\nold numbers\n{BLOCK_END}\n")
    monkeypatch.chdir(tmp_path)
    assert main(["readme", "sync"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "reports/README.md" in err and "Run `make repro` first" in err
    assert "old numbers" in readme.read_text()
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "README.md").write_text("# Report\n")
    readme.write_text("# Project without the block\n")
    assert main(["readme", "sync"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "README.md: needs exactly one block" in err and "git checkout README.md" in err


def test_fig2a_and_table1_read_only_their_strategy_entry(tmp_path):
    """Other strategies' cells on the same graphs and partitions (DecMAR, consensus rules, FedMAR) stay out."""
    records = fig2a_records({("uniform", 3): 0.70, ("uniform", 10): 0.75, ("complete", 20): 0.80})
    records = [{**r, "strategy": "decl-uniform"} if r["framework"] == "decl" else r for r in records]
    records += [{**r, "strategy": "decmar", "test_acc": 0.99} for r in records if r["framework"] == "decl"]
    fl = [{**r, "strategy": "fedavg"} if r["framework"] == "fl" else r for r in table1_records(0.9, 0.85)]
    fl += [{**r, "strategy": "fedmar", "test_acc": 0.2} for r in fl if r["framework"] == "fl"]
    ctx = context(tmp_path, records + fl)
    points = create_section("fig2a").render(ctx).data
    assert set(points["mean"].round(2)) == {70.0, 75.0, 80.0}
    cells = create_section("table1").render(ctx).data
    pretrained = cells[~cells["row"].str.startswith("random init")]
    assert set(pretrained["mean"].round(2)) == {90.0, 85.0, 87.0}   # no FedMAR cell (20 %) mixed in
    assert ("No DecL finetune results of strategy 'decl-mh'"
            in create_section("fig2a", {"strategy": "decl-mh"}).render(ctx).markdown)


def test_the_lineage_section_names_the_hardware_and_flags_results_from_several_machines(tmp_path):
    same = [result(seed=s, hardware="CPU A (AVX512), torch 2.14.1") for s in range(2)]
    text = create_section("lineage").render(context(tmp_path, same)).markdown
    assert "Evaluated on CPU A (AVX512), torch 2.14.1" in text and "machines" not in text
    mixed = same + [result(seed=2, hardware="CPU B (AVX2), torch 2.14.1"), result(seed=3)]
    text = create_section("lineage").render(context(tmp_path, mixed)).markdown
    assert "**The results come from 3 machines**" in text
    assert "CPU A (AVX512), torch 2.14.1 (2 files)" in text and "CPU B (AVX2)" in text
    assert "not recorded (1 file)" in text  # result files written before the hardware was recorded


def test_table1_reads_the_partitions_it_is_told_when_a_sweep_trains_more_of_one_scheme(tmp_path):
    """Paper A's Fig. 2b trains the same cells on more label-skew partitions (alpha 1 ... 0.001): Table 1
    mixing them into one column is an error naming the option, and ``partitions`` picks its own."""
    records = table1_records(iid=0.9, label=0.85)
    records += [{**r, "partition": "fl-label-a1", "alpha": 1.0, "test_acc": 0.2,
                 "stage": r["stage"].replace("fl-label", "fl-label-a1")}
                for r in records if r["scheme"] == "dirichlet_balanced"]
    ctx = context(tmp_path, records)
    with pytest.raises(ValueError, match="mixes partitions .*report.sections.table1.partitions"):
        create_section("table1").render(ctx)
    label = records[1]["partition"]
    cells = create_section("table1", {"partitions": [records[0]["partition"], label]}).render(ctx).data
    pretrained = cells[~cells["row"].str.startswith("random init")]
    assert set(pretrained["mean"].round(2)) == {90.0, 85.0, 87.0}   # no alpha-1 cell (20 %) mixed in


def test_table1_puts_paper_as_iid_dirichlet_in_the_iid_column() -> None:
    from dssl.reporting.sections.table1 import IID, LABEL, partition_setting

    assert partition_setting("dirichlet_balanced", 1e5) == IID == partition_setting("iid", float("nan"))
    assert partition_setting("dirichlet_balanced", 0.1) == LABEL


def test_the_opening_names_every_per_cell_seed_count() -> None:
    """Three counts (shallow tables 2, the default 3, Table 1's SimSiam + CNN 10) read as a list."""
    rows = [{"stage": stage, "dataset": "digits", "protocol": "knn", "seed": seed}
            for stage, seeds in (("shallow", 2), ("default", 3), ("deep", 10)) for seed in range(seeds)]
    ctx = ReportContext(results=pd.DataFrame(rows), profile="embedded", dataset="digits", paper={})
    assert _seeds_text(ctx) == "seeds 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 (2, 3 or 10 per cell)"
