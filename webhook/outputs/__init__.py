"""Writing answers: admission responses, the report formats, the fixer's edits of YAML files, atomic file replacement."""
