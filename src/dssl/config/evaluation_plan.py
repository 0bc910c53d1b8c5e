"""What each evaluation stage runs: the (downstream dataset, protocol) pairs of one cell.

One function family, read by the evaluation stages (``pipeline.evaluate``), the stage catalogue (the
prepared datasets and params keys an evaluation stage depends on) and ``dssl plan``, so that what is
planned, what DVC tracks and what runs cannot drift apart. Torch-free: the validator and the catalogue
read it.

A pretraining grid is named after the table it serves (``pretrain.<fl|decl|local>.grids.<name>``), and
``evaluate.grids.<name>`` declares what that table reads of the grid's cells: ``datasets`` (default
``evaluate.datasets``) and ``protocols`` (default ``evaluate.protocols.<framework>``). A cell is evaluated
on the union of what the grids listing it read, and nothing else; a grid ``evaluate.grids`` does not name
reads the defaults. Paper A reports Tables 1 and 2 on CIFAR-10, CIFAR-100 and ImageNet and its other
tables on CIFAR-100 only: its profile reads CIFAR-100 by default and names the two tables' grids.

References: a central cell (``pretrain.central.models``) is read on ``evaluate.datasets`` x
``evaluate.protocols.central`` (``[]``: not evaluated). The random-init reference of a backbone is read by
the pretraining gate of every claim on the cell's own dataset and protocol, so it runs on every dataset a
cell of its backbone is read on: ``evaluate.protocols.random`` there, or, without that list, the very pairs
those cells are read on (``random_pairs``).
"""

from __future__ import annotations

from typing import Iterable

from dssl.config.grids import grid_cells, local_cells, named_grids

Pair = tuple[str, str]   # (downstream dataset, protocol)
GRID_FRAMEWORKS = ("fl", "decl", "local")   # frameworks whose cells come from named grids
EVALUATION_KEYS = ("datasets", "protocols")   # what an ``evaluate.grids`` entry may set


def _evaluate(params: dict) -> dict:
    return params.get("evaluate") or {}


def _pairs(datasets: Iterable[str], protocols: Iterable[str]) -> list[Pair]:
    protocols = list(protocols)
    return [(dataset, protocol) for dataset in datasets for protocol in protocols]


def _union(lists: Iterable[list[Pair]]) -> list[Pair]:
    return list(dict.fromkeys(pair for pairs in lists for pair in pairs))


def default_pairs(params: dict, framework: str) -> list[Pair]:
    """``evaluate.datasets`` x ``evaluate.protocols.<framework>``: what a cell no grid entry names reads."""
    evaluate = _evaluate(params)
    return _pairs(evaluate.get("datasets") or [], (evaluate.get("protocols") or {}).get(framework) or [])


def grid_pairs(params: dict, framework: str, grid: str) -> list[Pair]:
    """What the table of grid ``grid`` reads of its cells (``evaluate.grids.<grid>``, else the defaults)."""
    entry = (_evaluate(params).get("grids") or {}).get(grid)
    if entry is None:
        return default_pairs(params, framework)
    evaluate = _evaluate(params)
    datasets = entry.get("datasets", evaluate.get("datasets") or [])
    protocols = entry.get("protocols", (evaluate.get("protocols") or {}).get(framework) or [])
    return _pairs(datasets, protocols)


def cell_grids(params: dict, framework: str, cell: tuple) -> list[str]:
    """The names of the grids of ``framework`` that list ``cell`` (the tables that read it)."""
    return [name for name, cells in named_grids(params, framework).items() if tuple(cell) in cells]


def cell_pairs(params: dict, framework: str, cell: tuple) -> list[Pair]:
    """The (dataset, protocol) pairs the evaluation stage of a pretrained cell runs, in a stable order:
    for ``fl``, ``decl`` and ``local`` the union over the grids listing it, for ``central`` the defaults."""
    if framework == "central":
        return default_pairs(params, "central")
    if framework not in GRID_FRAMEWORKS:
        raise ValueError(f"no pretrained cells in framework {framework!r}; frameworks: "
                         f"{', '.join((*GRID_FRAMEWORKS, 'central'))}")
    return _union(grid_pairs(params, framework, grid) for grid in cell_grids(params, framework, cell))


