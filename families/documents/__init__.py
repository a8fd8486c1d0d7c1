"""The documents family: long generated financial reports (text, Markdown, HTML, PDF, or searched
with tools), answered with their figures as JSON and checked by `document_fields`."""
