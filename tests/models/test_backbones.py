"""Backbone registry, feature shapes and parameter counts."""

from functools import lru_cache

import pytest
import torch

from dssl.models import BACKBONES, UnknownNameError, count_parameters, create_backbone
from dssl.models.vit import ViTBackbone
from dssl.models.vit import sincos_2d_pos_embed


@lru_cache(maxsize=None)
def backbone(name: str, size: int, chans: int) -> torch.nn.Module:
    """Each ResNet is built once per module: construction dominates these tests' time."""
    return create_backbone(name, size, chans)


SMALL = [("cnn_small", 128), ("vit_small", 96), ("resnet18_cifar", 512), ("resnet18_imagenet", 512)]


def test_registry_holds_the_params_yaml_names():
    assert set(BACKBONES) == {
        "resnet18_cifar", "resnet18_imagenet", "tiny_vit", "cnn_small", "vit_small"
    }


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
