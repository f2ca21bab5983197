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
# (stderr) are compared with the durations left out, and none may read
# "(0ms)": a call under a millisecond says its microseconds (issue 26 §6).
if bash examples_c/agent/run.sh > "$out/demo_agent.stdout" 2> "$out/demo_agent.stderr" &&
   diff -u tests/examples/demo_agent.out "$out/demo_agent.stdout" &&
   diff -u tests/examples/demo_agent.err <(sed -E 's/\([0-9]+(ms|µs)\)/(Nms)/' "$out/demo_agent.stderr") &&
   ! grep -F '(0ms)' "$out/demo_agent.stderr"; then
  echo "ok   examples_c/agent (make demo-agent)"
else
  echo "FAIL examples_c/agent: make demo-agent failed or its output differs from tests/examples/demo_agent.{out,err}"
  cat "$out/demo_agent.stderr"; fail=1
fi

# make install into a scratch prefix: the installed clara-clips and clara
# run, the links and headers are there, and install says how to build
# against a prefix the dynamic linker does not search. (Building a program
# against an install is README.md's part, run as written below.)
prefix=$root/$out/prefix
rm -rf "$prefix"
notes=$(make --no-print-directory -s install PREFIX="$prefix")
if [[ "$(echo '(printout t (clara-evaluate "{}") crlf)' | "$prefix/bin/clara-clips" -f2 /dev/null)" == *'{"status":"success","tool":"echo","result":{}}'* ]] &&
   [[ "$("$prefix/bin/clara" call echo '{"a":1}')" == '{"a":1}' ]] &&
   [[ -L "$prefix/lib/libclara.so.0" && -f "$prefix/include/clara.h" && -f "$prefix/include/clara_clips.h" ]] &&
   [[ $notes == *"export PKG_CONFIG_PATH=$prefix/lib/pkgconfig"* && $notes == *"-Wl,-rpath,$prefix/lib"* ]]; then
  echo "ok   make install PREFIX=$out/prefix (clara-clips, clara, links, headers, the lines to build against it)"
else
  echo "FAIL make install: the installed tree does not work, or install did not say how to use it"; echo "$notes"; fail=1
fi

# README.md's commands exactly as written: building hello.c in the tree and
# after make install (as root, and under $HOME), the wheel into a venv.
python3 tests/readme_commands.py README.md || fail=1

# The agent demo's rule, tested as docs/cli.md shows.
if bin/clara rules test examples_c/agent/rules/valve_locked.test.toml --coverage > "$out/valve.out" &&
   grep -q "coverage: 1 of 1 rules fired" "$out/valve.out"; then
  echo "ok   examples_c/agent/rules/valve_locked.test.toml (bin/clara rules test)"
else
  echo "FAIL examples_c/agent/rules/valve_locked.test.toml"; cat "$out/valve.out"; fail=1
fi

# The wheel's manylinux tag rests on tests/check-glibc.sh: it must refuse a
# library that needs a glibc newer than the tag's.
printf '#include <stdlib.h>\nunsigned f(void) { return arc4random(); }\n' > "$out/new_glibc.c"
if ${CC:-cc} -Werror=implicit-function-declaration -shared -fPIC -o "$out/new_glibc.so" "$out/new_glibc.c" 2>/dev/null; then
  if bash tests/check-glibc.sh "$out/new_glibc.so" 2.34 > "$out/new_glibc.out"; then
    echo "FAIL tests/check-glibc.sh accepted a library that needs GLIBC_2.36 (arc4random)"; fail=1
  else
    echo "ok   tests/check-glibc.sh refuses a library that needs a glibc newer than 2.34"
  fi
else
  echo "ok   tests/check-glibc.sh: this glibc has no arc4random (older than 2.36), no newer symbol to try it on"
fi

python3 tests/run_doc_blocks.py README.md docs/*.md || fail=1
exit $fail
