"""Federated (FL) and decentralized (DecL) training simulators with pluggable strategies."""

from dssl.federation.checkpoint import CheckpointMismatchError
from dssl.federation.local import ClientData, OptimizerConfig, clients_from_partition
from dssl.federation.decl import DECL_ORDERS, DecLConfig, DecLSimulator
from dssl.federation.fl import FLConfig, FLSimulator, make_schedule
from dssl.federation.run_result import RunResult
from dssl.federation.state import StackedStates, weighted_average
from dssl.federation.strategies import ClientContext, Strategy, Upload, create_strategy

__all__ = [
    "CheckpointMismatchError",
    "DECL_ORDERS",
    "ClientContext",
    "ClientData",
    "DecLConfig",
    "DecLSimulator",
    "FLConfig",
    "FLSimulator",
    "OptimizerConfig",
    "RunResult",
    "StackedStates",
    "Strategy",
    "Upload",
    "clients_from_partition",
    "create_strategy",
    "make_schedule",
    "weighted_average",
]
