"""BatchNorm re-estimation before evaluation: the running statistics change, the weights do not."""

import numpy as np
import torch

from dssl.data.imageset import ArrayImageSet
from dssl.evaluation.batchnorm import batchnorm_layers, reestimate_batchnorm
from dssl.models import create_backbone


def _images(num: int = 40, seed: int = 0) -> ArrayImageSet:
    rng = np.random.default_rng(seed)
    pixels = rng.integers(100, 256, size=(num, 16, 16, 1)).astype(np.uint8)
    return ArrayImageSet(pixels, np.arange(num) % 2, 2)


def test_reestimation_sets_the_data_statistics_and_keeps_the_weights():
    torch.manual_seed(0)
    encoder = create_backbone("cnn_small", 16, 1)
    images = _images()
    weights = {k: v.clone() for k, v in encoder.named_parameters()}
    first = batchnorm_layers(encoder)[0]
    first.running_mean.fill_(5.0)  # stale statistics, as after masked-input pretraining
    first.running_var.fill_(9.0)
    encoder.train()

    assert reestimate_batchnorm(encoder, images, batch_size=16) == 3

    # The first BN layer's mean is that of its input: the first convolution over all the images.
    x = images.get_batch(np.arange(len(images))).float() / 255
    conv_out = encoder.features[0](x)
    expected_mean = conv_out.mean(dim=(0, 2, 3))
    # momentum=None: an average over the 3 batches (16, 16, 8 images), each batch counted once.
    batch_means = torch.stack([conv_out[i:i + 16].mean(dim=(0, 2, 3)) for i in (0, 16, 32)]).mean(dim=0)
    assert torch.allclose(first.running_mean, batch_means, atol=1e-5)
    assert torch.allclose(first.running_mean, expected_mean, atol=0.05)
    assert not torch.allclose(first.running_var, torch.full_like(first.running_var, 9.0))
    for name, value in encoder.named_parameters():
        assert torch.equal(value, weights[name]), name
    assert encoder.training and first.momentum == 0.1  # mode and momentum restored


def test_reestimation_is_deterministic_and_a_no_op_without_batchnorm():
    images = _images()
    stats = []
    for _ in range(2):
        torch.manual_seed(0)
        encoder = create_backbone("cnn_small", 16, 1)
        reestimate_batchnorm(encoder, images)
        stats.append(torch.cat([layer.running_var for layer in batchnorm_layers(encoder)]))
    assert torch.equal(stats[0], stats[1])
    vit = create_backbone("vit_small", 16, 1)
    before = {k: v.clone() for k, v in vit.state_dict().items()}
    assert reestimate_batchnorm(vit, images) == 0
    assert all(torch.equal(v, before[k]) for k, v in vit.state_dict().items())
