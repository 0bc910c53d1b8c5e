"""Validators of the params.yaml sections: a module per section (or pair of sections read together),
and the checks several sections share (``names``, ``training``, ``seeds``). Torch-free, like all of
validation; the dataset facts and the backbone and graph lookups they use are ``config.dataset_facts``
and ``config.lookups``.

The validators are registered here, once, in the order their problems are listed: one place to read
it, whichever module imports which.
"""

from __future__ import annotations

from dssl.config.checker import section_validator
from dssl.config.sections.checkpoint import check_checkpoint
from dssl.config.sections.datasets import check_datasets
from dssl.config.sections.evaluate import check_evaluate, check_protocol_ranges
from dssl.config.sections.graphs import check_graphs, check_improved_graphs
from dssl.config.sections.local_vs_global import check_features, check_weight_distance
from dssl.config.sections.models import check_models
from dssl.config.sections.partitions import check_partitions
from dssl.config.sections.pretrain import check_pretrain
from dssl.config.sections.report import check_report
from dssl.config.sections.seeds import check_seeds
from dssl.config.sections.strategies import check_strategies
from dssl.config.sections.theory import check_theory
from dssl.config.sections.top_level import check_sections

for _validator in (check_datasets, check_partitions, check_graphs, check_models, check_pretrain, check_strategies,
                   check_evaluate, check_seeds, check_improved_graphs, check_report, check_theory,
                   check_weight_distance, check_features, check_checkpoint, check_protocol_ranges, check_sections):
    section_validator(_validator)
