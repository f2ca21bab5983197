#!/usr/bin/env bash
# post-install.sh PREFIX DESTDIR: the end of `make install`. When the
# dynamic linker searches PREFIX/lib (/usr/local/lib, /usr/lib, ...), run
# ldconfig, so that programs linked with -lclara find libclara.so.0 at run
# time; otherwise say how to build against the library and find it (an
# rpath, PKG_CONFIG_PATH). A DESTDIR is a staging tree: nothing to do.
set -uo pipefail
prefix=$1 destdir=${2:-}
libdir=$prefix/lib
if [[ -n $destdir ]]; then
  echo "make install: staged under $destdir$prefix; run ldconfig where it is unpacked"
  exit 0
fi

# The directories the dynamic linker searches: those of ld.so.conf, and the
# trusted /lib and /usr/lib.
target=$(realpath -m "$libdir")
searched=no
while IFS= read -r dir; do
  [[ -n $dir && $(realpath -m "$dir") == "$target" ]] && searched=yes
done < <(ldconfig -v -N 2>/dev/null | sed -n 's/^\([^[:space:]][^:]*\):.*/\1/p'; echo /lib; echo /usr/lib)

pc_found=yes
if command -v pkg-config >/dev/null; then
  case ":$(pkg-config --variable pc_path pkg-config):${PKG_CONFIG_PATH:-}:" in
    *":$libdir/pkgconfig:"*) ;;
    *) pc_found=no ;;
  esac
fi

if [[ $searched == yes ]]; then
  if ldconfig 2>/dev/null; then
    echo "make install: ran ldconfig; programs find $libdir/libclara.so.0"
  else
    echo "make install: run ldconfig as root, so that programs find $libdir/libclara.so.0"
  fi
  [[ $pc_found == yes ]] || echo "  pkg-config: export PKG_CONFIG_PATH=$libdir/pkgconfig"
  exit 0
fi
echo "make install: the dynamic linker does not search $libdir; build against the library with"
[[ $pc_found == yes ]] || echo "  export PKG_CONFIG_PATH=$libdir/pkgconfig"
echo "  cc hello.c \$(pkg-config --cflags --libs clara) -Wl,-rpath,$libdir"
echo "(or set LD_LIBRARY_PATH=$libdir when running the program)"
