"""One optimisation step under ``StepOptions``: bf16 autocast, channels-last memory format, ``torch.compile``.

``TrainStep`` is what pretraining (``federation.local``) and fine-tuning (``evaluation.finetune``)
call per batch; ``forward_context`` is the same autocast and compile guard for forward passes without a
step (features of the frozen-encoder protocols, validation and test accuracy).
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator, Mapping

import torch
from torch import nn

from dssl.training.options import StepOptions

LossFn = Callable[[torch.Tensor], Mapping[str, torch.Tensor]]


class CompileError(RuntimeError):
    """``torch.compile`` could not compile (or recompile) the training step."""


def prepare_model(model: nn.Module, options: StepOptions) -> list[nn.Module]:
    """Convert ``model`` in place as ``options`` ask (channels-last, compiled parts); the compiled modules.

    ``Module.to`` keeps the Parameter objects (only their data changes), so an optimizer already built
    over them still holds the right tensors, and state-dict keys stay as they are.
    """
    options.validate()
    if options.channels_last:
        model.to(memory_format=torch.channels_last)
    return _compile_in_place(model, _device_type(model)) if options.compile else []


def prepare_batch(batch: torch.Tensor, options: StepOptions) -> torch.Tensor:
    """A 4-D batch in channels-last format when asked; anything else unchanged."""
    if options.channels_last and batch.ndim == 4:
        return batch.contiguous(memory_format=torch.channels_last)
    return batch


def autocast(options: StepOptions, device_type: str) -> contextlib.AbstractContextManager:
    """bf16 autocast for ``precision: bf16``; nothing for fp32."""
    if options.precision == "bf16":
        return torch.autocast(device_type=device_type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


@contextlib.contextmanager
def compile_guard(options: StepOptions, device_type: str) -> Iterator[None]:
    """Never swap in eager code behind the user's back: a compile error or a hit of dynamo's recompile
    limit inside the block is raised as ``CompileError``."""
    if not options.compile:
        yield
        return
    import torch._dynamo

    with torch._dynamo.config.patch(suppress_errors=False, fail_on_recompile_limit_hit=True):
        try:
            yield
        except Exception as exc:
            if type(exc).__module__.startswith(("torch._dynamo", "torch._inductor")):
                raise CompileError(_compile_message(exc, device_type)) from exc
            raise


@contextlib.contextmanager
def forward_context(model: nn.Module, options: StepOptions) -> Iterator[None]:
    """Autocast and compile guard for a forward pass of ``model`` (no gradient step)."""
    device_type = _device_type(model)
    with compile_guard(options, device_type), autocast(options, device_type):
        yield


class TrainStep:
    """One optimisation step of ``model`` with ``optimizer``, under ``options`` (``StepOptions``).

    Built once per simulator: it converts the model to channels-last and compiles it in place when
    asked, so the state-dict keys stay as they are (snapshots, aggregation and checkpoints see no
    difference). ``step(batch, loss_fn)`` runs forward + loss, backward, the optimizer step and the
    method's ``after_optimizer_step``, and returns the loss dict.

    ``compile`` compiles, with ``nn.Module.compile`` (in place), each direct submodule of the model
    that holds parameters (encoder, projector, predictor, decoder, EMA target). For a ViT encoder it
    compiles each transformer block instead: MAE runs the blocks on visible tokens without calling
    the encoder's ``forward``, and identical blocks share one compiled graph. The views' augmentation
    (seeded ``torch.Generator`` draws, which dynamo cannot trace) stays eager. Compilation is lazy: a
    compile error surfaces at the first step (or at a recompile) and is raised as ``CompileError``;
    dynamo is told not to fall back to eager silently, neither on errors nor at its recompile limit.
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer,
                 options: StepOptions = StepOptions()) -> None:
        self.model = model
        self.optimizer = optimizer
        self.options = options
        self.device_type = _device_type(model)
        self.compiled: list[nn.Module] = prepare_model(model, options)

    @property
    def plain(self) -> bool:
        """True when the step is the plain fp32 eager one (no conversion, no autocast, no compile)."""
        return self.options.plain

    def __call__(self, batch: torch.Tensor, loss_fn: LossFn) -> Mapping[str, torch.Tensor]:
        batch = prepare_batch(batch, self.options)
        with compile_guard(self.options, self.device_type):
            with autocast(self.options, self.device_type):
                out = loss_fn(batch)
            self.optimizer.zero_grad(set_to_none=True)
            # Backward outside autocast (its ops take the forward's dtypes); inductor compiles the
            # backward graph lazily here, hence inside the guard.
            out["loss"].backward()
        self.optimizer.step()
        self.model.after_optimizer_step()
        return out


def _compile_targets(model: nn.Module) -> list[nn.Module]:
    targets: list[nn.Module] = []
    for child in model.children():
        if not any(True for _ in child.parameters()):
            continue  # criterion, view transform: nothing to gain, and the transform draws from generators
        blocks = getattr(child, "blocks", None)
        # Identical transformer blocks compiled one by one share a single compiled graph (regional
        # compilation): half the cold-start time of compiling the stack for Tiny-ViT's 9 blocks.
        targets.extend(blocks.children() if isinstance(blocks, nn.Module) else [child])
    return targets or [model]


def _compile_in_place(model: nn.Module, device_type: str) -> list[nn.Module]:
    if device_type == "cpu":
        _require_cpp_compiler()
    targets = _compile_targets(model)
    for module in targets:
        module.compile()
    return targets


def _require_cpp_compiler() -> None:
    """Fail at set-up, not at the first step, when inductor has no C++ compiler for CPU kernels."""
    try:
        from torch._inductor import cpp_builder

        cpp_builder.get_cpp_compiler()
    except Exception as exc:
        raise CompileError(_compile_message(exc, "cpu")) from exc


def _compile_message(exc: BaseException, device_type: str) -> str:
    first_line = (str(exc).strip().splitlines() or [""])[0]
    hint = ("On CPU, inductor needs a working C++ compiler (g++; see torch._inductor.config.cpp.cxx)"
            if device_type == "cpu" else "On GPU, inductor needs Triton for the device")
    return (f"torch.compile of the training step failed: {type(exc).__name__}: {first_line}. "
            f"{hint}; the cause is chained below. Set compile: false to train without compiling.")




def _device_type(model: nn.Module) -> str:
    return next(model.parameters()).device.type
