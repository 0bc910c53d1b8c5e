"""Data model of paper A, Section 3.2: structure, sizes and seeding."""

from __future__ import annotations

import numpy as np
import pytest

from dssl.theory.data_model import (
    SampleSizes,
    assign_rare_classes,
    generate_dataset,
    population_second_moment,
    rare_fraction,
    sample_sizes,
)


def test_sample_sizes_follow_d_powers():
    sizes = sample_sizes(256, n_frequent_factor=1.0, beta=1.0, n_rare_factor=2.0, alpha=0.5)
    assert sizes == SampleSizes(n_frequent=256, n_rare=32)
    assert sizes.per_client == 544
    with pytest.raises(ValueError, match="alpha"):
        sample_sizes(64, alpha=1.0)
    with pytest.raises(ValueError, match="beta"):
        sample_sizes(64, beta=0.5)


def test_noise_free_samples_have_the_printed_structure():
    n_clients, d = 4, 12
    data = generate_dataset(d, n_clients, seed=3, sizes=SampleSizes(50, 5), mu=0.0)
    tau = d**0.2
    for client in data.clients:
        i = client.client
        others = [k for k in range(n_clients) if k != i]
        plus = client.x[client.labels == 2 * i]
        minus = client.x[client.labels == 2 * i + 1]
        assert np.all(plus[:, i] == 1.0) and np.all(minus[:, i] == -1.0)
        for block in (plus, minus):
            assert set(np.unique(block[:, others])) <= {0.0, -tau}  # -q_k tau with q_k in {0, 1}
            assert np.all(block[:, n_clients:] == 0.0)
        rare = client.x[client.labels == client.rare_class]
        expected = np.zeros(d)
        expected[client.rare_class] = 1.0  # x = e_{h_i} (+ mu xi)
        assert len(rare) == 5 and np.all(rare == expected)
        assert client.rare_class not in (2 * i, 2 * i + 1)
        assert len(plus) == len(minus) == 50


def test_default_tau_mu_and_equal_client_sizes():
    data = generate_dataset(64, 3, seed=0, sizes=SampleSizes(20, 4))
    assert data.tau == pytest.approx(64**0.2) and data.mu == pytest.approx(64**-0.2)
    assert {c.x.shape for c in data.clients} == {(44, 64)}


def test_same_seed_identical_other_seed_different():
    sizes = SampleSizes(10, 3)
    a = generate_dataset(32, 3, seed=5, sizes=sizes)
    b = generate_dataset(32, 3, seed=5, sizes=sizes)
    c = generate_dataset(32, 3, seed=6, sizes=sizes)
    for ca, cb, cc in zip(a.clients, b.clients, c.clients):
        np.testing.assert_array_equal(ca.x, cb.x)
        np.testing.assert_array_equal(ca.labels, cb.labels)
        assert not np.array_equal(ca.x, cc.x)


@pytest.mark.parametrize("scheme", ["random", "next", "offset"])
def test_rare_classes_never_own(scheme):
    for n in (2, 3, 5, 20):
        rare = assign_rare_classes(n, scheme, np.random.default_rng(0))
        for i, h in enumerate(rare):
            assert 0 <= h < 2 * n and h not in (2 * i, 2 * i + 1)


def test_offset_rare_classes_cover_second_block():
    rare = assign_rare_classes(6, "offset", np.random.default_rng(0))
    assert sorted(rare) == list(range(6, 12))


def test_class_mode_q_is_fixed_per_class():
    data = generate_dataset(12, 3, seed=1, sizes=SampleSizes(30, 2), mu=0.0, q_mode="class")
    client = data.clients[0]
    plus = client.x[client.labels == 0]
    assert np.all(plus == plus[0])


def test_empirical_second_moment_concentrates_on_population():
    n_clients, d = 3, 10
    sizes = SampleSizes(40_000, 2_000)
    data = generate_dataset(d, n_clients, seed=0, sizes=sizes)
    client = data.clients[1]
    s = client.x.T @ client.x / len(client.x)
    pop = population_second_moment(1, d, n_clients, data.tau, data.mu, rare_fraction(sizes), client.rare_class)
    np.testing.assert_allclose(s, pop, atol=0.05 * data.tau**2)
