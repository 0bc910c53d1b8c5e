"""MAE-CNN: pixel masks from patch masks, masked-pixel loss, decoder shapes."""

import pytest
import torch

from dssl.methods import create_method
from dssl.methods.mae_cnn import MaskedPixelMSELoss, default_mask_patch_size, patch_mask_to_pixels


def test_patch_mask_to_pixels_by_hand():
    mask = torch.tensor([[1.0, 0.0, 0.0, 1.0]])  # 2 x 2 grid of 2 x 2 patches
    expected = torch.tensor([[1.0, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]])
    torch.testing.assert_close(patch_mask_to_pixels(mask, 2, 4, 4)[0, 0], expected)
    # A ragged edge (5 px, 2 x 2 patches -> 3 x 3 grid) is cropped.
    assert patch_mask_to_pixels(torch.ones(1, 9), 2, 5, 5).shape == (1, 1, 5, 5)


def test_default_mask_patch_size_scales_with_the_image():
    assert [default_mask_patch_size(s) for s in (224, 112, 32, 16)] == [16, 8, 4, 4]


def test_mask_zeroes_exactly_the_masked_pixels():
    model = create_method("mae_cnn", "cnn_small", 16, 1)
    images = torch.rand(4, 1, 16, 16) + 0.1  # no zero pixels
    pixel_mask = model.random_pixel_mask(images, torch.Generator().manual_seed(0))
    masked = images * (1 - pixel_mask)
    assert torch.all(pixel_mask.sum(dim=(1, 2, 3)) == 12 * 16)  # 12 of 16 patches of 4 x 4 px
    assert torch.equal(masked == 0, pixel_mask.bool())
    assert torch.equal(masked[pixel_mask == 0], images[pixel_mask == 0])
    assert len({tuple(m.flatten().tolist()) for m in pixel_mask}) > 1  # per-sample masks


def test_loss_by_hand_and_only_on_masked_pixels():
    target = torch.zeros(1, 2, 2, 2)
    pred = torch.tensor([[[[1.0, 2.0], [3.0, 4.0]], [[1.0, 1.0], [1.0, 1.0]]]])
    mask = torch.tensor([[[[1.0, 0.0], [0.0, 1.0]]]])
    # masked pixels (0,0) and (1,1), 2 channels: (1 + 16 + 1 + 1) / 4
    assert MaskedPixelMSELoss()(pred, target, mask).item() == pytest.approx(19 / 4)
    pred[:, :, 0, 1] = 100.0  # an unmasked pixel
    assert MaskedPixelMSELoss()(pred, target, mask).item() == pytest.approx(19 / 4)


@pytest.mark.parametrize(("backbone", "size"), [("cnn_small", 16), ("cnn_small", 18), ("resnet18_cifar", 16)])
def test_decoder_reconstructs_the_input_size(backbone, size):
    model = create_method("mae_cnn", backbone, size, 3)
    fmap = model.encoder.forward_features(torch.rand(2, 3, size, size))
    assert model.decoder(fmap, (size, size)).shape == (2, 3, size, size)


def test_mae_cnn_needs_a_feature_map():
    with pytest.raises(ValueError, match="'mae'"):
        create_method("mae_cnn", "vit_small", 16, 1)
