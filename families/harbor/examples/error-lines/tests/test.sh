#!/bin/bash
cat > /tmp/expected <<'TXT'
2024-05-01T10:00:03 ERROR disk full
2024-05-01T10:01:00 ERROR worker crashed
2024-05-01T10:07:00 ERROR timeout talking to db
TXT
if diff -q /tmp/expected /app/errors.txt >/dev/null 2>&1; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
