"""Image sets: the one interface the training code reads images through.

An ``ImageSet`` holds integer labels and returns batches of uint8 images as ``[B, C, H, W]`` tensors.
Two storage forms sit behind it:

- ``ArrayImageSet``: the whole split in memory (digits, CIFAR); a batch is one fancy-indexing gather.
- ``FileImageSet``: an index of image files (Mini-ImageNet, ImageNet folders); a batch decodes its
  files with PIL and brings each to a fixed square size.
"""

from __future__ import annotations

import zipfile
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Sequence

from typing import TYPE_CHECKING

import numpy as np

from dssl.artifacts import load_npz

if TYPE_CHECKING:  # torch costs seconds to import; the data and partition stages never need it
    import torch


class DatasetError(RuntimeError):
    """A dataset is missing, malformed or cannot be fetched; the message says what to put where."""


IndexLike = "Sequence[int] | np.ndarray | torch.Tensor"


def _as_index(indices: IndexLike) -> np.ndarray:
    if hasattr(indices, "cpu"):  # a torch tensor
        indices = indices.cpu().numpy()
    return np.asarray(indices, dtype=np.int64).reshape(-1)


class ImageSet(ABC):
    """Labelled images of one split; ``get_batch`` returns ``torch.uint8`` tensors ``[B, C, H, W]``."""

    def __init__(self, labels: np.ndarray, num_classes: int):
        self.labels = np.asarray(labels, dtype=np.int64)
        self.num_classes = int(num_classes)

    def __len__(self) -> int:
        return len(self.labels)

    @property
    @abstractmethod
    def image_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)`` of every image a batch returns."""

    @abstractmethod
    def get_batch(self, indices: IndexLike) -> torch.Tensor:
        """Images at ``indices`` as a uint8 tensor ``[B, C, H, W]``."""


class ArrayImageSet(ImageSet):
    """Images held in memory; stored channels-first once so a batch is a single gather."""

    def __init__(self, images_nhwc: np.ndarray, labels: np.ndarray, num_classes: int):
        super().__init__(labels, num_classes)
        if images_nhwc.dtype != np.uint8 or images_nhwc.ndim != 4:
            raise DatasetError(f"expected uint8 images [N, H, W, C], got {images_nhwc.dtype} "
                               f"{images_nhwc.shape}")
        if len(images_nhwc) != len(self.labels):
            raise DatasetError(f"{len(images_nhwc)} images but {len(self.labels)} labels")
        self._images = np.ascontiguousarray(images_nhwc.transpose(0, 3, 1, 2))

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return tuple(self._images.shape[1:])

    def get_batch(self, indices: IndexLike) -> torch.Tensor:
        import torch

        return torch.from_numpy(self._images[_as_index(indices)])


class FileImageSet(ImageSet):
    """Images decoded on demand from files under ``root``, as RGB squares of side ``image_size``.

    Each image is centre-cropped to a square and resized (bicubic), which keeps its aspect ratio, the
    same framing as the usual resize-then-centre-crop evaluation transform.
    """

    def __init__(self, root: Path, paths: Sequence[str], labels: np.ndarray, num_classes: int,
                 image_size: int):
        super().__init__(labels, num_classes)
        if len(paths) != len(self.labels):
            raise DatasetError(f"{len(paths)} files but {len(self.labels)} labels")
        self.root = Path(root)
        self.paths = list(paths)
        self.image_size = int(image_size)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return (3, self.image_size, self.image_size)

    def get_batch(self, indices: IndexLike) -> torch.Tensor:
        index = _as_index(indices)
        batch = np.empty((len(index), self.image_size, self.image_size, 3), dtype=np.uint8)
        for row, i in enumerate(index):
            batch[row] = decode_image(self.root / self.paths[i], self.image_size)
        import torch

        return torch.from_numpy(batch).permute(0, 3, 1, 2).contiguous()


def decode_image(path: Path, size: int) -> np.ndarray:
    """One image file as uint8 ``[size, size, 3]``; an unreadable file is a ``DatasetError``."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            # JPEG can decode at a reduced scale (still >= the target); full-size ImageNet decodes
            # would otherwise dominate the cost of a small-resolution batch.
            image.draft("RGB", (size, size))
            rgb = image.convert("RGB")
    except (OSError, UnidentifiedImageError) as error:
        raise DatasetError(f"cannot read image {path}: {error}") from error
    square = ImageOps.fit(rgb, (size, size), method=Image.Resampling.BICUBIC)
    return np.asarray(square, dtype=np.uint8)


def save_arrays(path: Path, **arrays: np.ndarray) -> None:
    """Write arrays as an ``.npz`` readable by ``np.load``, with byte-identical output for equal input.

    ``np.savez`` stamps each member with the current time and the creating OS; here every member
    carries a fixed date and the Unix creator, and arrays are stored little-endian, so that DVC sees
    the same content hash whenever and wherever a stage is re-run.
    """
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        for name in sorted(arrays):
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.create_system = 3
            info.external_attr = 0o644 << 16
            array = np.asarray(arrays[name])
            array = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
            with archive.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, array, allow_pickle=False)


def load_arrays(path: Path, required: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` written by ``save_arrays``; a damaged file is an ``ArtifactError``."""
    return load_npz(path, required)


class ResizedImageSet(ImageSet):
    """Another image set seen at ``size`` x ``size`` pixels (bilinear), e.g. 8 px digits at 16 px.

    Models are built for one input size; datasets come in theirs. Resizing per batch keeps the
    stored data untouched and costs one interpolation of the batch.
    """

    def __init__(self, base: ImageSet, size: int):
        super().__init__(base.labels, base.num_classes)
        self.base = base
        self.size = int(size)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return (self.base.image_shape[0], self.size, self.size)

    def get_batch(self, indices: IndexLike) -> torch.Tensor:
        import torch.nn.functional as F

        batch = self.base.get_batch(indices)
        if tuple(batch.shape[-2:]) == (self.size, self.size):
            return batch
        resized = F.interpolate(batch.float(), size=(self.size, self.size), mode="bilinear", align_corners=False)
        return resized.round_().clamp_(0, 255).to(batch.dtype)


def resized(images: ImageSet, size: int) -> ImageSet:
    """``images`` at ``size`` px (itself when it already has that size)."""
    return images if images.image_shape[1:] == (size, size) else ResizedImageSet(images, size)
