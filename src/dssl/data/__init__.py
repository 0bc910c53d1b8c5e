"""Datasets (registry ``DATASETS``), image sets, client partitions (registry ``PARTITIONERS``) and
per-client feature augmentation. Submodules are imported where used: ``datasets`` pulls in torch."""
