#!/bin/bash
tr 'A-Z' 'a-z' < /app/words.txt | sort -u | wc -l | tr -d ' ' > /app/count.txt
