"""Schedule tuning: tasks from a compiled graph, sketches and their parameters, program features, cost models,
search policies, the measurer and the records database."""
