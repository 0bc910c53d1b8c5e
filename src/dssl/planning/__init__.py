"""``dssl plan``: what a params file costs before it runs (images, FLOPs, GPU-hours, bytes per stage and table)."""
