"""Adding a method is one module, and it re-runs no existing cell (issue: a change re-runs only what it touches).

A copy of the sources gains ``methods/vicreg.py`` (a real VICReg, Bardes et al., ICLR 2022,
https://arxiv.org/abs/2105.04906, on the shared Siamese machinery); every code manifest the default's stages
depend on (per stage kind and per registry entry) is then byte-for-byte what it was, and the new module's own
closure holds the shared machinery it builds on.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from dssl.config.params import load_params
from dssl.pipeline.catalogue import Catalogue, component_modules, used_components
from dssl.pipeline.code import code_manifest
from dssl.pipeline.codedeps import closure_files, import_closure
from dssl.registry import declarations

REPO = Path(__file__).resolve().parents[2]

VICREG = '''"""VICReg [0]: variance-invariance-covariance regularisation of two views' embeddings, no predictor,
no target network. Coefficients as the paper's default: invariance 25, variance 25, covariance 1.

References:
    [0] VICReg, 2022, https://arxiv.org/abs/2105.04906
"""

from __future__ import annotations

from typing import Annotated

import torch
import torch.nn.functional as F
from torch import nn

from dssl.config.ranges import Range
from dssl.methods.augment import FedSSLTransform
from dssl.methods.base import register_method
from dssl.methods.heads import FedSSLMLPHead
from dssl.methods.siamese import SiameseMethod


def _off_diagonal(matrix: torch.Tensor) -> torch.Tensor:
    n = matrix.shape[0]
    return matrix.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()


class VICRegLoss(nn.Module):
    """lambda * MSE(z1, z2) + mu * (hinge on each dimension's std, both views) + nu * off-diagonal covariance."""

    def __init__(self, invariance: float = 25.0, variance: float = 25.0, covariance: float = 1.0) -> None:
        super().__init__()
        self.weights = (invariance, variance, covariance)

    def forward(self, p1: torch.Tensor, p2: torch.Tensor, t1: torch.Tensor, t2: torch.Tensor) -> torch.Tensor:
        del t1, t2  # no target branch: both views' embeddings are the online ones
        invariance, variance, covariance = self.weights
        z1, z2 = p1 - p1.mean(dim=0), p2 - p2.mean(dim=0)
        std = [torch.sqrt(z.var(dim=0) + 1e-4) for z in (z1, z2)]
        spread = sum(F.relu(1 - s).mean() for s in std) / 2
        dim = z1.shape[1]
        cov = sum(_off_diagonal(z.T @ z / (len(z) - 1)).pow(2).sum() / dim for z in (z1, z2))
        return invariance * F.mse_loss(p1, p2) + variance * spread + covariance * cov


@register_method
class VICReg(SiameseMethod):
    """VICReg [0] on paper B's projector (d-8d-4d), no predictor, no EMA target."""

    name = "vicreg"

    def __init__(self, encoder: nn.Module, image_size: int, in_chans: int, *,
                 invariance: Annotated[float, Range(0.0)] = 25.0,
                 variance: Annotated[float, Range(0.0)] = 25.0,
                 covariance: Annotated[float, Range(0.0)] = 1.0) -> None:
        del in_chans
        dim = encoder.feature_dim
        hparams = dict(invariance=invariance, variance=variance, covariance=covariance, stop_gradient=False,
                       ema_target=False, momentum=0.0, target_optimized=False)
        super().__init__(encoder, hparams, projector=FedSSLMLPHead(dim, 8 * dim, 4 * dim), predictor=None,
                         criterion=VICRegLoss(invariance, variance, covariance),
                         transform=FedSSLTransform(image_size, 0.08, 0.5))
'''


def _project_copy(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(REPO / "src" / "dssl", project / "src" / "dssl",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return project


def _closures(params: dict, project: Path) -> dict[str, list[Path]]:
    """The files behind every code manifest of the default's stages (``dssl.pipeline.code.manifests``: each
    stage kind's and each registry entry's); a file whose bytes did not change keeps its digest, so equal
    file lists are equal manifests."""
    catalogue = Catalogue(params, project)
    entries = {kind.name: kind.module for kind in catalogue.kinds_with_stages() if kind.name != "code"}
    entries.update({c: component_modules(c) for c in used_components(params)})
    root = project / "src"
    import_closure.cache_clear()   # the closures are cached per root: read the sources as they are now
    return {name: [p.relative_to(root) for p in closure_files(module, root)] for name, module in entries.items()}


def test_a_new_method_module_leaves_every_existing_manifest_as_it_was(tmp_path: Path) -> None:
    params = load_params(REPO / "params.yaml")
    project = _project_copy(tmp_path)
    before = _closures(params, project)
    (project / "src" / "dssl" / "methods" / "vicreg.py").write_text(VICREG)
    after = _closures(params, project)
    assert after == before   # no stage kind, method, backbone, strategy, protocol or rule moved
    assert all(Path("dssl/methods/vicreg.py") not in files for files in after.values())
    own = code_manifest("dssl.methods.vicreg", project)["files"]
    assert {"src/dssl/methods/vicreg.py", "src/dssl/methods/siamese.py", "src/dssl/methods/base.py"} <= set(own)
    assert not {"src/dssl/methods/byol.py", "src/dssl/methods/simsiam.py", "src/dssl/methods/mae.py"} & set(own)


def test_the_registry_finds_a_method_by_its_declaration_alone(tmp_path: Path, monkeypatch) -> None:
    # the declaration is read from the module's syntax tree: the name is known without importing torch code
    folder = tmp_path / "dssl" / "methods"
    folder.mkdir(parents=True)
    (folder / "vicreg.py").write_text(VICREG)
    import dssl.registry as registry

    monkeypatch.setattr(registry, "__file__", str(tmp_path / "dssl" / "registry.py"))
    declarations.cache_clear()
    try:
        assert registry.declared_names("methods", "register_method") == {"vicreg": "vicreg"}
    finally:
        declarations.cache_clear()
