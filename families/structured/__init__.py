"""The structured family: extraction into JSON, checked against a JSON Schema and fields
(`structured`)."""
