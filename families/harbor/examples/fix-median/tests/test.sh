#!/bin/bash
# Runs the checks with the task's own runner and writes reward.json: 1 when every check passes.
cd /app
python3 /tests/check_stats.py
