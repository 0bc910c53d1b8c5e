"""Deterministic mode without torch's NaN fill of new memory still gives the same bits; the global RNG
seeded per client.

``configure_determinism`` switches ``torch.utils.deterministic.fill_uninitialized_memory`` off for
speed; that is only sound if no op of any strategy reads memory it never wrote. Such an op would read
NaN with the fill and leftover bytes without it, so every strategy's run is compared both ways.
"""

from __future__ import annotations

import pytest
import torch

import dssl.federation.simulator as simulator_module
from dssl.federation.reproducibility import configure_determinism, seed_global_rng

from strategy_cases import CASES, TIMINGS, assert_same, build

pytestmark = pytest.mark.usefixtures("single_thread", "torch_determinism_restored")


@pytest.fixture
def torch_determinism_restored():
    """Puts back torch's process-wide deterministic mode and fill flag that a test changes."""
    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
              torch.utils.deterministic.fill_uninitialized_memory)
    yield
    torch.use_deterministic_algorithms(before[0], warn_only=before[1])
    torch.utils.deterministic.fill_uninitialized_memory = before[2]


def test_deterministic_mode_is_strict():
    """Warn-only mode lets the GPU attention kernels run non-deterministically (they warn): two Tiny-ViT
    runs on an H200 ended 0.018 apart. Strict, a kernel is deterministic or the run stops."""
    configure_determinism(True)
    assert torch.are_deterministic_algorithms_enabled()
    assert not torch.is_deterministic_algorithms_warn_only_enabled()


def test_deterministic_mode_does_not_fill_new_memory():
    torch.utils.deterministic.fill_uninitialized_memory = True  # torch's default
    configure_determinism(True)
    assert torch.are_deterministic_algorithms_enabled()
    assert not torch.utils.deterministic.fill_uninitialized_memory


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[4]}-{i}" for i, c in enumerate(CASES)])
def test_every_strategy_trains_to_the_same_bits_with_and_without_the_fill(case, monkeypatch):
    without_fill = build(case).run()

    def with_fill(enabled: bool = True) -> None:
        configure_determinism(enabled)
        torch.utils.deterministic.fill_uninitialized_memory = True

    monkeypatch.setattr(simulator_module, "configure_determinism", with_fill)
    filled = build(case).run()
    assert_same(without_fill.final_state, filled.final_state, "final_state")
    assert_same(without_fill.global_states, filled.global_states, "global_states")
    for a, b in zip(without_fill.metrics, filled.metrics):
        assert_same({k: v for k, v in a.items() if k not in TIMINGS}, {k: v for k, v in b.items() if k not in TIMINGS})


def test_seed_global_rng_gives_the_cpu_generator_the_state_torch_manual_seed_gives():
    with torch.random.fork_rng(devices=[]):
        seed_global_rng(2**62 + 12345, torch.device("cpu"))
        ours = torch.get_rng_state()
        torch.rand(7)  # move the generator on, so that equality below is the seed's doing
        torch.manual_seed(2**62 + 12345)
        assert torch.equal(ours, torch.get_rng_state())
