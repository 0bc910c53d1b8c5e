"""Adding a method is one module with its spec, and it re-runs no existing cell (issue: a change re-runs only what
it touches).

A copy of the sources gains ``config/methods/vicreg.py`` (the spec: name, hyper-parameters, implementing class) and
``methods/vicreg.py`` (a real VICReg, Bardes et al., ICLR 2022, https://arxiv.org/abs/2105.04906, on the shared
Siamese machinery); every code manifest the default's stages depend on (per stage kind and per registry entry) is
then byte-for-byte what it was, the new method's own closure holds the shared machinery it builds on, and in that
copy a params entry ``method: vicreg`` validates and builds a method that trains.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from dssl.config.params import load_params
from dssl.pipeline.catalogue import Catalogue, component_modules, used_components
from dssl.pipeline.code import code_manifest
from dssl.pipeline.codedeps import closure_files, import_closure
from dssl.registry import SpecRegistry, spec_stems

REPO = Path(__file__).resolve().parents[2]

VICREG_SPEC = '''"""VICReg's hyper-parameters (``models.<model>.hparams`` of ``method: vicreg``), declared once.

References:
    [0] VICReg, 2022, https://arxiv.org/abs/2105.04906
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from dssl.config.methods import MethodSpec
from dssl.config.ranges import Range
from dssl.specs import Options


@dataclass(frozen=True)
class VICRegConfig(Options):
    """VICReg [0]: the loss's coefficients, the paper's defaults: invariance 25, variance 25, covariance 1."""

    invariance: Annotated[float, Range(0.0)] = 25.0
    variance: Annotated[float, Range(0.0)] = 25.0
    covariance: Annotated[float, Range(0.0)] = 1.0


SPEC = MethodSpec("vicreg", VICRegConfig, "methods.vicreg:VICReg")
'''

VICREG = '''"""VICReg [0]: variance-invariance-covariance regularisation of two views' embeddings, no predictor,
no target network.

References:
    [0] VICReg, 2022, https://arxiv.org/abs/2105.04906
"""

from __future__ import annotations

from dataclasses import asdict

import torch
import torch.nn.functional as F
from torch import nn

from dssl.config.methods.vicreg import VICRegConfig
from dssl.methods.augment import FedSSLTransform
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


class VICReg(SiameseMethod):
    """VICReg [0] on paper B's projector (d-8d-4d), no predictor, no EMA target."""

    def __init__(self, encoder: nn.Module, image_size: int, in_chans: int, config: VICRegConfig) -> None:
        del in_chans
        dim = encoder.feature_dim
        hparams = dict(asdict(config), stop_gradient=False, ema_target=False, momentum=0.0, target_optimized=False)
        super().__init__(encoder, hparams, projector=FedSSLMLPHead(dim, 8 * dim, 4 * dim), predictor=None,
                         criterion=VICRegLoss(config.invariance, config.variance, config.covariance),
                         transform=FedSSLTransform(image_size, 0.08, 0.5))
'''

# Run in the copy: a params entry for VICReg validates, and the method it names builds and trains.
USE_IT = '''
from pathlib import Path
import torch
from dssl.config.params import read_params, validate
from dssl.methods import create_method
params = read_params("params.yaml")
params["report"].pop("verdicts_elsewhere", None)   # records of other runs, kept in the repository
params["models"]["vicreg-cnn"] = {"method": "vicreg", "backbone": "cnn_small", "hparams": {"covariance": 2.0}}
assert validate(params, Path(".")) == [], validate(params, Path("."))
params["models"]["vicreg-cnn"]["hparams"]["covariance"] = -1.0
print([str(p) for p in validate(params, Path("."))])
torch.manual_seed(0)
method = create_method("vicreg", "cnn_small", 8, 1, covariance=2.0)
loss = method.training_loss(torch.rand(8, 1, 8, 8))["loss"]
loss.backward()
print(method.name, method.hparams["covariance"], bool(torch.isfinite(loss)))
'''


def _project_copy(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(REPO / "src" / "dssl", project / "src" / "dssl",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return project


def _add_vicreg(project: Path) -> None:
    (project / "src" / "dssl" / "config" / "methods" / "vicreg.py").write_text(VICREG_SPEC)
    (project / "src" / "dssl" / "methods" / "vicreg.py").write_text(VICREG)


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
    _add_vicreg(project)
    after = _closures(params, project)
    assert after == before   # no stage kind, method, backbone, strategy, protocol or rule moved
    new = {Path("dssl/methods/vicreg.py"), Path("dssl/config/methods/vicreg.py")}
    assert all(not new & set(files) for files in after.values())
    own = code_manifest(["dssl.config.methods.vicreg", "dssl.methods.vicreg"], project)["files"]
    assert {"src/dssl/methods/vicreg.py", "src/dssl/config/methods/vicreg.py", "src/dssl/methods/siamese.py",
            "src/dssl/methods/base.py"} <= set(own)
    assert not {"src/dssl/methods/byol.py", "src/dssl/methods/simsiam.py", "src/dssl/methods/mae.py",
                "src/dssl/config/methods/byol.py", "src/dssl/config/methods/simsiam.py"} & set(own)


def test_the_new_method_validates_builds_and_trains_in_the_copy(tmp_path: Path) -> None:
    project = _project_copy(tmp_path)
    _add_vicreg(project)
    shutil.copy(REPO / "params.yaml", project / "params.yaml")
    env = {**os.environ, "PYTHONPATH": str(project / "src")}
    run = subprocess.run([sys.executable, "-c", USE_IT], cwd=project, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    refused, built = run.stdout.splitlines()[-2:]
    assert "models.vicreg-cnn.hparams.covariance: must be >= 0, got -1.0" in refused
    assert built == "vicreg 2.0 True"


def test_the_registry_finds_a_method_by_its_spec_module_alone(tmp_path: Path, monkeypatch) -> None:
    # the names are the spec modules' stems: listing them imports nothing, neither spec nor torch code
    folder = tmp_path / "dssl" / "config" / "methods"
    folder.mkdir(parents=True)
    (folder / "vicreg.py").write_text(VICREG_SPEC)
    (folder / "_shared.py").write_text("")   # a helper several specs share is no entry
    import dssl.registry as registry

    monkeypatch.setattr(registry, "__file__", str(tmp_path / "dssl" / "registry.py"))
    spec_stems.cache_clear()
    try:
        assert SpecRegistry("method", "config.methods").names() == ["vicreg"]
    finally:
        spec_stems.cache_clear()
