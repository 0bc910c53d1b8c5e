"""MAE: patchify, per-sample masking, masked-only loss, encoder on visible tokens, Tiny-ViT size."""

import pytest
import torch

from dssl.methods import create_method
from dssl.methods.mae import MAELoss, patchify, random_patch_mask, unpatchify
from dssl.models import count_parameters


def test_patchify_layout_by_hand():
    image = torch.arange(16.0).view(1, 1, 4, 4)
    patches = patchify(image, 2)
    assert patches.shape == (1, 4, 4)
    torch.testing.assert_close(patches[0, 0], torch.tensor([0.0, 1, 4, 5]))
    torch.testing.assert_close(patches[0, 1], torch.tensor([2.0, 3, 6, 7]))
    torch.testing.assert_close(patches[0, 2], torch.tensor([8.0, 9, 12, 13]))


def test_patchify_round_trip():
    images = torch.rand(2, 3, 16, 16)
    patches = patchify(images, 4)
    assert patches.shape == (2, 16, 48)
    torch.testing.assert_close(unpatchify(patches, 4, 3), images)


def test_mask_count_per_sample_and_consistency():
    mask = random_patch_mask(8, 16, 0.75, torch.device("cpu"), torch.Generator().manual_seed(0))
    # int(16 * 0.25) = 4 visible, 12 masked, in every sample.
    assert torch.all(mask.mask.sum(dim=1) == 12)
    assert mask.ids_keep.shape == (8, 4)
    assert torch.all(mask.mask.gather(1, mask.ids_keep) == 0)
    # ids_restore is a permutation whose inverse starts with the visible patches.
    assert torch.equal(mask.ids_restore.sort(dim=1).values, torch.arange(16).expand(8, -1))
    assert torch.equal(mask.ids_restore.argsort(dim=1)[:, :4], mask.ids_keep)
    # Different samples get different patches.
    assert len({tuple(row.tolist()) for row in mask.mask}) > 1


def test_mask_is_reproducible_with_a_generator():
    def draw(seed):
        return random_patch_mask(4, 256, 0.75, torch.device("cpu"), torch.Generator().manual_seed(seed))

    assert torch.equal(draw(1).mask, draw(1).mask)
    assert not torch.equal(draw(1).mask, draw(2).mask)
    assert torch.all(draw(3).mask.sum(dim=1) == 192)  # Tiny-ViT: 256 patches, 64 visible


def test_loss_by_hand_and_only_on_masked_patches():
    target = torch.tensor([[[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]])
    mask = torch.tensor([[1.0, 0.0, 1.0]])
    pred = torch.zeros_like(target)
    # per-patch MSE: 1, 4, 9; masked patches 0 and 2 -> (1 + 9) / 2
    assert MAELoss()(pred, target, mask).item() == pytest.approx(5.0)
    pred_visible_wrong = pred.clone()
    pred_visible_wrong[0, 1] = 100.0
    assert MAELoss()(pred_visible_wrong, target, mask).item() == pytest.approx(5.0)


def test_norm_pix_loss_targets():
    target = torch.tensor([[[1.0, 3.0]]])  # mean 2, unbiased var 2
    normalised = (target - 2) / (2 + 1e-6) ** 0.5
    assert MAELoss(norm_pix_loss=True)(normalised, target, torch.ones(1, 1)).item() == pytest.approx(0)


def test_encoder_sees_only_visible_tokens():
    model = create_method("mae", "vit_small", 16, 1)
    images = torch.rand(3, 1, 16, 16)
    mask = model.random_mask(images, torch.Generator().manual_seed(0))
    latent = model.encode_visible(images, mask)
    assert latent.shape == (3, 1 + 4, 96)
    # Changing a masked patch's pixels does not change the encoding.
    masked_patch = int(mask.mask[0].argmax())
    row, col = divmod(masked_patch, 4)
    changed = images.clone()
    changed[0, :, 4 * row : 4 * row + 4, 4 * col : 4 * col + 4] = 0.5
    model.eval()
    torch.testing.assert_close(model.encode_visible(changed, mask), model.encode_visible(images, mask))
    assert model.representation(images).shape == (3, 96)
    assert model.decoder(latent, mask.ids_restore).shape == (3, 16, 16)


def test_mae_tiny_vit_reports_paper_a_size():
    model = create_method("mae", "tiny_vit", 224, 3)
    assert (model.hparams["decoder_dim"], model.hparams["decoder_depth"]) == (128, 1)
    # Paper A's Table 2 reports 11.60 M, rounded to 0.01 M: accept +-0.005 M (half the last digit).
    # Trainable parameters: fixed sin-cos position embeddings are buffers-in-effect, as in MAE.
    # Hand count: encoder 11,286,080 + decoder 315,596 (embed 41,088, mask token 128,
    # block 198,272, norm 256, prediction 128 x 588 + 588) = 11,601,676.
    assert count_parameters(model) == 11_601_676
    assert abs(count_parameters(model) / 1e6 - 11.60) <= 0.005


def test_mae_needs_a_vit():
    with pytest.raises(ValueError, match="mae_cnn"):
        create_method("mae", "cnn_small", 16, 1)
