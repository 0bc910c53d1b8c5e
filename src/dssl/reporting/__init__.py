"""Tables, figures and the report README from the evaluation results, beside the papers' numbers."""
