"""reports/README.md: measured vs paper numbers, claim checks in words, theory hook, lineage."""

from __future__ import annotations

import pytest
from report_helpers import decl_result, result, write_results

from dssl.reporting.readme import render_readme, write_report
from dssl.reporting.results import load_results

SETTINGS = {"FL clients": 10, "rounds": 20, "local epochs": 1, "backbones": ["cnn_small", "vit_small"]}


def records(seeds: int = 1) -> list[dict]:
    runs = []
    for seed in range(seeds):
        shift = 0.004 * seed
        for scheme, acc in (("iid", 0.8603), ("dirichlet_balanced", 0.8433), ("feature", 0.8462)):
            runs.append(result("fl", "simsiam", "cnn_small", scheme, test_acc=acc + shift, seed=seed))
        for scheme, acc in (("iid", 0.8728), ("dirichlet_balanced", 0.8697), ("feature", 0.8617)):
            runs.append(result("fl", "mae_cnn", "cnn_small", scheme, test_acc=acc - shift, seed=seed))
        runs += [
            result("random", None, "cnn_small", test_acc=0.41, seed=seed),
            result("random", None, "cnn_small", protocol="linear_probe", test_acc=0.60 + shift, seed=seed),
            result("fl", "simsiam", "cnn_small", "iid", protocol="linear_probe", test_acc=0.72 - shift, seed=seed),
            *(decl_result("uniform", c, acc + shift, seed) for c, acc in ((3, 0.70), (5, 0.74), (10, 0.79))),
            *(decl_result("general", c, acc - shift, seed) for c, acc in ((3, 0.70), (5, 0.78), (10, 0.74))),
            decl_result("complete", 20, 0.81, seed),
        ]
    return runs


def context(df, **extra) -> dict:
    return {"results": df, "profile": "embedded", "dataset": "digits", "settings": SETTINGS, **extra}


@pytest.fixture
def single_seed(tmp_path):
    return load_results(write_results(tmp_path, records()))


def test_readme_holds_measured_and_paper_numbers(single_seed):
    text = render_readme(context(single_seed, figure2a="figures/fig2a-digits.png"))
    assert text.startswith("# Paper A (FedMAR, ICLR 2026)")
    assert "Profile **embedded**, downstream dataset **Digits**" in text
    assert "| backbones | cnn_small, vit_small |" in text
    assert "| SimSiam + CNN | 86.03 | 84.33 (↓1.70) | 84.62 (↓1.41) |" in text          # measured
    assert "| MAE + CNN | 87.28 | 86.97 (↓0.31) | 86.17 (↓1.11) |" in text
    assert "| SimSiam + CNN | 86.03 | 84.33 (↓1.70) | 84.62 (↓1.41) | 58.91 |" in text  # paper, CIFAR-100 next
    assert "| random init + CNN | 41.00 |" in text
    assert "not comparable to the paper's" in text
    assert "![Fig. 2a: DecL accuracy against |A|](figures/fig2a-digits.png)" in text


def test_readme_states_the_claim_checks_in_words(single_seed):
    text = render_readme(context(single_seed))
    assert "Here: lower in 4 of 4 cells" in text
    assert "MAE loses less accuracy to non-IID data than SimSiam in 12 of 12" in text
    assert "Here: in 2 of 2. Every number here has a single seed" in text
    assert ("In these runs accuracy rises with |A| for the uniform topology (rho = 1.00) but not for the "
            "general topology (rho = 0.50).") in text
    assert "FL (complete graph): 81.00 %, at or above every DecL point" in text
    assert "single seed per number the noise is unknown" in text
    assert "SSL pretraining beats the random-init backbone in 1 of 1 comparisons." in text


def test_gaps_within_seed_noise_are_called_that(tmp_path):
    df = load_results(write_results(tmp_path, records(seeds=2)))
    text = render_readme(context(df))
    # general |A| 5 -> 10 falls 4 pp with a spread of 0.57 pp: beyond noise
    assert "it falls from 5 to 10 by 4.00 pp, beyond seed noise; this disagrees with the paper" in text
    # SimSiam linear probe 71.8 +- 0.28 vs random 60.2 +- 0.28: a clear win
    assert "yes (+11.60)" in text
    assert "[n=2]" in text


def test_noise_flag_on_a_small_fall(tmp_path):
    runs = records(seeds=2)
    for run in runs:
        if run["framework"] == "decl" and run["topology"] == "general" and run["connectivity"] == 10:
            run["test_acc"] = 0.779 if run["seed"] == 0 else 0.77
    text = render_readme(context(load_results(write_results(tmp_path, runs))))
    assert "within seed noise; these gaps are within seed noise, so they do not contradict the paper" in text


def test_theory_hook_and_lineage(single_seed):
    text = render_readme(context(single_seed, theory="Eq. 7 holds.\n"))
    assert "## Theory\n\nEq. 7 holds." in text
    assert "_No theory text was provided" in render_readme(context(single_seed, theory=None))
    lineage = text.split("## Lineage")[1]
    assert ("| SimSiam + CNN | Digits L/non-IID | 0 | evaluate_fl@simsiam-cnn-fl-label-digits-finetune | "
            "run-fl-simsiam-cnn-fl-label-finetune-s0 |") in lineage


def test_missing_run_id_and_missing_sections(tmp_path):
    df = load_results(write_results(tmp_path, [result(mlflow_run_id=None, test_acc=0.5)]))
    text = render_readme(context(df))
    assert "(not logged)" in text
    assert "No DecL fine-tune results in this build." in text
    assert "No linear-probe results in this build." in text


def test_write_report_writes_readme_csvs_and_figure(tmp_path):
    write_results(tmp_path / "metrics", records())
    written = write_report(tmp_path / "metrics", tmp_path / "reports", {"profile": "embedded", "dataset": "digits"})
    assert set(written) == {"readme", "table1_csv", "linear_probe_csv", "figure2a"}
    assert all(path.stat().st_size > 0 for path in written.values())
    assert written["figure2a"] == tmp_path / "reports" / "figures" / "fig2a-digits.png"
    text = written["readme"].read_text()
    assert "](figures/fig2a-digits.png)" in text and "[table1.csv](table1.csv)" in text
