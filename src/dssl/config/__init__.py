"""params.yaml: loading and validation (every problem with its key path and a hint)."""
