#!/usr/bin/env bash
# Installs the Debian packages Clara's build, tests and benches need, only
# when some are missing, so that `make demo`, `make test` and `make bench`
# work on a fresh Debian machine. Usage: setup-debian.sh build|bench
set -euo pipefail

build_pkgs=(gcc g++ make pkg-config libclips-dev valgrind python3)
bench_pkgs=("${build_pkgs[@]}" libjansson-dev python3-simpleeval python3-lupa)

case "${1:-build}" in
  build) wanted=("${build_pkgs[@]}") ;;
  bench) wanted=("${bench_pkgs[@]}") ;;
  *) echo "usage: $0 build|bench" >&2; exit 2 ;;
esac

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup-debian.sh: not a Debian system; install by hand: ${wanted[*]}" >&2
  exit 0
fi

missing=()
for p in "${wanted[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "setup-debian.sh: installing ${missing[*]}"
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then sudo=(sudo); else
    echo "setup-debian.sh: need root to install ${missing[*]}" >&2; exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"; then
  "${sudo[@]}" apt-get update
  "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi
