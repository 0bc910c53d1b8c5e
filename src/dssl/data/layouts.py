"""The folder layouts the image-folder datasets accept, told apart by what the folder holds.

Standard library only: the params validator reads it (a misplaced folder is reported before any stage
runs) as well as the prepare stage (``datasets``).

Mini-ImageNet (100 classes of 600 images; Vinyals et al. 2016) is distributed in two forms, both
accepted, plus the form this project first read:

- ``few_shot``: Ravi & Larochelle's few-shot split as distributed, ``<root>/train``, ``val`` and ``test``
  with disjoint classes (64 + 16 + 20). The three are pooled into one set of 100 classes: the split exists
  for few-shot evaluation, whereas paper A pretrains on all 60,000 images (600 per client, 100 clients).
- ``pooled``: one folder of class folders, ``<root>/<class>/<images>``.
- ``splits``: a split of the images, ``<root>/train/<class>/...`` with optional ``val/`` and ``test/``
  holding the same classes (used as they are).

ImageNet has one layout: ``train/`` and ``val/`` (the official validation images sorted into class folders).
"""

from __future__ import annotations

from pathlib import Path

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")  # matched case-insensitively (ImageNet ships .JPEG)
SPLIT_FOLDERS = ("train", "val", "test")

LAYOUTS: dict[str, dict[str, str]] = {
    "mini_imagenet": {
        "few_shot": "the few-shot split as distributed: <root>/train/<class>/<images>, <root>/val/<class>/... and "
                    "<root>/test/<class>/... with disjoint classes (64 + 16 + 20 classes of 600 images), pooled "
                    "into one set",
        "pooled": "one folder of class folders: <root>/<class>/<images> (100 classes of 600 images)",
        "splits": "a split of the images: <root>/train/<class>/<images>, optionally <root>/val/<class>/... and "
                  "<root>/test/<class>/... holding the same classes",
    },
    "imagenet": {
        "splits": "<root>/train/<class>/<images> and <root>/val/<class>/<images> (the official validation images "
                  "sorted into one folder per class, named as in train/)",
    },
}


class LayoutProblem(ValueError):
    """A folder matches none of a dataset's layouts; the message says what is wrong."""


def layout_help(name: str) -> str:
    """Every layout ``name`` accepts, for error messages."""
    layouts = LAYOUTS[name]
    if len(layouts) == 1:
        return next(iter(layouts.values()))
    return "; or ".join(f"({i}) {text}" for i, text in enumerate(layouts.values(), 1))


def is_image(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() in IMAGE_EXTENSIONS


def class_folders(folder: Path) -> list[Path]:
    """The visible sub-folders of ``folder``, sorted by name (as torchvision's ImageFolder)."""
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def detect_layout(name: str, root: Path) -> str:
    """Which of ``name``'s layouts ``root`` holds; a ``LayoutProblem`` when none.

    Decided from the folder names alone (no image is opened): ``train/`` with class folders in
    ``val/`` and ``test/`` that are new classes (few-shot) or classes of ``train/`` (a split of the
    images); class folders right under the root (pooled).
    """
    if not root.is_dir():
        raise LayoutProblem(f"folder {root.resolve()} does not exist")
    if name == "imagenet":
        return "splits"
    present = [s for s in SPLIT_FOLDERS if (root / s).is_dir()]
    if "train" not in present:
        if present:
            raise LayoutProblem(f"{root} has {', '.join(s + '/' for s in present)} but no train/")
        if not class_folders(root):
            raise LayoutProblem(f"{root} holds no class folders")
        return "pooled"
    classes = {s: {p.name for p in class_folders(root / s)} for s in present}
    others = [s for s in present if s != "train"]
    if all(classes[s] <= classes["train"] for s in others):
        return "splits"
    pairs = [(a, b) for i, a in enumerate(present) for b in present[i + 1:]]
    if not any(classes[a] & classes[b] for a, b in pairs):
        return "few_shot"
    counts = "; ".join(f"{b}/ shares {len(classes[a] & classes[b])} of its {len(classes[b])} classes with {a}/"
                       for a, b in pairs if classes[a] & classes[b])
    raise LayoutProblem(f"the class folders of {', '.join(s + '/' for s in present)} in {root} are neither disjoint "
                        f"(the few-shot split) nor those of train/ again (a split of the images): {counts}")
