"""Communication graphs, mixing matrices and greedy graph improvement."""
