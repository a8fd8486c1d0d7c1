"""What a run left, read back: SQL over its tables, the pass@1 report, the HTML page, its status."""
