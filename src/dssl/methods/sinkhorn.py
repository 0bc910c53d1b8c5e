"""Sinkhorn-Knopp equal-size soft assignment (Orchestra's clustering step).

Lubana et al., "Orchestra: Unsupervised Federated Learning via Globally Consistent Clustering"
(ICML 2022) [0], after SwAV (Caron et al., NeurIPS 2020) [1] and Cuturi (NeurIPS 2013) [2]. Given similarities
S [N samples, K centroids], start from P = softmax(S / temperature) per sample and rescale it,
P_ij = r_j P_ij c_i, until every centroid holds 1/K of the mass and every sample 1/N (entropic
optimal transport to uniform marginals). Returned with each sample's row summing to 1, so that every
centroid receives N/K samples' worth of assignment. Orchestra: temperature 1/25 = 0.04, at most 100
iterations, stopped once the sample scalings change by less than 1e-2 in total (checked every 10): this
function's defaults. SwAV [1] runs a fixed 3 iterations at epsilon = 0.05 (its entropic regularisation, the
temperature here) on each batch's codes.

The stopping test needs the change on the host. On the CPU the loop stops at the first check that
passes; on an accelerator it runs every iteration without looking, keeps the scalings of each check
iteration, and reads all the checks in one transfer at the end: the same iteration is chosen, so the
same assignment comes out, with one host sync per call instead of one per iteration.

References:
    [0] Orchestra, 2022, https://arxiv.org/abs/2205.11506
    [1] SwAV, 2020, https://arxiv.org/abs/2006.09882
    [2] Cuturi, "Sinkhorn Distances: Lightspeed Computation of Optimal Transport", NeurIPS 2013
"""

from __future__ import annotations

import torch


@torch.no_grad()
def sinkhorn_knopp(similarities: torch.Tensor, temperature: float = 0.04, max_iters: int = 100,
                   tol: float = 1e-2, check_every: int = 10, checks_at_end: bool | None = None) -> torch.Tensor:
    """Equal-size soft assignments [N, K] of N samples to K centroids from their similarities [N, K].
    ``checks_at_end``: read the convergence checks once at the end (default: off the CPU; see module)."""
    if similarities.ndim != 2 or min(similarities.shape) < 1:
        raise ValueError(f"similarities must be [samples, centroids], got shape {tuple(similarities.shape)}")
    if temperature <= 0 or max_iters < 1:
        raise ValueError(f"temperature must be > 0 and max_iters >= 1, got {temperature}, {max_iters}")
    num_samples, num_centroids = similarities.shape
    probs = torch.softmax(similarities.double() / temperature, dim=1)  # [N, K]
    sample_scale = torch.full((num_samples,), 1.0 / num_samples, dtype=torch.float64, device=probs.device)
    on_host = probs.device.type == "cpu" if checks_at_end is None else not checks_at_end
    checks: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []   # (change, sample, centroid scales)
    for iteration in range(max_iters):
        centroid_scale = (1.0 / num_centroids) / (sample_scale @ probs)  # centroid masses -> 1/K
        new_sample_scale = (1.0 / num_samples) / (probs @ centroid_scale)  # sample masses -> 1/N
        checked = iteration % check_every == 0
        change = (sample_scale / new_sample_scale - 1).abs().nansum() if checked else None
        sample_scale = new_sample_scale
        if checked and on_host and float(change) < tol:
            break
        if checked and not on_host:
            checks.append((change, sample_scale, centroid_scale))
    if checks:  # accelerator: the first check that passed, read in one transfer (the last iteration if none)
        passed = (torch.stack([change for change, _, _ in checks]) < tol).tolist()
        if True in passed:
            _, sample_scale, centroid_scale = checks[passed.index(True)]
    plan = probs * sample_scale[:, None] * centroid_scale[None, :]
    return (plan * num_samples).to(similarities.dtype)
