"""Orchestra's Sinkhorn-Knopp step: equal-size soft assignments."""

import pytest
import torch

from dssl.methods.sinkhorn import sinkhorn_knopp


def test_rows_sum_to_one_and_centroids_share_the_samples_equally():
    torch.manual_seed(0)
    similarities = torch.randn(12, 4)
    similarities[:, 0] += 3.0  # every sample prefers centroid 0 ...
    assignments = sinkhorn_knopp(similarities, temperature=0.5, max_iters=1000, tol=1e-9)
    torch.testing.assert_close(assignments.sum(dim=1), torch.ones(12), atol=1e-4, rtol=0)
    # ... yet each centroid receives N / K = 3 samples' worth of assignment.
    torch.testing.assert_close(assignments.sum(dim=0), torch.full((4,), 3.0), atol=1e-3, rtol=0)
    assert (assignments >= 0).all()
    plain = torch.softmax(similarities / 0.5, dim=1).sum(dim=0)
    assert plain[0] > 6  # the softmax alone would give centroid 0 most of the mass


def test_two_by_two_by_hand():
    # Similarities with softmax rows [a, 1-a] and [b, 1-b] (a > b): the doubly-balanced plan.
    s = torch.tensor([[1.0, 0.0], [0.5, 0.0]], dtype=torch.float64)
    q = sinkhorn_knopp(s, temperature=1.0, max_iters=5000, tol=0.0)
    # Columns sum to 1 and rows sum to 1: q = [[x, 1-x], [1-x, x]], with the odds ratio preserved:
    # x^2 / (1-x)^2 = (e^1 / e^0) / (e^0.5 / e^0) = e^0.5.
    ratio = torch.exp(torch.tensor(0.25, dtype=torch.float64))  # sqrt(e^0.5)
    x = ratio / (1 + ratio)
    torch.testing.assert_close(q, torch.stack([torch.stack([x, 1 - x]), torch.stack([1 - x, x])]))


def test_bad_input():
    with pytest.raises(ValueError, match="samples, centroids"):
        sinkhorn_knopp(torch.zeros(3))
    with pytest.raises(ValueError, match="temperature"):
        sinkhorn_knopp(torch.zeros(3, 2), temperature=0)
