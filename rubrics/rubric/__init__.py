"""The rubric format: its typed spec, the YAML source map, loading, validation, rules, lint and compile."""
