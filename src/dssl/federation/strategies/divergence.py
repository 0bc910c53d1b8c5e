"""Model divergences used by FedU [1] and paper B's [0] FedEMA, and their common base ``DivergenceAware``.

Paper B (Eq. 3) measures ||W_g^r - W_k^(r-1)||: this round's global model against the client's model
after its previous local training. It does not say which norm a difference of a multi-layer network
takes; its released code (EasyFL ``applications/fedssl``, ``_calculate_divergence``) takes the mean over
the encoder's convolution kernels of per-kernel L2 norms, and FedU's threshold (0.4) and FedEMA's
constant lambda (0.8, and the 0.4 / 1.6 of its sweep) were tuned on that norm. For the same weights the
flattened norm is several times larger (4.9-8.2x on ResNet-18 with BYOL's projector, 2.4-8.9x on
``cnn_small``), so a threshold or lambda read on it means something else. ``divergence`` therefore
pairs the paper's difference with the norm its constants were tuned on by default:

``paper``       (default) ||W_g^r - W_k^(r-1)|| in the code's norm: the mean over the encoder's
                convolution kernels of per-kernel L2 norms (``conv_kernel_keys``: ResNet-18's 17, the
                1 x 1 shortcut projections left out as the code's ``'conv' in name`` filter leaves them).
``paper_flat``  the same difference as one L2 norm of the flattened online network (encoder and
                projector parameters): paper B's notation read literally.
``code``        the released code's quantity: the client's own drift during its previous local
                training (from the state it started training from, after any FedEMA blend, to the
                state it uploaded), in the code's norm; it is one round stale and does not grow
                with the rounds a client skips.

References:
    [0] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385
    [1] FedU, 2021, https://arxiv.org/abs/2108.06492
"""

from __future__ import annotations

from typing import Iterable, Mapping

import torch
from torch import nn

from dssl.config.strategies._divergence import DivergenceConfig
from dssl.config.strategies.fedssl import FedSSLConfig
from dssl.federation.strategies.base import ClientContext, Upload
from dssl.federation.strategies.fedssl import FedSSL

DRIFT = "drift"  # local_state and Upload.extras key: the client's drift during its last local training
LAST_ROUND = "last_round"  # local_state key: the round (0-based) the client last trained in
SHORTCUT_NAMES = ("downsample", "shortcut")  # ResNet's 1 x 1 projection shortcuts (torchvision, EasyFL)


@torch.no_grad()
def l2_distance(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor], keys: Iterable[str]) -> float:
    """||a - b|| over ``keys``, flattened into one vector (float64 accumulation)."""
    total = torch.zeros((), dtype=torch.float64)
    for key in keys:
        total += (a[key].double() - b[key].double()).pow(2).sum().cpu()
    return float(total.sqrt())


@torch.no_grad()
def mean_layer_distance(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor], keys: Iterable[str]) -> float:
    """Mean over ``keys`` of the per-tensor L2 norms ||a_l - b_l|| (paper B's code)."""
    keys = list(keys)
    if not keys:
        raise ValueError("no tensors to measure a divergence on")
    return sum(float((a[k].double() - b[k].double()).norm()) for k in keys) / len(keys)


def conv_kernel_keys(param_shapes: Mapping[str, torch.Size], keys: Iterable[str]) -> list[str]:
    """The convolution kernels (4-d parameters) among ``keys`` other than residual shortcut projections:
    what paper B's code measures (17 kernels in ResNet-18: the stem and two per basic block)."""
    return [k for k in keys if k in param_shapes and len(param_shapes[k]) == 4
            and not any(part in SHORTCUT_NAMES for part in k.split("."))]


def code_norm_keys(method: nn.Module, keys: Iterable[str]) -> tuple[str, ...]:
    """The tensors the code's norm averages over: the convolution kernels among ``keys``."""
    shapes = {name: p.shape for name, p in method.named_parameters()}
    measured = tuple(conv_kernel_keys(shapes, keys))
    if not measured:
        raise ValueError("divergence 'paper' and 'code' average over the encoder's convolution kernels, and this "
                         "encoder has none; use divergence: paper_flat")
    return measured


class DivergenceAware(FedSSL):
    """FedSSL whose client update depends on a divergence (FedU [1], FedEMA [0]).

    Its config (a ``DivergenceConfig``) says which divergence; the FedSSL design choices are the
    subclass's ``design`` (FedSSL's defaults unless it passes others).
    ``measured_keys`` are the tensors it is measured on (``setup``); ``divergence(...)`` gives the value
    at a client's start. With ``divergence: code`` the client's drift during local training (start of
    training -> upload) is kept in ``local_state["drift"]`` for its next participation and sent in
    ``Upload.extras["drift"]``; every client also records the round it trained in
    (``local_state["last_round"]``).
    """

    def __init__(self, config: DivergenceConfig, design: FedSSLConfig | None = None) -> None:
        super().__init__(config, design if design is not None else FedSSLConfig())
        self.measured_keys: tuple[str, ...] = ()

    @property
    def uses_code_divergence(self) -> bool:
        return self.config.divergence == "code"

    def measure_on(self, method: nn.Module, flat_keys: Iterable[str]) -> None:
        """Set ``measured_keys``: the parameters among ``flat_keys`` (``paper_flat``), else the
        convolution kernels of the online network (the code's norm)."""
        if self.config.divergence == "paper_flat":
            self.measured_keys = tuple(k for k in flat_keys if k in self.param_keys)
        else:
            self.measured_keys = code_norm_keys(method, self.online_keys)

    def distance(self, a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> float:
        """a vs b in the configured norm over ``measured_keys``."""
        norm = l2_distance if self.config.divergence == "paper_flat" else mean_layer_distance
        return norm(a, b, self.measured_keys)

    def divergence(self, global_state: Mapping[str, torch.Tensor], kept: Mapping[str, torch.Tensor],
                   local_state: dict) -> float:
        """The divergence at a client's start: its stored drift (``code``) or ||W_g - W_k|| to the
        model it kept after its previous participation."""
        if self.uses_code_divergence:
            return float(local_state[DRIFT])
        return self.distance(global_state, kept)

    def remember_start(self, start: Mapping[str, torch.Tensor], ctx: ClientContext) -> None:
        """Keep the measured tensors of the state the client starts training from (the ``code`` drift's
        origin); call it with the final start, after any blend."""
        if self.uses_code_divergence:
            ctx.scratch["divergence_start"] = {k: start[k].detach().clone() for k in self.measured_keys}

    def client_upload(self, client_id: int, method: nn.Module, local_state: dict, ctx: ClientContext) -> Upload:
        upload = super().client_upload(client_id, method, local_state, ctx)
        local_state[LAST_ROUND] = ctx.round
        if self.uses_code_divergence:
            drift = mean_layer_distance(ctx.scratch["divergence_start"], method.state_dict(), self.measured_keys)
            local_state[DRIFT] = upload.extras[DRIFT] = drift  # the server's autoscaler reads it too
        return upload
