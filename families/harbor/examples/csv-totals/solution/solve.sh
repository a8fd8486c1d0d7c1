#!/bin/bash
cat > /app/totals.sh <<'SH'
#!/bin/bash
awk -F, 'NR > 1 { total[$1] += $2 } END { for (c in total) print c, total[c] }' "$1" | sort
SH
chmod +x /app/totals.sh
