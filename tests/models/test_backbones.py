"""Backbone specs (``dssl.config.backbones``), feature shapes and parameter counts."""

import subprocess
import sys
from dataclasses import asdict
from functools import lru_cache

import pytest
import torch

from dssl.config.backbones import BACKBONE_SPECS, FAMILIES
from dssl.models import UnknownNameError, count_parameters, create_backbone
from dssl.models.vit import ViTBackbone
from dssl.models.vit import sincos_2d_pos_embed
from dssl.specs import NoOptions, option_defaults


@lru_cache(maxsize=None)
def backbone(name: str, size: int, chans: int) -> torch.nn.Module:
    """Each ResNet is built once per module: construction dominates these tests' time."""
    return create_backbone(name, size, chans)


SMALL = [("cnn_small", 128), ("vit_small", 96), ("resnet18_cifar", 512), ("resnet18_imagenet", 512)]


NAMES = BACKBONE_SPECS.names()
BUILD_AT = {"tiny_vit": (28, 3)}   # patch 14 divides 28; every other backbone builds at 16 px, 1 channel


def test_the_names_are_the_spec_modules_and_looking_one_up_imports_no_torch():
    assert NAMES == ["cnn_small", "resnet18_cifar", "resnet18_imagenet", "tiny_vit", "vit_small"]
    code = ("import sys, dssl.config.backbones as b; names = b.BACKBONE_SPECS.names(); "
            "spec = b.BACKBONE_SPECS['vit_small']; from dssl.config.lookups import backbone_families; "
            "families = backbone_families(); print(names, spec.family, families['tiny_vit']); "
            "print(sorted(m for m in sys.modules if m == 'torch' or m == 'timm' or m.startswith('dssl.models')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [f"{NAMES} vit vit", "[]"]


@pytest.mark.parametrize("name", NAMES)
def test_each_spec_builds_its_backbone_of_its_family_with_the_declared_defaults(name):
    spec = BACKBONE_SPECS[name]
    assert spec.family in FAMILIES and spec.module in ("dssl.models.cnn", "dssl.models.vit")
    assert BACKBONE_SPECS.modules_of(name) == [f"dssl.config.backbones.{name}", spec.module]
    assert spec.config is NoOptions or spec.config.__doc__
    # each cites the papers whose sizes it follows; cnn_small is this project's own CPU network
    assert name == "cnn_small" or "https://" in sys.modules[f"dssl.config.backbones.{name}"].__doc__
    model = create_backbone(name, *BUILD_AT.get(name, (16, 1)))
    assert isinstance(model, ViTBackbone) == (spec.family == "vit")
    # the builder takes exactly the declared options, with no defaults of its own
    torch.manual_seed(0)
    explicit = spec.load()(*BUILD_AT.get(name, (16, 1)), **option_defaults(spec.config))
    torch.manual_seed(0)
    built = create_backbone(name, *BUILD_AT.get(name, (16, 1)))
    assert all(torch.equal(a, b) for a, b in zip(explicit.state_dict().values(), built.state_dict().values()))
    assert asdict(spec.options()) == option_defaults(spec.config)


def test_the_declared_defaults_are_the_papers_and_profiles_sizes():
    assert asdict(BACKBONE_SPECS["cnn_small"].options()) == {"widths": (32, 64, 128)}
    assert asdict(BACKBONE_SPECS["tiny_vit"].options()) == {"patch_size": 14}
    assert asdict(BACKBONE_SPECS["vit_small"].options()) == {"patch_size": None, "depth": 2, "num_heads": 4}
    assert BACKBONE_SPECS["resnet18_cifar"].config is BACKBONE_SPECS["resnet18_imagenet"].config is NoOptions


def test_an_unknown_option_or_a_value_outside_its_range_is_refused_before_building():
    with pytest.raises(ValueError, match=r"backbone 'vit_small' has no option 'patch'; its options: patch_size, depth"):
        create_backbone("vit_small", 16, 1, patch=2)
    with pytest.raises(ValueError, match="has no option"):
        create_backbone("resnet18_cifar", 16, 1, widths=(8,))
    with pytest.raises(ValueError, match="depth: must be >= 1, got 0"):
        create_backbone("vit_small", 16, 1, depth=0)
    with pytest.raises(ValueError, match="widths: must be >= 1, got 0"):
        create_backbone("cnn_small", 16, 1, widths=(8, 0))
    with pytest.raises(ValueError, match="patch_size: must be an integer"):
        create_backbone("tiny_vit", 28, 3, patch_size=7.0)


@pytest.mark.parametrize(("name", "dim"), SMALL)
def test_pooled_feature_shape(name, dim):
    model = backbone(name, 16, 1)
    assert model.feature_dim == dim
    assert model(torch.rand(3, 1, 16, 16)).shape == (3, dim)


@pytest.mark.parametrize(
    ("name", "size", "grid"),
    [("cnn_small", 16, 4), ("resnet18_cifar", 16, 2), ("resnet18_imagenet", 64, 2)],
)
def test_cnn_feature_map_and_stride(name, size, grid):
    model = backbone(name, size, 1).eval()
    x = torch.rand(2, 1, size, size)
    fmap = model.forward_features(x)
    assert fmap.shape == (2, model.feature_dim, grid, grid)
    assert size // model.feature_stride == grid
    # forward() is the spatial mean of the feature map (MAE-CNN relies on it).
    torch.testing.assert_close(model(x), fmap.mean(dim=(2, 3)))


def test_resnet18_parameter_counts():
    # torchvision resnet18: 11,689,512 with its 512 x 1000 + 1000 classifier (513,000) removed.
    assert count_parameters(create_backbone("resnet18_imagenet", 224, 3)) == 11_176_512
    # CIFAR stem: the 7x7x3x64 first conv (9,408) becomes 3x3x3x64 (1,728).
    assert count_parameters(create_backbone("resnet18_cifar", 32, 3)) == 11_168_832


def test_vit_exposes_the_parts_mae_needs():
    vit = create_backbone("vit_small", 16, 1)
    assert isinstance(vit, ViTBackbone)
    assert (vit.patch_size, vit.grid_size, vit.num_patches, vit.embed_dim) == (4, 4, 16, 96)
    assert vit.cls_token.shape == (1, 1, 96)
    assert vit.pos_embed.shape == (1, 17, 96) and not vit.pos_embed.requires_grad
    assert len(vit.blocks) == 2
    assert vit.patch_embed(torch.rand(2, 1, 16, 16)).shape == (2, 16, 96)
    assert vit.norm.normalized_shape == (96,)


def test_sincos_position_embedding():
    emb = sincos_2d_pos_embed(8, grid_size=2, cls_token=True)[0]
    assert emb.shape == (5, 8)
    assert torch.all(emb[0] == 0)  # class token
    # Patch (row 0, col 0): sin(0) = 0, cos(0) = 1 in both halves.
    torch.testing.assert_close(emb[1], torch.tensor([0.0, 0, 1, 1, 0, 0, 1, 1]))
    # Patch (row 0, col 1): the row half is unchanged, the column half moves.
    torch.testing.assert_close(emb[2, :4], emb[1, :4])
    assert not torch.equal(emb[2, 4:], emb[1, 4:])


def test_tiny_vit_architecture():
    vit = create_backbone("tiny_vit", 224, 3)
    assert (vit.patch_size, vit.grid_size, vit.embed_dim, len(vit.blocks)) == (14, 16, 320, 9)
    assert vit.blocks[0].attn.num_heads == 16
    # Hand count: 9 blocks x 1,232,960 + patch embed 188,480 + cls 320 + final norm 640;
    # the 257 x 320 fixed position embedding (82,240) is not trainable.
    assert count_parameters(vit) == 11_286_080
    assert count_parameters(vit, trainable_only=False) == 11_286_080 + 82_240


def test_overrides_and_bad_sizes():
    assert create_backbone("vit_small", 16, 1, patch_size=2).num_patches == 64
    with pytest.raises(ValueError, match="not a multiple of the ViT patch size"):
        create_backbone("vit_small", 18, 1)


def test_unknown_name_lists_known_names():
    with pytest.raises(KeyError, match="known: cnn_small, resnet18_cifar"):
        create_backbone("resnet50", 32, 3)
    with pytest.raises(ValueError):
        create_backbone("resnet50", 32, 3)
    assert str(UnknownNameError("plain")) == "plain"


def test_vit_small_keeps_a_four_by_four_token_grid_at_any_multiple_of_four() -> None:
    assert create_backbone("vit_small", 16, 1).patch_size == 4
    assert create_backbone("vit_small", 8, 1).patch_size == 2
    assert create_backbone("vit_small", 8, 1).num_patches == 16


def test_vit_pool_avg_returns_the_mean_of_the_final_norm_patch_tokens() -> None:
    torch.manual_seed(0)
    vit = create_backbone("vit_small", 8, 1).eval()
    x = torch.rand(3, 1, 8, 8)
    tokens = vit.forward_features(x)            # [B, 1 + 16, D] after the final norm
    assert torch.equal(vit(x), tokens[:, 0])    # default: the class token
    vit.set_pool("avg")
    torch.testing.assert_close(vit(x), tokens[:, 1:].mean(dim=1))
    with pytest.raises(ValueError, match="unknown ViT pool 'mean'; known: token, avg"):
        vit.set_pool("mean")
