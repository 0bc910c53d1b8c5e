"""Sinkhorn-Knopp equal-size soft assignment (Orchestra's clustering step).

Lubana et al., "Orchestra: Unsupervised Federated Learning via Globally Consistent Clustering"
(ICML 2022), after SwAV (Caron et al., NeurIPS 2020) and Cuturi (NeurIPS 2013). Given similarities
S [N samples, K centroids], start from P = softmax(S / temperature) per sample and rescale it,
P_ij = r_j P_ij c_i, until every centroid holds 1/K of the mass and every sample 1/N (entropic
optimal transport to uniform marginals). Returned with each sample's row summing to 1, so that every
centroid receives N/K samples' worth of assignment. Orchestra: temperature 1/25 = 0.04, at most 100
iterations, stopped once the sample scalings change by less than 1e-2 in total (checked every 10).
"""

from __future__ import annotations

import torch


@torch.no_grad()
def sinkhorn_knopp(similarities: torch.Tensor, temperature: float = 0.04, max_iters: int = 100,
                   tol: float = 1e-2, check_every: int = 10) -> torch.Tensor:
    """Equal-size soft assignments [N, K] of N samples to K centroids from their similarities [N, K]."""
    if similarities.ndim != 2 or min(similarities.shape) < 1:
        raise ValueError(f"similarities must be [samples, centroids], got shape {tuple(similarities.shape)}")
    if temperature <= 0 or max_iters < 1:
        raise ValueError(f"temperature must be > 0 and max_iters >= 1, got {temperature}, {max_iters}")
    num_samples, num_centroids = similarities.shape
    probs = torch.softmax(similarities.double() / temperature, dim=1)  # [N, K]
    sample_scale = torch.full((num_samples,), 1.0 / num_samples, dtype=torch.float64, device=probs.device)
    for iteration in range(max_iters):
        centroid_scale = (1.0 / num_centroids) / (sample_scale @ probs)  # centroid masses -> 1/K
        new_sample_scale = (1.0 / num_samples) / (probs @ centroid_scale)  # sample masses -> 1/N
        change = float((sample_scale / new_sample_scale - 1).abs().nansum())
        sample_scale = new_sample_scale
        if iteration % check_every == 0 and change < tol:
            break
    plan = probs * sample_scale[:, None] * centroid_scale[None, :]
    return (plan * num_samples).to(similarities.dtype)
