"""How a training or evaluation step runs, shared by pretraining (``federation``) and evaluation.

- ``options``: the params keys of a step (``device``, ``precision``, ``channels_last``, ``compile``),
  torch-free so the params validator reads them;
- ``device``: ``auto | cpu | cuda`` resolved to a torch device, or one clear error before training;
- ``step``: one optimisation step under those options (bf16 autocast, channels-last, ``torch.compile``);
- ``preemption``: SIGTERM / SIGUSR1 turned into "checkpoint, then exit" at the next safe point.
"""
