"""The federation strategies declared once, as torch-free specs (``dssl.config.strategies``): each spec loads its
strategy, which builds with the spec's defaults; the validator and the config refuse a bad value at its key, an
unknown option is refused, and a grid runs a strategy only in its spec's frameworks."""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from dssl.config.strategies import FRAMEWORKS, STRATEGY_SPECS
from dssl.specs import option_defaults

from conftest import problems_at

REPO = Path(__file__).resolve().parents[2]
SPEC_FOLDER = REPO / "src" / "dssl" / "config" / "strategies"
NAMES = STRATEGY_SPECS.names()
# (strategy, option, a value outside its declaration, what the message says)
BAD_VALUES = [
    ("fedmar", "gamma_max", -5, "must be >= 0, got -5"),
    ("decmar", "sigma", 0.0, "must be > 0, got 0.0"),
    ("fedema", "tau", 0.0, "must be > 0, got 0.0"),
    ("fedema", "skipped", "wait", "'wait'"),
    ("fedu", "divergence_of", "decoder", "'decoder'"),
    ("fedssl", "encoder_ema", 1.5, "must be <= 1, got 1.5"),
    ("fedssl", "update_encoder", "mean", "'mean'"),
    ("ldawa", "warmup_rounds", 2.5, "must be an integer, got 2.5"),
    ("ldawa", "granularity", "block", "'block'"),
    ("featarc", "num_clusters", 0, "must be >= 1, got 0"),
    ("orchestra", "server_momentum", 1.0, "must be < 1, got 1.0"),
    ("fedavg", "aggregation", "median", "'median'"),
]


@pytest.mark.parametrize("name", NAMES)
def test_each_spec_loads_its_strategy_which_builds_with_the_declared_defaults(name: str) -> None:
    from dssl.federation import Strategy, create_strategy

    spec = STRATEGY_SPECS[name]
    cls = spec.load()
    assert issubclass(cls, Strategy) and cls.name == name
    built = create_strategy(name)
    assert type(built) is cls and type(built.config) is spec.config and built.spec is spec
    assert built.hparams == asdict(built.config) == option_defaults(spec.config)
    assert STRATEGY_SPECS.modules_of(name) == [f"dssl.config.strategies.{name}", spec.module]


