"""Paper A's linear-model theory: data model, objectives, solutions, sensitivity, sweeps."""
