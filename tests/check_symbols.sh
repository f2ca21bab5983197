#!/usr/bin/env bash
# Checks that a built libclara.so exports exactly the functions clara.h
# declares: nothing else (no Go runtime, no claraGo* internals), nothing
# missing. Usage: check_symbols.sh LIB HEADER
set -euo pipefail
lib=$1 header=$2
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sed 's/@.*//' | sort -u)
declared=$(grep -oE '\bclara_[a-z0-9_]+\(' "$header" | tr -d '(' | sort -u)
if [[ "$exported" != "$declared" ]]; then
  echo "check_symbols: exports of $lib differ from the functions of $header:" >&2
  diff <(echo "$declared") <(echo "$exported") | sed 's/^</  declared only:/; s/^>/  exported only:/' >&2 || true
  exit 1
fi
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
if [[ "$soname" != "libclara.so.0" ]]; then
  echo "check_symbols: soname is '$soname', want libclara.so.0" >&2
  exit 1
fi
echo "check_symbols: $(echo "$exported" | wc -l) exports, all clara_* and all declared; soname $soname"
