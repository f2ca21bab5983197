#!/usr/bin/env bash
# check-glibc.sh LIBRARY MAX: the library may be tagged manylinux_MAX
# (PEP 600): it needs no glibc symbol version newer than MAX (2.34), no
# private glibc symbol, and no library besides those every glibc system
# has. `make wheel` runs it before tagging the wheel; any other answer
# fails the build, naming what is too new.
set -euo pipefail
lib=$1 max=$2
fail=0

# The versions the library asks of each library it needs (.gnu.version_r).
versions=$(readelf -V --wide "$lib" | sed -n 's/.*Name: \(GLIBC_[^ ]*\).*/\1/p' | sort -u)
newer() { # is version $1 (2.35) newer than $2 (2.34)?
  [[ $1 != "$2" && $(printf '%s\n%s\n' "$1" "$2" | sort -V | tail -1) == "$1" ]]
}
highest=
for v in $versions; do
  n=${v#GLIBC_}
  if [[ $n == PRIVATE ]]; then
    echo "check-glibc: $lib uses private glibc symbols (GLIBC_PRIVATE)"; fail=1; continue
  fi
  if newer "$n" "$max"; then
    echo "check-glibc: $lib needs $v, newer than glibc $max: the wheel cannot be tagged manylinux_${max/./_}"
    echo "  the symbols: $(objdump -T "$lib" | grep -F "($v)" | awk '{print $NF}' | sort -u | tr '\n' ' ')"
    fail=1
  fi
  if [[ -z $highest ]] || newer "$n" "$highest"; then highest=$n; fi
done

# Only the libraries of glibc itself (and libgcc_s), as manylinux allows.
for needed in $(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
  case $needed in
    libc.so.6|libm.so.6|libpthread.so.0|libdl.so.2|librt.so.1|libutil.so.1|libgcc_s.so.1|ld-linux-*.so.*) ;;
    *) echo "check-glibc: $lib needs $needed, which manylinux does not allow"; fail=1 ;;
  esac
done
if [[ $fail == 0 ]]; then
  echo "check-glibc: $lib needs glibc ${highest:-(none)} at most (allowed: $max)"
fi
exit $fail
