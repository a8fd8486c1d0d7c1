#!/bin/bash
# The expected count is computed from the task's own copy of the words, not from /app's.
expected=$(tr 'A-Z' 'a-z' < /tests/words.txt | sort -u | wc -l | tr -d ' ')
got=$(tr -d ' \n' < /app/count.txt 2>/dev/null)
if [ "$got" = "$expected" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
