#!/bin/bash
cd /app/photos
for f in *.jpeg *.JPEG; do
  [ -e "$f" ] && mv -- "$f" "${f%.*}.jpg"
done
true
