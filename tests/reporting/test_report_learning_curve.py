"""The learning-curve section: accuracy against FL rounds beside random init, and when pretraining pays off."""

from __future__ import annotations

from pathlib import Path

import pytest

from dssl.reporting.readme import write_report
from dssl.reporting.results import load_results
from dssl.reporting.sections import ReportContext, create_section
from dssl.reporting.tables import load_paper_numbers

from report_helpers import result, write_results

STRATEGIES = {"fedavg-r10": 10, "fedavg-r20": 20, "fedavg": 60}
OPTIONS = {"models": ["simsiam-cnn", "mae-cnn"], "strategies": list(STRATEGIES), "partition": "fl-iid"}
NOISE = (0.0, 0.004, -0.004)
RANDOM = 0.80


def records(gain: dict[tuple[str, int], float], rounds: bool = True) -> list[dict]:
    """Three seeds of each model x strategy on fl-iid, kNN and the 10 %-label probe, with accuracy
    random init + ``gain[(model, rounds)]``; the random-init CNN at 80 %."""
    out = []
    for seed, noise in enumerate(NOISE):
        for protocol in ("knn", "linear_probe_10pct"):
            out.append(result("random", None, "cnn_small", None, protocol=protocol, test_acc=RANDOM + noise,
                              seed=seed, n_test=450))
            for (model, depth), delta in gain.items():
                strategy = next(s for s, r in STRATEGIES.items() if r == depth)
                out.append(result("fl", model.split("-")[0].replace("mae", "mae_cnn"), "cnn_small", "iid",
                                  protocol=protocol, test_acc=RANDOM + delta + 0.5 * noise, seed=seed,
                                  strategy=strategy, model=model, n_test=450,
                                  **({"rounds": depth} if rounds else {})))
    return out


GAINS = {("simsiam-cnn", 10): -0.02, ("simsiam-cnn", 20): 0.03, ("simsiam-cnn", 60): 0.05,
         ("mae-cnn", 10): -0.04, ("mae-cnn", 20): -0.03, ("mae-cnn", 60): -0.01}


def context(tmp_path: Path, recs: list[dict]) -> ReportContext:
    return ReportContext(results=load_results(write_results(tmp_path / "results", recs)), profile="embedded",
                         dataset="digits", paper=load_paper_numbers())


def test_the_curve_says_from_which_round_each_model_beats_random_init(tmp_path: Path):
    out = create_section("learning_curve", OPTIONS).render(context(tmp_path, records(GAINS)))
    assert out.findings == []   # a measured finding, not a paper claim
    assert "SimSiam + CNN (simsiam-cnn), knn: beats random init from 20 rounds on" in out.markdown
    assert "MAE + CNN (mae-cnn), linear_probe_10pct: does not beat random init at any depth up to 60 rounds" \
        in out.markdown
    data = out.data
    assert list(data["rounds"][:3]) == [10, 20, 60]   # sorted by depth within a model and protocol
    assert len(data) == 12 and set(data["strategy"]) == set(STRATEGIES)
    row = data[(data["model"] == "simsiam-cnn") & (data["rounds"] == 60) & (data["protocol"] == "knn")].iloc[0]
    assert row["gain"] == pytest.approx(5.0) and row["random_mean"] == pytest.approx(80.0)


def test_a_model_that_beats_random_init_only_at_some_depth_is_told_apart(tmp_path: Path):
    gains = {**GAINS, ("simsiam-cnn", 60): -0.01}
    out = create_section("learning_curve", OPTIONS).render(context(tmp_path, records(gains)))
    assert "SimSiam + CNN (simsiam-cnn), knn: beats random init after 20 rounds, but not after 60" in out.markdown


def test_results_without_their_rounds_are_an_error_naming_the_cell(tmp_path: Path):
    with pytest.raises(ValueError, match="fl/simsiam-cnn/fl-iid/fedavg-r10 .* re-run its evaluate_fl stage"):
        create_section("learning_curve", OPTIONS).render(context(tmp_path, records(GAINS, rounds=False)))


def test_the_figure_draws_a_panel_per_protocol(tmp_path: Path):
    write_results(tmp_path / "results", records(GAINS))
    write_report(tmp_path / "results", tmp_path / "reports", {"learning_curve": OPTIONS},
                 {"profile": "embedded", "dataset": "digits"})
    figure = tmp_path / "reports" / "figures" / "report" / "learning_curve.png"
    assert figure.is_file() and figure.stat().st_size > 10_000
    assert "learning_curve.png" in (tmp_path / "reports" / "README.md").read_text()


@pytest.mark.parametrize("options, message", [
    ({**OPTIONS, "strategies": ["fedavg"]}, "at least two strategy entries"),
    ({**OPTIONS, "models": []}, "at least one model"),
    ({**OPTIONS, "protocols": ["knm"]}, r"unknown protocol\(s\) \['knm'\]"),
])
def test_bad_options_fail_when_the_section_is_built(options, message):
    with pytest.raises(ValueError, match=message):
        create_section("learning_curve", options)


def test_one_seed_gives_gains_without_an_interval(tmp_path: Path):
    one_seed = [r for r in records(GAINS) if r["seed"] == 0]
    out = create_section("learning_curve", OPTIONS).render(context(tmp_path, one_seed))
    assert "+5.0 (one seed, no interval)" in out.markdown and "nan" not in out.markdown
