"""The stacked lr x weight-decay heads of the linear probes train as torch's Adam trains each head alone."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from dssl.evaluation.configs import LinearProbeConfig
from dssl.evaluation.linear_probe import HeadGrid


def _alone(fit, val, classes: int, cfg: LinearProbeConfig, seed: int, lr: float, weight_decay: float):
    """One head with nn.Linear and torch.optim.Adam on the same batches; its best validation epoch."""
    (x, y), (vx, vy) = fit, val
    head = nn.Linear(x.shape[1], classes)
    nn.init.zeros_(head.weight)
    nn.init.zeros_(head.bias)
    optimizer = torch.optim.Adam(head.parameters(), lr=lr, weight_decay=weight_decay)
    generator = torch.Generator().manual_seed(seed)
    best = (0, -1.0, None)
    for epoch in range(1, cfg.epochs + 1):
        for batch in torch.randperm(len(x), generator=generator).split(cfg.batch_size):
            optimizer.zero_grad()
            F.cross_entropy(head(x[batch]), y[batch]).backward()
            optimizer.step()
        if epoch % cfg.eval_every == 0 or epoch == cfg.epochs:
            with torch.no_grad():
                acc = float((head(vx).argmax(dim=1) == vy).float().mean())
            if acc > best[1]:
                best = (epoch, acc, torch.cat([head.weight, head.bias[:, None]], dim=1).detach().clone())
    return best


def test_every_grid_point_matches_a_head_trained_alone_with_torch_adam() -> None:
    generator = torch.Generator().manual_seed(0)
    classes, dim = 4, 6
    centres = torch.randn(classes, dim, generator=generator)
    y, vy = torch.arange(60) % classes, torch.arange(40) % classes
    x = centres[y] + 1.5 * torch.randn(60, dim, generator=generator)
    vx = centres[vy] + 1.5 * torch.randn(40, dim, generator=generator)
    cfg = LinearProbeConfig(lr_grid=(1e-2, 1e-1), weight_decay_grid=(0.0, 1e-1), epochs=12, batch_size=16,
                            eval_every=3)
    best, grid = HeadGrid((x, y), (vx, vy), classes, cfg, seed=5).select()

    assert [(g["lr"], g["weight_decay"]) for g in grid] == [(1e-2, 0.0), (1e-2, 1e-1), (1e-1, 0.0), (1e-1, 1e-1)]
    alone = [_alone((x, y), (vx, vy), classes, cfg, 5, g["lr"], g["weight_decay"]) for g in grid]
    for entry, (epoch, acc, params) in zip(grid, alone):
        assert (entry["epoch"], entry["val_acc"]) == (epoch, acc)
    chosen = max(range(len(grid)), key=lambda i: (grid[i]["val_acc"], -i))
    epoch, acc, params = alone[chosen]
    assert (best.lr, best.weight_decay, best.epoch, best.val_acc) == (grid[chosen]["lr"], grid[chosen]["weight_decay"],
                                                                       epoch, acc)
    torch.testing.assert_close(torch.cat([best.head.weight, best.head.bias[:, None]], dim=1), params,
                               rtol=1e-4, atol=1e-5)
    # the decay and the lr matter: the grid's heads differ
    assert len({round(float(a[2].abs().sum()), 4) for a in alone}) == 4


def test_a_checkpoint_of_the_earlier_one_head_at_a_time_layout_restarts_the_grid(tmp_path) -> None:
    """The checkpoint's fingerprint names the inputs, not the code: a probe stopped under the earlier layout
    (one head at a time: grid point, head, optimizer) starts its heads again instead of failing on it."""
    from dssl.evaluation.progress import Checkpoint

    generator = torch.Generator().manual_seed(1)
    x, y = torch.randn(24, 3, generator=generator), torch.arange(24) % 2
    cfg = LinearProbeConfig(lr_grid=(1e-2,), weight_decay_grid=(0.0, 1e-3), epochs=4, batch_size=8, eval_every=2)
    fresh = HeadGrid((x, y), (x, y), 2, cfg, seed=0).select()[1]
    Checkpoint(tmp_path, "same inputs").save({"point": 1, "grid": [], "best": None, "epoch": 2, "step": 0})
    assert HeadGrid((x, y), (x, y), 2, cfg, seed=0, checkpoint=Checkpoint(tmp_path, "same inputs")).select()[1] == fresh
