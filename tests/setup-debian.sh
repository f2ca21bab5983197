#!/usr/bin/env bash
# Installs the Debian packages Clara's build, tests and benches need, only
# when some are missing, so that `make demo`, `make test` and `make bench`
# work on a fresh Debian machine. Usage: setup-debian.sh build|bench
set -euo pipefail

# python3-venv/-pip/-setuptools/-wheel build and install the Python package
# offline (make wheel, make test-python); mypy type-checks it.
# postgresql: the shared store's tests start a throwaway server (tests/pg.sh).
build_pkgs=(gcc g++ make pkg-config ca-certificates libclips-dev valgrind python3
            python3-venv python3-pip python3-setuptools python3-wheel mypy postgresql)
# node and npm run the MCP tests: Debian's packages unless they are on PATH
# already (NodeSource's nodejs bundles npm and conflicts with Debian's npm).
command -v node >/dev/null 2>&1 || build_pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || build_pkgs+=(npm)
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

here=$(cd "$(dirname "$0")" && pwd)
go_version=go1.27.3 # fetched from the Go module proxy when no Go >= 1.27 is installed (see find-go.sh)
need_go=0
[[ "$(bash "$here/find-go.sh" 2>/dev/null)" == go ]] && { need_go=1; wanted+=(curl unzip); }

missing=()
for p in "${wanted[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

install_go() {
  # The Go toolchain is published on the module proxy as an ordinary module.
  local dest=${CLARA_GO_CACHE:-$HOME/.cache/clara} arch
  arch=$(dpkg --print-architecture)
  local mod="golang.org/toolchain@v0.0.1-$go_version.linux-$arch"
  local url="${GOPROXY_URL:-https://proxy.golang.org}/golang.org/toolchain/@v/v0.0.1-$go_version.linux-$arch.zip"
  echo "setup-debian.sh: no Go >= 1.27 found; fetching $go_version from $url"
  mkdir -p "$dest"
  rm -rf "$dest/go" "$dest/$mod"
  curl -sSfL "$url" -o "$dest/toolchain.zip"
  (cd "$dest" && unzip -q toolchain.zip && mv "$mod" go && rm -f toolchain.zip)
  chmod +x "$dest"/go/bin/* "$dest"/go/pkg/tool/*/* 2>/dev/null || true
  "$dest/go/bin/go" version
}

if [[ ${#missing[@]} -eq 0 ]]; then
  [[ $need_go -eq 1 ]] && install_go
  exit 0
fi

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
[[ $need_go -eq 1 ]] && install_go
exit 0
