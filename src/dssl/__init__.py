"""dssl: distributed self-supervised learning under non-IID data, as a reproducible pipeline."""

import os

__version__ = "0.1.0"

# MLflow's usage telemetry is off unless the user turns it on (MLFLOW_DISABLE_TELEMETRY=false): a
# pipeline that runs offline on clusters sends nothing out, and the telemetry hooks cost every stage's
# tracking calls time. Set here, before any module imports mlflow.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