def test_spec_modules_are_torch_free_and_import_only_what_they_extend() -> None:
    """Standard library, ranges, specs and the shared ``_*`` config modules: the validator imports them in every
    stage, and a stage's code lineage holds its own strategy's spec module, not its siblings'. The code is named
    relative to the package (a full module name in a string counts as an import in the lineage)."""
    allowed = {"dssl.config.ranges", "dssl.specs", "dssl.config.strategies"}
    for path in sorted(SPEC_FOLDER.glob("[!_]*.py")) + sorted(SPEC_FOLDER.glob("_[!_]*.py")):
        tree = ast.parse(path.read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        own = {m for m in imported if m and m.startswith("dssl.")} - allowed
        bases = {cls.__module__ for cls in STRATEGY_SPECS[path.stem].config.__mro__} if path.stem in NAMES else own
        assert all(m.startswith("dssl.config.strategies._") for m in own) and own <= bases, (path.name, own)
        strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        assert not any("dssl." in s for s in strings), path.name
    assert STRATEGY_SPECS["fedmar"].module == STRATEGY_SPECS["decmar"].module == "dssl.federation.strategies.mar"
    code = ("import sys, dssl.config.params as p; from dssl.config.strategies import STRATEGY_SPECS; "
            "list(STRATEGY_SPECS.values()); p.load_params('params.yaml'); assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)


@pytest.mark.parametrize("name, option, value, message", BAD_VALUES, ids=[f"{b[0]}.{b[1]}" for b in BAD_VALUES])
def test_a_bad_value_is_refused_at_its_key_path_and_when_the_config_is_built(good: dict, name: str, option: str,
                                                                             value, message: str) -> None:
    good["strategies"]["entry"] = {"name": name, option: value}
    problems = problems_at(good)
    assert list(problems) == [f"strategies.entry.{option}"]
    assert message in problems[f"strategies.entry.{option}"]
    with pytest.raises(ValueError, match=f"{option}: .*{message}"):
        STRATEGY_SPECS[name].options({option: value})


def test_the_validator_checks_types_and_the_registry_an_option_names(good: dict) -> None:
    good["strategies"]["entry"] = {"name": "fedmar", "keep_local": "yes", "alignment": "l2", "horizon": None}
    problems = problems_at(good)
    assert list(problems) == ["strategies.entry.keep_local", "strategies.entry.alignment"]
    assert "must be true or false, got 'yes'" in problems["strategies.entry.keep_local"]
    assert "unknown alignment 'l2'" in problems["strategies.entry.alignment"]
    assert "a_mmd_median" in problems["strategies.entry.alignment"]   # the hint lists the registry's names


def test_an_unknown_option_is_refused(good: dict) -> None:
    from dssl.federation import create_strategy

    good["strategies"]["entry"] = {"name": "fedema", "gamma_max": 0.1}
    problem = problems_at(good)["strategies.entry.gamma_max"]
    assert "unknown key" in problem
    assert "allowed keys: aggregation, divergence, ema_lambda, mixing, name, order, scaler, skipped, tau, train" \
        in problem
    with pytest.raises(ValueError, match="strategy 'fedema' has no option 'gamma_max'; its options: aggregation"):
        create_strategy("fedema", gamma_max=0.1)
    with pytest.raises(ValueError, match="strategy 'fedema' has no option 'gamma_max'"):
        STRATEGY_SPECS["fedema"].options({"gamma_max": 0.1})   # the one check create_strategy relies on


@pytest.mark.parametrize("options, message", [
    ({"name": "fedu", "divergence_of": "predictor"}, "divergence_of: predictor needs divergence: paper_flat"),
    ({"name": "fedmar", "gamma_max": 0.01, "gamma_min": 0.1}, "gamma_min <= gamma_max"),
    ({"name": "fedssl", "update_encoder": "ema"}, "needs encoder_ema"),
    ({"name": "fedssl", "encoder_ema": 0.5}, "only used with update_encoder: ema"),
])
def test_checks_between_options_stay_where_the_strategy_is_built(good: dict, options: dict, message: str) -> None:
    from dssl.federation import create_strategy

    name, values = options["name"], {k: v for k, v in options.items() if k != "name"}
    STRATEGY_SPECS[name].options(values)   # each value fits its declaration
    with pytest.raises(ValueError, match=message):
        create_strategy(name, **values)


def test_grids_run_each_strategy_in_its_specs_frameworks_only(good: dict) -> None:
    good["strategies"].update({f"s-{name}": {"name": name} for name in NAMES})
    for framework, grid in (("fl", "table1"), ("decl", "fig2a")):
        good["pretrain"][framework]["grids"][grid]["strategies"] = [f"s-{name}" for name in NAMES]
    problems = problems_at(good)
    expected = {}
    for framework, grid in (("fl", "table1"), ("decl", "fig2a")):
        for i, name in enumerate(NAMES):
            frameworks = STRATEGY_SPECS[name].frameworks
            assert set(frameworks) <= set(FRAMEWORKS)
            if framework not in frameworks:
                expected[f"pretrain.{framework}.grids.{grid}.strategies[{i}]"] = (
                    f"strategy 's-{name}' ({name}) runs in {', '.join(frameworks)}, not {framework}")
    assert {path: problems[path].partition("  (hint")[0].partition(": ")[2] for path in expected} == expected
    assert {path for path in problems if ".strategies[" in path} == set(expected)
    assert "fedavg" in problems["pretrain.decl.grids.fig2a.strategies[1]"]   # the hint: the DecL strategies


def test_the_report_states_an_entry_with_every_option_its_spec_resolves() -> None:
    from dssl.reporting.sections.comparison_text import strategy_text

    text = strategy_text("t2-fedema", {"name": "fedema", "aggregation": "data_size", "train": {"rounds": 10}})
    assert text == ("fedema (aggregation=data_size, divergence=paper, scaler=auto, tau=0.7, ema_lambda=0.8, "
                    "skipped=restart; train: rounds=10)")
    ring = strategy_text("ring", {"name": "decmar", "mixing": "uniform"})
    assert ring.endswith("z_summary=last_batch, mixing=uniform)")
