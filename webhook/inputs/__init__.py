"""Reading the world: YAML and JSON with line/column positions from files and stdin, AdmissionReview requests, live cluster facts."""