def pretrained_cells(params: dict) -> list[tuple[str, tuple]]:
    """(framework, cell) of every pretrained cell a params file trains; a cell's model is its first part."""
    central = ((params.get("pretrain") or {}).get("central") or {}).get("models") or []
    return [*(("fl", cell) for cell in grid_cells(params, "fl")),
            *(("decl", cell) for cell in grid_cells(params, "decl")),
            *(("local", cell) for cell in local_cells(params)),
            *(("central", (model,)) for model in central)]


def random_pairs(params: dict, backbone: str) -> list[Pair]:
    """The pairs the random-init reference of ``backbone`` runs. The gate of a claim pairs a cell with the
    reference on the cell's dataset and protocol, so the reference follows its backbone's cells:
    ``evaluate.protocols.random`` on ``evaluate.datasets`` and on every dataset such a cell is read on, or,
    where that list is empty or absent, exactly the pairs those cells are read on."""
    models = params.get("models") or {}
    cells = _union(cell_pairs(params, framework, cell) for framework, cell in pretrained_cells(params)
                   if (models.get(cell[0]) or {}).get("backbone") == backbone)
    protocols = (_evaluate(params).get("protocols") or {}).get("random") or []
    if not protocols:
        return cells
    datasets = dict.fromkeys([*(_evaluate(params).get("datasets") or []), *(dataset for dataset, _ in cells)])
    return _pairs(datasets, protocols)


def stage_pairs(params: dict, framework: str, key: tuple) -> list[Pair]:
    """The pairs of one evaluation stage: ``key`` is the cell (``random``: ``(backbone,)``)."""
    return random_pairs(params, key[0]) if framework == "random" else cell_pairs(params, framework, key)


def framework_stage_keys(params: dict, framework: str) -> list[tuple]:
    """The keys of every evaluation stage of ``framework`` (cells or, for ``random``, backbones)."""
    if framework == "random":
        return [(backbone,) for backbone in _evaluate(params).get("random_backbones") or []]
    return [cell for fw, cell in pretrained_cells(params) if fw == framework]


def framework_pairs(params: dict, framework: str) -> list[Pair]:
    """Every pair an evaluation stage of ``framework`` runs (what the kind's stages depend on together)."""
    return _union(stage_pairs(params, framework, key) for key in framework_stage_keys(params, framework))


def evaluated_datasets(params: dict) -> list[str]:
    """Every downstream dataset some evaluation stage reads, ``evaluate.datasets`` first."""
    evaluate = _evaluate(params)
    named = [evaluate.get("datasets"), *(entry.get("datasets") for entry in (evaluate.get("grids") or {}).values()
                                         if isinstance(entry, dict))]
    return list(dict.fromkeys(d for ds in named if isinstance(ds, list) for d in ds if isinstance(d, str)))


def evaluated_protocols(params: dict) -> list[str]:
    """Every protocol some evaluation stage may run (the ``evaluate.<protocol>`` entries the stages read)."""
    evaluate = _evaluate(params)
    listed = [names for names in (evaluate.get("protocols") or {}).values() if isinstance(names, list)]
    listed += [entry.get("protocols") for entry in (evaluate.get("grids") or {}).values() if isinstance(entry, dict)]
    return list(dict.fromkeys(name for names in listed if isinstance(names, list) for name in names
                              if isinstance(name, str)))


def protocol_config(params: dict, protocol: str, dataset: str, backbone: str):
    """The config a (dataset, protocol) task of a ``backbone`` encoder runs with: ``evaluate.<protocol>``
    with its ``per_family`` and ``per_dataset`` overrides resolved (``ProtocolSpec.make_config``). The stages
    and ``dssl plan`` both call it, so the plan counts the epochs and batches the stages run."""
    from dssl.config.lookups import backbone_family
    from dssl.config.protocols import PROTOCOL_SPECS

    return PROTOCOL_SPECS[protocol].make_config(params["evaluate"][protocol], dataset, backbone_family(backbone))
