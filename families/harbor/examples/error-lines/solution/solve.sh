#!/bin/bash
cd /app
cat logs/*.log | awk '$2 == "ERROR"' | sort -k1,1 > errors.txt
