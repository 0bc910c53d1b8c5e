"""``seeds`` and a grid's own: non-empty lists of distinct indices, one list per cell."""

from __future__ import annotations

from dssl.config.checker import Checker


def check_seeds(c: Checker) -> None:
    """``seeds``: the list every training and evaluation cell runs, one MLflow run and folder per seed."""
    _check_seed_list(c, c.params.get("seeds"), "seeds")


def _check_seed_list(c: Checker, seeds: object, path: str) -> bool:
    """A non-empty list of distinct integers >= 0 (the top-level ``seeds`` or a grid's own)."""
    if not isinstance(seeds, list) or not seeds:
        c.add(path, "must be a non-empty list of integers", "e.g. seeds: [0, 1, 2]")
        return False
    bad = [i for i, seed in enumerate(seeds) if not _is_index(seed)]
    for i in bad:
        c.add(f"{path}[{i}]", f"must be an integer >= 0, got {seeds[i]!r}")
    if len(set(map(str, seeds))) != len(seeds):
        c.add(path, "holds a seed twice", "list each seed once")
        return False
    return not bad


def _check_shared_cells(c: Checker, framework: str) -> None:
    """A cell runs one list of seeds: every grid listing it must give it the same one."""
    from dssl.config.grids import all_grid_seed_keys, seeds_at

    if not _seed_lists_valid(c.params):
        return   # reported where the list is
    try:
        lists = {cell: {key: seeds_at(c.params, key) for key in keys}
                 for cell, keys in all_grid_seed_keys(c.params, framework).items()}
    except (AttributeError, KeyError, TypeError, ValueError):   # malformed grids or seeds: reported by their checks
        return
    for cell, by_key in lists.items():
        if len({tuple(sorted(seeds)) for seeds in by_key.values()}) > 1:
            listed = "; ".join(f"{key}: {seeds}" for key, seeds in by_key.items())
            c.add(list(by_key)[-1], f"cell {' / '.join(cell)} is in grids with different seeds ({listed})",
                  "a cell trains one list of seeds: give the grids that share it the same seeds, or list it in one")
            return


def _is_index(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_seed_list(value: object) -> bool:
    """Whether a seeds value is what ``_check_seed_list`` accepts (so a later check may read it)."""
    return (isinstance(value, list) and bool(value) and all(_is_index(seed) for seed in value)
            and len(set(value)) == len(value))


def _seed_lists_valid(params: dict) -> bool:
    """Whether the top-level ``seeds`` and every grid's own are valid: the checks that compare the seeds of
    cells run only then, so that one bad list is one problem line, at its own key path."""
    grids = [grid for framework in ("fl", "decl", "local")
             for grid in ((((params.get("pretrain") or {}).get(framework) or {}).get("grids")) or {}).values()
             if isinstance(grid, dict) and "seeds" in grid]
    return _is_seed_list(params.get("seeds")) and all(_is_seed_list(grid["seeds"]) for grid in grids)
