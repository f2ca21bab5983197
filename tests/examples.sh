#!/usr/bin/env bash
# Runs every example the project shows users and checks its output:
# the C programs of examples_c/, the CLIPS demo of `make demo`, and the code
# blocks of README.md and docs/*.md (tests/run_doc_blocks.py).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=build/examples
mkdir -p "$out"
unset CLARA_CONFIG CLARA_LOG
fail=0

for src in examples_c/*.c; do
  name=$(basename "$src" .c)
  ${CC:-cc} -Wall -Wextra -Werror -Iinclude "$src" -o "$out/$name" -Llib -lclara -Wl,-rpath,"$root/lib"
  if diff -u "tests/examples/$name.out" <("$out/$name" 2>&1); then
    echo "ok   examples_c/$name.c"
  else
    echo "FAIL examples_c/$name.c: output differs from tests/examples/$name.out"; fail=1
  fi
done

# The demo exactly as `make demo` runs it.
if diff -u tests/examples/demo.out <(bin/clara-clips -f2 examples_c/demo.clp < /dev/null 2>&1); then
  echo "ok   examples_c/demo.clp (make demo)"
else
  echo "FAIL examples_c/demo.clp: output differs from tests/examples/demo.out"; fail=1
fi

# The agent demo exactly as `make demo-agent` runs it; its status lines
# (stderr) are compared with the durations left out.
if bash examples_c/agent/run.sh > "$out/demo_agent.stdout" 2> "$out/demo_agent.stderr" &&
   diff -u tests/examples/demo_agent.out "$out/demo_agent.stdout" &&
   diff -u tests/examples/demo_agent.err <(sed -E 's/\([0-9]+ms\)/(Nms)/' "$out/demo_agent.stderr"); then
  echo "ok   examples_c/agent (make demo-agent)"
else
  echo "FAIL examples_c/agent: make demo-agent failed or its output differs from tests/examples/demo_agent.{out,err}"
  cat "$out/demo_agent.stderr"; fail=1
fi

# make install into a scratch prefix: pkg-config finds clara, and the
# installed clara-clips finds the installed library.
prefix=$root/$out/prefix
rm -rf "$prefix"
make --no-print-directory -s install PREFIX="$prefix" >/dev/null
cc_flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs clara)
${CC:-cc} -Wall -Wextra -Werror examples_c/hello.c -o "$out/hello-installed" $cc_flags -Wl,-rpath,"$prefix/lib"
if [[ "$("$out/hello-installed")" == "$(cat tests/examples/hello.out)" ]] &&
   [[ "$(echo '(printout t (clara-evaluate "{}") crlf)' | "$prefix/bin/clara-clips" -f2 /dev/null)" == *'{"status":"success","tool":"echo","result":{}}'* ]] &&
   [[ -L "$prefix/lib/libclara.so.0" && -f "$prefix/include/clara.h" && -f "$prefix/include/clara_clips.h" ]]; then
  echo "ok   make install PREFIX=$out/prefix (pkg-config, clara-clips, links, headers)"
else
  echo "FAIL make install: the installed tree does not work"; fail=1
fi

python3 tests/run_doc_blocks.py README.md docs/*.md || fail=1
exit $fail
