"""Verdicts recorded on other CPU kernels: exported with their source, compared claim by claim, and a claim
fragile only where a run with the same params and code disagrees."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from dssl.artifacts import ArtifactError
from dssl.pipeline.common import StageError
from dssl.pipeline.verdicts import export, load_records
from dssl.reporting.claims import Finding
from dssl.reporting.readme import _fragile_sentence, claims_forest, other_kernels, render_readme
from dssl.reporting.sections import ReportContext, SectionOutput
from dssl.reporting.stats import Interval
from dssl.reporting.verdicts import NOT_CHECKED, VerdictRecord, disagreeing_records, fragile_keys, verdicts_elsewhere
from dssl.tracking.lineage import hardware_label

DROP = "non-IID pretraining lowers accuracy (paper A, Table 1)"


def finding(subject: str, verdict: str, cells: str) -> Finding:
    return Finding("table1", DROP, subject, verdict, Interval(-0.01, -0.02, 0.0, 0.01, 3, "student-t"), "non-IID - IID",
                   cells=cells)


FINDINGS = [finding("SimSiam + CNN, Digits L/non-IID", "supported", "a vs b"),
            finding("SimSiam + CNN, Digits F/non-IID", "inconclusive", "c vs b"),
            finding("MAE + ViT, Digits L/non-IID", "untestable", "d vs e")]


def record(label: str, verdicts: dict[str, str], comparable: bool = True) -> VerdictRecord:
    claims = pd.DataFrame([{"section": "table1", "claim": DROP, "cells": cells, "verdict": verdict}
                           for cells, verdict in verdicts.items()])
    return VerdictRecord(label, {"params_digest": "p", "code_digest": "c", "hardware": ["cpu (AVX2)"]}, claims,
                         comparable)


def test_a_claim_is_fragile_where_a_comparable_run_gave_another_verdict() -> None:
    avx2 = record("avx2-kernels", {"a vs b": "supported", "c vs b": "supported"})   # d vs e not checked there
    table = verdicts_elsewhere(FINDINGS, [avx2])
    assert list(table["avx2-kernels"]) == ["supported", "supported", NOT_CHECKED]
    assert list(table["fragile"]) == [False, True, False]
    assert fragile_keys(table) == {("table1", DROP, "c vs b")}


def test_the_records_that_disagree_are_the_comparable_ones_with_another_verdict() -> None:
    agrees = record("avx512-kernels", {"a vs b": "supported", "c vs b": "inconclusive"})   # d vs e not checked
    differs = record("avx2-pinned", {"a vs b": "supported", "c vs b": "supported", "d vs e": "untestable"})
    stale = record("avx2-kernels", {"a vs b": "contradicted"}, comparable=False)
    records = [agrees, differs, stale]
    assert disagreeing_records(verdicts_elsewhere(FINDINGS, records), records) == ["avx2-pinned"]
    assert disagreeing_records(verdicts_elsewhere(FINDINGS, [agrees, stale]), [agrees, stale]) == []


def test_a_run_with_other_params_or_code_is_shown_but_marks_nothing() -> None:
    stale = record("avx2-kernels", {"a vs b": "contradicted", "c vs b": "supported"}, comparable=False)
    table = verdicts_elsewhere(FINDINGS, [stale])
    assert list(table["avx2-kernels"])[:2] == ["contradicted", "supported"]
    assert not table["fragile"].any()
    assert "other params or code than this build" in stale.describe()


def test_the_report_counts_and_labels_fragile_claims() -> None:
    ctx = ReportContext(results=pd.DataFrame(columns=["dataset", "hardware", "seed"]), profile="embedded",
                        dataset="digits", paper={})
    outputs = [SectionOutput("table1", "## Table 1\n\ntext", FINDINGS, None, {})]
    avx2 = record("avx2-kernels", {"a vs b": "supported", "c vs b": "supported", "d vs e": "untestable"})
    text = render_readme(ctx, outputs, [avx2])
    assert ("**1 of 3 claims is fragile**: avx2-kernels gave another verdict with the same params and code "
            "(compared: avx2-kernels;") in text
    # a second record that agrees is listed as compared, not as one that gave another verdict
    avx512 = record("avx512-kernels", {"a vs b": "supported", "c vs b": "inconclusive"})
    assert ("**1 of 3 claims is fragile**: avx2-kernels gave another verdict with the same params and code "
            "(compared: avx512-kernels, avx2-kernels;") in render_readme(ctx, outputs, [avx512, avx2])
    # two records that disagree with this build are named as a list
    other = record("avx2-pinned", {"a vs b": "supported", "c vs b": "supported"})
    assert ("**1 of 3 claims is fragile**: avx2-pinned and avx2-kernels gave another verdict with the same params"
            in render_readme(ctx, outputs, [other, avx2]))
    assert "## Verdicts on other CPU kernels" in text
    assert "**inconclusive** (fragile)" in text          # the claims table
    per_claim = text.split("## Verdicts per claim")[1].split("\n## ")[0]
    assert per_claim.splitlines()[2].endswith("| fragile |")   # the per-claim table counts them
    forest = claims_forest(FINDINGS, fragile_keys(verdicts_elsewhere(FINDINGS, [avx2])))
    assert list(forest["label"])[1] == "SimSiam + CNN, Digits F/non-IID [fragile]"
    assert "fragile" not in render_readme(ctx, outputs)   # without records nothing is said about it


def _finished_run(root: Path) -> None:
    (root / "params.yaml").write_text("profile: embedded\nseeds: [0, 1]\n")
    (root / "reports/sections").mkdir(parents=True)
    pd.DataFrame([{"section": "table1", "claim": DROP, "subject": "s", "cells": "a vs b", "verdict": "supported"}]) \
        .to_csv(root / "reports/sections/claims.csv", index=False)
    (root / "reports/lineage/code").mkdir(parents=True)
    (root / "reports/lineage/code/pretrain_fl.json").write_text(json.dumps(
        {"kind": "pretrain_fl", "entry": "dssl.pipeline.pretrain", "files": {"src/a.py": "00aa"}}))
    (root / "reports/metrics/fl/cell/seed-0").mkdir(parents=True)
    (root / "reports/metrics/fl/cell/seed-0/digits-knn.json").write_text(json.dumps({"hardware": PINNED_AVX2}))


# what a stage writes when it ran with ATEN_CPU_CAPABILITY=avx2 (tracking.lineage.hardware_label)
PINNED_AVX2 = hardware_label({"hardware.cpu": "cpu", "hardware.cpu_capability": "AVX2", "hardware.torch": "2.x",
                              "hardware.accelerator": "none", "hardware.kernel_pins": "ATEN_CPU_CAPABILITY=avx2"})


def test_export_records_the_source_and_load_compares_params_and_code(tmp_path, monkeypatch) -> None:
    _finished_run(tmp_path)
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)   # the pins come from the results, not the shell
    out = export(tmp_path, Path("params.yaml"), "avx2-kernels")
    source = json.loads((out / "source.json").read_text())
    assert source["hardware"] == [PINNED_AVX2] and source["kernels"] == {"ATEN_CPU_CAPABILITY": "avx2"}
    assert PINNED_AVX2 == "cpu (AVX2), torch 2.x, kernels pinned: ATEN_CPU_CAPABILITY=avx2"
    entries = {"avx2-kernels": "reports/verdicts/avx2-kernels"}
    [same] = load_records(tmp_path, Path("params.yaml"), entries)
    assert same.comparable and list(same.claims["verdict"]) == ["supported"]
    assert same.describe().count("ATEN_CPU_CAPABILITY=avx2") == 1   # named once, by the results' hardware
    # the build that lists the record in report.verdicts_elsewhere has the record's params
    (tmp_path / "params.yaml").write_text("profile: embedded\nseeds: [0, 1]\n"
                                          "report: {verdicts_elsewhere: "
                                          "{avx2-kernels: reports/verdicts/avx2-kernels}}\n")
    assert load_records(tmp_path, Path("params.yaml"), entries)[0].comparable
    (tmp_path / "params.yaml").write_text("profile: embedded\nseeds: [0, 1, 2]\n")
    assert not load_records(tmp_path, Path("params.yaml"), entries)[0].comparable
    (tmp_path / "params.yaml").write_text("profile: embedded\nseeds: [0, 1]\n")
    (tmp_path / "reports/lineage/code/pretrain_fl.json").write_text(json.dumps(
        {"kind": "pretrain_fl", "entry": "dssl.pipeline.pretrain", "files": {"src/a.py": "11bb"}}))
    assert not load_records(tmp_path, Path("params.yaml"), entries)[0].comparable


def test_a_run_whose_results_ran_under_other_pins_is_not_recorded(tmp_path, monkeypatch) -> None:
    """One result file computed without the pins (say, restored from a run before): the record would name
    kernels that did not compute all of it, so export refuses and names both settings."""
    _finished_run(tmp_path)
    (tmp_path / "reports/metrics/fl/cell/seed-1").mkdir()
    unpinned = PINNED_AVX2.split(", kernels pinned")[0]
    (tmp_path / "reports/metrics/fl/cell/seed-1/digits-knn.json").write_text(json.dumps({"hardware": unpinned}))
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    with pytest.raises(StageError, match="different kernel pins"):
        export(tmp_path, Path("params.yaml"), "avx2-pinned")
    assert not (tmp_path / "reports/verdicts/avx2-pinned").exists()


def test_bad_labels_and_damaged_records_are_one_clear_error(tmp_path) -> None:
    _finished_run(tmp_path)
    with pytest.raises(StageError, match="give a plain name"):
        export(tmp_path, Path("params.yaml"), "../elsewhere")
    out = export(tmp_path, Path("params.yaml"), "avx2-kernels")
    (out / "claims.csv").write_text("claim,verdict\nx,supported\n")
    with pytest.raises(ArtifactError, match="lacks the columns"):
        load_records(tmp_path, Path("params.yaml"), {"avx2-kernels": "reports/verdicts/avx2-kernels"})
    (out / "source.json").write_text("{")
    with pytest.raises(ArtifactError, match="dssl verdicts export"):
        load_records(tmp_path, Path("params.yaml"), {"avx2-kernels": "reports/verdicts/avx2-kernels"})


def test_the_report_says_when_no_record_ran_other_kernels_than_this_build() -> None:
    same = record("avx2-kernels", {"a vs b": "supported", "c vs b": "inconclusive"})   # hardware "cpu (AVX2)"

    def text(rec: VerdictRecord, hardware: str) -> str:
        return other_kernels(verdicts_elsewhere(FINDINGS, [rec]), [rec], [hardware])

    assert "ran the same CPU kernels as this build (AVX2)" in text(same, "AMD EPYC (AVX2), torch 2.14.1")
    assert "ran the same CPU kernels" not in text(same, "Intel(R) Xeon(R) (AVX512), torch 2.14.1")
    pinned = VerdictRecord("pinned", {"hardware": ["Intel(R) Xeon(R) (AVX512), torch 2.14.1"],
                                      "kernels": {"ATEN_CPU_CAPABILITY": "avx2"}}, same.claims, True)
    assert pinned.kernel_kinds() == {"AVX2"}
    assert "ran the same CPU kernels as this build (AVX2)" in text(pinned, "AMD EPYC (AVX2), torch 2.14.1")
    stale = VerdictRecord("stale", same.source, same.claims, False)   # compares nothing: says nothing of kinds
    assert "ran the same CPU kernels" not in text(stale, "AMD EPYC (AVX2), torch 2.14.1")
    elsewhere = verdicts_elsewhere(FINDINGS, [same])
    sentence = _fragile_sentence(FINDINGS, elsewhere, [same], ["AMD EPYC (AVX2), torch 2.14.1"],
                                 fragile_keys(elsewhere))
    assert "**0 of 3 claims are fragile**: every run with the same params and code gave the same verdicts" in sentence
    assert "same CPU kernels as this build (AVX2)" in sentence
