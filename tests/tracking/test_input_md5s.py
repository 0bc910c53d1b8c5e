"""Input md5s for a run's lineage come from where they were computed already: dvc.lock under DVC, a
prepared image folder's meta.json (block md5s), and only otherwise from hashing, once per process."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from dssl.tracking import inputs
from dssl.tracking.lineage import content_hash, file_md5


def _prepared_memmap(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "train.npy").write_bytes(b"\x00" * 4096)
    meta = {"format": "memmap", "arrays": {"train": {"file": "train.npy", "index": "train.csv", "index_md5": "ab",
                                                     "chunk_images": 4, "chunk_md5": ["cd", "ef"]}}}
    (folder / "meta.json").write_text(json.dumps(meta))
    return folder


def test_a_prepared_image_folder_is_its_meta_json(tmp_path, monkeypatch):
    monkeypatch.delenv("DVC_STAGE", raising=False)
    _prepared_memmap(tmp_path / "data/prepared/imagenet")
    hashed = []
    monkeypatch.setattr(inputs, "content_hash", lambda path: hashed.append(path) or "x")
    found = inputs.input_md5s(tmp_path, [Path("data/prepared/imagenet")])
    assert found == {"data/prepared/imagenet": (file_md5(tmp_path / "data/prepared/imagenet/meta.json"),
                                                 inputs.PREPARED_META)}
    assert hashed == []   # the 4 KiB array (187 GiB for ImageNet) is never read


def test_under_dvc_the_lock_files_md5_is_used(tmp_path, monkeypatch):
    lock = {"schema": "2.0", "stages": {"partitions": {"outs": [{"path": "data/partitions", "md5": "1234.dir"}]}}}
    (tmp_path / "pipelines/pretrain_fl").mkdir(parents=True)
    (tmp_path / "pipelines/pretrain_fl/dvc.lock").write_text(yaml.safe_dump(lock))
    (tmp_path / "data/partitions").mkdir(parents=True)
    (tmp_path / "data/partitions/p.json").write_text("{}")
    monkeypatch.setenv("DVC_STAGE", "pretrain_fl@x")
    assert inputs.input_md5s(tmp_path, [Path("data/partitions")]) == {
        "data/partitions": ("1234.dir", "dvc.lock (partitions)")}
    monkeypatch.delenv("DVC_STAGE")   # outside DVC the lock may be stale: hashed instead
    assert inputs.input_md5s(tmp_path, [Path("data/partitions")]) == {
        "data/partitions": (content_hash(tmp_path / "data/partitions"), inputs.HASHED)}


def test_what_has_no_recorded_md5_is_hashed_once_until_it_changes(tmp_path, monkeypatch):
    monkeypatch.delenv("DVC_STAGE", raising=False)
    weights = tmp_path / "encoder.pt"
    weights.write_bytes(b"weights")
    calls = []
    real = inputs.content_hash
    monkeypatch.setattr(inputs, "content_hash", lambda path: calls.append(path) or real(path))
    first = inputs.input_md5s(tmp_path, [Path("encoder.pt")])
    assert inputs.input_md5s(tmp_path, [Path("encoder.pt")]) == first and len(calls) == 1
    weights.write_bytes(b"other weights")
    assert inputs.input_md5s(tmp_path, [Path("encoder.pt")])["encoder.pt"][0] == file_md5(weights)
    assert len(calls) == 2


def test_the_run_tags_say_where_each_md5_came_from(tmp_path, monkeypatch):
    from dssl.tracking import StageRecord, _run_tags

    monkeypatch.delenv("DVC_STAGE", raising=False)
    _prepared_memmap(tmp_path / "data/prepared/imagenet")
    (tmp_path / "graph.json").write_text("{}")
    record = StageRecord("evaluate_fl@x", {"a": 1}, inputs=[Path("data/prepared/imagenet"), Path("graph.json")])
    tags = _run_tags(record, "paper", tmp_path, {"git_commit": "abc"})
    assert tags["input_source.data/prepared/imagenet"] == inputs.PREPARED_META
    assert (tags["input_source.graph.json"] == inputs.HASHED
            and tags["input.graph.json"] == file_md5(tmp_path / "graph.json"))
