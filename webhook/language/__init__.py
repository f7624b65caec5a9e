"""The policy language: where the bundle and schemas live, schema checks, the policy model, its compiler and loader, JSON Schema rules, the config, the record of checks already done."""
