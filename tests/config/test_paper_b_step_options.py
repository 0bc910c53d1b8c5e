"""Paper B's CIFAR-100 profile trains and evaluates with the step options of its CIFAR-10 profile."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
STEP_KEYS = ("device", "precision", "channels_last", "compile")


def _step_options(params: dict) -> dict[str, dict]:
    """The step keys of every training section and evaluation protocol, by where they are set."""
    found = {f"pretrain.{framework}.train": params["pretrain"][framework]["train"]
             for framework in ("fl", "decl", "central", "local")}
    found |= {f"evaluate.{protocol}": params["evaluate"][protocol]
              for protocol in ("linear_probe", "linear_probe_10pct", "linear_probe_1pct")}
    return {where: {k: section[k] for k in STEP_KEYS if k in section} for where, section in found.items()}


def test_cifar100_profile_has_the_cifar10_profiles_device_and_step_options() -> None:
    cifar10 = yaml.safe_load((REPO / "configs" / "paper_b.yaml").read_text())
    cifar100 = yaml.safe_load((REPO / "configs" / "paper_b_cifar100.yaml").read_text())
    expected = _step_options(cifar10)
    assert all(options.get("device") == "cuda" for options in expected.values())
    assert _step_options(cifar100) == expected
