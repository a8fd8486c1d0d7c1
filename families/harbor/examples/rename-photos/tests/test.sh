#!/bin/bash
cd /app/photos || { echo 0 > /logs/verifier/reward.txt; exit 0; }
want=$'beach.jpg\ncity.jpg\ndog.jpg\nnotes.txt\nold trip.jpg'
ok=1
[ "$(ls -1 | LC_ALL=C sort)" = "$want" ] || ok=0
for name in beach:beach.jpeg city:city.JPEG dog:dog.jpg "old trip:old trip.jpeg"; do
  [ "$(cat "${name%%:*}.jpg" 2>/dev/null)" = "content of ${name#*:}" ] || ok=0
done
echo $ok > /logs/verifier/reward.txt
