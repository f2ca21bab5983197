package rulelua

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The attack corpus. Every case runs in its own child process (the test binary re-executed with
// RULELUA_ATTACK=<name>), so a fatal Go error, a crash or an os.exit cannot hide a pass: the
// parent wants exit status 0 and a "CASE-OK" line. In the child, the attack must end (with the
// expected kind of error, or without error for the poisoning cases that swallow their own
// errors) within the deadline plus attackMargin, grow memory by less than its bound, and then a
// clean script run in the same pool must see pristine libraries.

const (
	attackMargin   = 500 * time.Millisecond // generous: the machines running the tests are shared and often loaded
	attackMemBound = 64 << 20
)

type attack struct {
	name string
	src  string
	// want: "timeout", "limit", "runtime", "syntax", "syntax_limit" (Compile refuses it),
	// "bounded" (a limit or the deadline, whichever comes first), "error" (any error), "ok" (no error),
	// "any" (either, as long as it ends in time and the pool is clean afterwards).
	want string
	// msg, when set, must appear in the error.
	msg string
	// memBound overrides attackMemBound (for attacks bounded only by the deadline).
	memBound uint64
}

// longLoopBody is a loop whose body compiles to ~250000 instructions (one per unary operator):
// gopher-lua wraps the backward jump's 18-bit offset and the VM indexes past the code.
var longLoopBody = "local mt = {} local b = setmetatable({}, mt) mt.__unm = function() return b end " +
	"mt.__len = function() return b end local a local i = 0 while true do i = i + 1 if i > 2 then return i end\n" +
	strings.Repeat("a="+strings.Repeat("-#", 90)+"b\n", 1360) + "end"

var deepTables = "return " + strings.Repeat("{", 100000) + strings.Repeat("}", 100000)

var attacks = []attack{
	// infinite loops
	{"while_true", `while true do end`, "timeout", "deadline of 50ms exceeded", 0},
	{"repeat_until_false", `repeat until false`, "timeout", "", 0},
	{"goto_loop", `::top:: goto top`, "timeout", "", 0},
	{"numeric_for_huge", `for i = 1, math.huge do end`, "timeout", "", 0},
	{"tail_call_loop", `local function f() return f() end return f()`, "runtime", "stack overflow", 0},
	{"tail_call_then_error", `local n = 0 local function f() n = n + 1 if n < 1e7 then return f() end error("x") end f()`, "runtime", "stack overflow", 0},
	{"tail_call_pcall_loop", `local function f() return f() end while true do pcall(f) end`, "timeout", "", 0},
	{"pcall_swallow", `while true do pcall(function() while true do end end) end`, "timeout", "", 0},
	{"pcall_swallow_return", `local ok, e = pcall(function() while true do end end) return "caught: " .. tostring(e)`, "timeout", "", 0},
	{"pcall_error_loop", `while true do pcall(error, "x") end`, "timeout", "", 0},
	{"pcall_nested", `while true do pcall(pcall, pcall, function() while true do end end) end`, "timeout", "", 0},
	{"xpcall_handler_loops", `xpcall(function() while true do end end, function() while true do end end)`, "timeout", "", 0},
	{"xpcall_swallow_return", `return xpcall(function() while true do end end, function(e) return e end)`, "timeout", "", 0},
	{"recursive_pcall_loop", `local function f() while true do pcall(f) end end f()`, "timeout", "", 0},
	{"index_function_loops", `local t = setmetatable({}, {__index = function() while true do end end}) return t.x`, "timeout", "", 0},
	{"lt_loops", `local mt = {__lt = function() while true do end end} return setmetatable({}, mt) < setmetatable({}, mt)`, "timeout", "", 0},
	{"tostring_loops", `print(setmetatable({}, {__tostring = function() while true do end end}))`, "timeout", "", 0},
	{"concat_meta_loops", `local x = setmetatable({}, {__concat = function() while true do end end}) return x .. "a"`, "timeout", "", 0},
	{"gsub_callback_loops", `string.gsub("aaa", "a", function() while true do end end)`, "timeout", "", 0},
	// (gopher-lua miscompiles an empty `while true do end` inside a generic for: the body
	// here is not empty on purpose.)
	{"gmatch_body_loops", `for w in string.gmatch("a b c", "%a") do while true do local x = 1 end end`, "timeout", "", 0},
	{"sort_comparator_loops", `local t = {} for i = 1, 100 do t[i] = i end table.sort(t, function(a, b) while true do end end)`, "timeout", "", 0},
	{"sort_inconsistent", `local t = {} for i = 1, 2000 do t[i] = i end table.sort(t, function(a, b) return math.random() < 0.5 end) return #t`, "ok", "", 0},
	{"sort_inconsistent_always_true", `local t = {} for i = 1, 2000 do t[i] = i % 7 end table.sort(t, function(a, b) return true end) return #t`, "ok", "", 0},
	{"len_scan_loop", `local t = {} t[1048575] = 1 t[1048575] = nil while true do local n = #t end`, "timeout", "", 128 << 20},
	{"error_object_tostring_loops", `error(setmetatable({}, {__tostring = function() while true do end end}))`, "runtime", "error object is a table", 0},
	{"index_cycle", `local t = {} setmetatable(t, {__index = t}) return t.x`, "runtime", "", 0},
	{"index_table_chain", `local a, b = {}, {} setmetatable(a, {__index = b}) setmetatable(b, {__index = a}) return a.x`, "runtime", "", 0},

	// deep recursion
	{"recursion_plain", `local function f() return 1 + f() end return f()`, "runtime", "stack overflow", 0},
	{"recursion_index", `local t = setmetatable({}, {__index = function(t, k) return t[k] end}) return t.x`, "runtime", "stack overflow", 0},
	{"recursion_newindex", `local t = setmetatable({}, {__newindex = function(t, k, v) t[k] = v end}) t.x = 1`, "runtime", "stack overflow", 0},
	{"recursion_call", `local t = setmetatable({}, {__call = function(self) return 1 + self() end}) return t()`, "runtime", "stack overflow", 0},
	{"tail_call_meta_loop", `local t = setmetatable({}, {__call = function(self) return self() end}) return t()`, "runtime", "stack overflow", 0},
	{"recursion_pcall", `local function f() pcall(f) end f() return "done"`, "ok", "", 0},
	{"recursion_xpcall", `local function f() xpcall(f, f) end f() return "done"`, "any", "", 0},
	{"recursion_tostring", `local t t = setmetatable({}, {__tostring = function(x) return tostring(x) end}) return tostring(t)`, "runtime", "stack overflow", 0},
	{"recursion_concat", `local t t = setmetatable({}, {__concat = function(a, b) return a .. b end}) return t .. "x"`, "runtime", "stack overflow", 0},
	{"recursion_gsub", `local function f(s) return (string.gsub(s, ".", f)) end return f("ab")`, "runtime", "stack overflow", 0},
	{"recursion_sort", `local function f(a, b) table.sort({3, 2, 1}, f) return a < b end table.sort({3, 2, 1}, f)`, "runtime", "stack overflow", 0},
	{"recursion_le", `local mt = {} mt.__le = function(a, b) return a <= b end return setmetatable({}, mt) <= setmetatable({}, mt)`, "runtime", "stack overflow", 0},
	{"deep_nesting_result", `local t = {} local c = t for i = 1, 1000 do c.x = {} c = c.x end return t`, "runtime", "nested more than 100", 0},
	{"deep_nesting_json", `local t = {} local c = t for i = 1, 1000 do c.x = {} c = c.x end return json.encode(t)`, "runtime", "nested more than 100", 0},
	{"cyclic_result", `local t = {} t.t = t return t`, "runtime", "nested more than 100", 0},
	{"dag_result", `local t = {1} for i = 1, 60 do t = {t, t} end return t`, "limit", "too large", 0},
	{"dag_state_set", `local t = {1} for i = 1, 60 do t = {t, t} end state.set("x", t)`, "limit", "too large", 0},
	{"json_decode_deep", `return json.decode(string.rep("[", 5000) .. string.rep("]", 5000))`, "runtime", "nested more than", 0},

	// memory bombs
	{"rep_huge", `return string.rep("x", 1e9)`, "limit", "string.rep result over 1048576 bytes", 0},
	{"rep_method_huge", `return ("x"):rep(2^40)`, "limit", "string.rep result over", 0},
	{"rep_sep_huge", `return string.rep("", 1e9, "ab")`, "limit", "string.rep result over", 0},
	{"rep_empty_fast", `return #string.rep("", 1e15)`, "ok", "", 0},
	{"concat_doubling", `local s = "x" while true do s = s .. s end`, "limit", "concatenation result over", 0},
	{"concat_doubling_pcall", `local s = "x" while true do pcall(function() s = s .. s end) end`, "limit", "concatenation result over", 0},
	{"concat_many_copies", `local t, s = {}, string.rep("x", 1e5) for i = 1, 1e6 do t[i] = s .. i end`, "limit", "more than 33554432 bytes", 0},
	{"concat_multi", `local s = string.rep("x", 3e5) return s .. s .. s .. s`, "limit", "concatenation result over", 0},
	{"upper_copies", `local t, s = {}, string.rep("x", 1e6) for i = 1, 1e4 do t[i] = s:upper() end`, "bounded", "", 0},
	{"table_concat_big", `local t = {} for i = 1, 2000 do t[i] = string.rep("x", 1000) end return table.concat(t)`, "limit", "table.concat result over", 0},
	{"table_concat_sep", `local t = {} for i = 1, 1e5 do t[i] = "" end return table.concat(t, string.rep("x", 1e4))`, "limit", "table.concat result over", 0},
	{"gsub_growing", `local s = string.rep("a", 1000) while true do s = s:gsub("a", "aa") end`, "bounded", "", 0},
	{"gsub_repl_copies", `return (string.rep("a", 1e5):gsub("a", "%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0"))`, "limit", "string.gsub result over", 0},
	{"format_width", `return string.format("%099999d", 1)`, "runtime", "invalid format", 0},
	{"format_precision", `return string.format("%.99999f", 1)`, "runtime", "invalid format", 0},
	{"format_many_items", `local s = string.rep("x", 5e5) return string.format("%s%s%s", s, s, s)`, "limit", "string.format result over", 0},
	{"format_q_growth", `local s = string.rep("\"", 6e5) return string.format("%q", s)`, "limit", "string.format result over", 0},
	{"unpack_huge", `return unpack({}, 1, 1e8)`, "limit", "too many results to unpack", 0},
	{"unpack_extreme", `return unpack({}, -1e308, 1e308)`, "limit", "too many results to unpack", 0},
	{"byte_all", `local s = string.rep("x", 1e6) return s:byte(1, -1)`, "limit", "string slice too long", 0},
	{"char_huge", `local t = {} for i = 1, 1e5 do t[i] = 65 end return string.char(unpack(t))`, "limit", "too many results", 0},
	{"select_huge", `return select("#", unpack({}, 1, 1e7))`, "limit", "too many results", 0},
	{"sparse_array_giant", `local t = {} t[67108863] = 1 t[2^53] = 1 return #t`, "ok", "", 0},
	{"table_insert_far", `local t = {} table.insert(t, 2^40, 1) table.insert(t, 1e15, 2) return #t`, "runtime", "position out of bounds", 0},
	// Lua 5.2+ bounds: Lua 5.1's table.insert shifted every slot between #t+1 and a far negative
	// position before looking at the clock (~37 s here).
	{"table_insert_negative", `table.insert({}, -1e9, 1) return 1`, "runtime", "bad argument #2 to 'insert' (position out of bounds)", 0},
	{"table_insert_negative_pcall", `local t = {1, 2, 3} for i = 1, 1e6 do pcall(table.insert, t, -2e7, 1) end return #t`, "bounded", "", 0},
	{"table_insert_zero", `local t = {1} table.insert(t, 0, 2) return #t`, "runtime", "position out of bounds", 0},
	{"json_encode_big", `local t = {} for i = 1, 2e5 do t[i] = "xxxxxxxxxx" end return #json.encode(t)`, "bounded", "", 0},
	{"json_encode_big_fast", `local t = {string.rep("x", 6e5), string.rep("y", 6e5)} return #json.encode(t)`, "limit", "json.encode result over", 0},
	{"string_budget_small_pieces", `local t = {} for i = 1, 1e7 do t[#t + 1] = string.rep("y", 65536) end`, "limit", "more than 33554432 bytes", 0},
	// Derived strings count: string.sub shares its source's memory but is a new string (a
	// table key kept in a table's key list forever, hashed by every next()).
	{"sub_dead_keys_next", `local s = string.rep("x", 1e6) local t = {} for i = 1, 1e4 do local k = s:sub(i) t[k] = true t[k] = nil end t.last = 1 while true do next(t) end`, "limit", "more than 33554432 bytes", 0},
	{"sub_dead_keys_index_next", `local s = string.rep("x", 1e6) local t = {} for i = 1, 1e4 do local k = s:sub(i) t[k] = true t[k] = nil end t.last = 1 setmetatable(t, {__index = next}) local x while true do x = t.q x = t.q x = t.q x = t.q end`, "limit", "more than 33554432 bytes", 0},
	{"match_capture_copies", `local s = string.rep("x", 1e6) local t = {} for i = 1, 1e4 do t[i] = s:match("(.*)", i) end`, "bounded", "", 0},
	{"gmatch_capture_copies", `local s = string.rep("x", 1e6) local t = {} while true do for w in s:gmatch(".+") do t[#t + 1] = w end end`, "bounded", "", 0},
	{"error_message_copies", `local s = string.rep("x", 1e6) local t = {} while true do local ok, e = pcall(error, s) t[#t + 1] = e end`, "limit", "more than 33554432 bytes", 0},
	{"error_message_copies_level", `local s = string.rep("x", 1e6) local t = {} while true do local ok, e = pcall(function() error(s) end) t[#t + 1] = e end`, "limit", "more than 33554432 bytes", 0},
	{"assert_message_copies", `local s = string.rep("x", 1e6) local t = {} while true do local ok, e = pcall(assert, false, s) t[#t + 1] = e end`, "limit", "more than 33554432 bytes", 0},
	// json.decode builds ~40 bytes of tables per byte of "[]," input: decoded values count.
	{"json_decode_amplify", `local s = "[" .. string.rep("[]", 50000, ",") .. "]" local keep = {} while true do keep[#keep + 1] = json.decode(s) end`, "bounded", "", 48 << 20},
	{"json_decode_objects", `return #json.decode("[" .. string.rep('{"a":1}', 40000, ",") .. "]")`, "bounded", "", 56 << 20},
	// A run that returns after its deadline is a timeout, whatever it returned, and decoding
	// polls the deadline.
	{"json_decode_late", `local s = "[" .. string.rep("[]", 262000, ",") .. "]" local t0 = os.clock() while os.clock() - t0 < 0.045 do end local v = json.decode(s) return #v`, "timeout", "", 0},
	{"log_flood", `for i = 1, 1e4 do log("info", "line") print("p") end return 1`, "ok", "", 0},
	{"actions_flood", `for i = 1, 1e6 do notify("x") end`, "limit", "more than 1000 actions", 0},
	// Tables grown in a loop are bounded only by the deadline (see README).
	{"table_growth", `local t = {} while true do t[#t + 1] = {} end`, "timeout", "", 512 << 20},

	// pattern bombs
	{"pattern_lazy_captures", `return string.find(string.rep("a", 1e5), "(.-)(.-)(.-)(.-)b")`, "timeout", "", 0},
	{"pattern_greedy", `return string.match(string.rep("a", 1e5), ".*.*.*.*.*b")`, "timeout", "", 0},
	{"pattern_gmatch", `local n = 0 for a in string.gmatch(string.rep("a", 1e5), "(.-)(.-)(.-)b") do n = n + 1 end return n`, "timeout", "", 0},
	{"pattern_gsub", `return (string.gsub(string.rep("a", 1e5), "a-a-a-a-a-b", "x"))`, "timeout", "", 0},
	{"pattern_too_complex", `return string.find("x", string.rep("(", 300) .. "x" .. string.rep(")", 300))`, "runtime", "", 0},
	{"pattern_deep_optional", `return string.match(string.rep("a", 1e4), string.rep("a?", 5000) .. "b")`, "runtime", "pattern too complex", 0},
	{"pattern_malformed", `return string.find("abc", "[a")`, "runtime", "malformed pattern", 0},
	{"pattern_balance", `return string.find(string.rep("(", 1e6), "%b()")`, "timeout", "", 0},
	{"pattern_balance_linear", `return string.find(string.rep("(", 1e5) .. string.rep(")", 1e5), "%b()")`, "ok", "", 0},
	{"pattern_backref_loop", `local s = string.rep("a", 1e5) return s:find("(a*)%1%1%1b")`, "timeout", "", 0},

	// loaders and escapes
	{"no_load", `return load("return 1")`, "runtime", "", 0},
	{"no_loadstring", `return loadstring("return 1")()`, "runtime", "", 0},
	{"no_dofile", `return dofile("/etc/passwd")`, "runtime", "", 0},
	{"no_loadfile", `return loadfile("/etc/passwd")`, "runtime", "", 0},
	{"no_require", `return require("os")`, "runtime", "", 0},
	{"no_module", `module("x")`, "runtime", "", 0},
	{"no_getfenv", `return getfenv(1)`, "runtime", "", 0},
	{"no_setfenv", `setfenv(1, {})`, "runtime", "", 0},
	{"no_debug", `return debug.getregistry()`, "runtime", "", 0},
	{"no_io", `io.write("x")`, "runtime", "", 0},
	{"no_os_execute", `os.execute("touch /tmp/rulelua-pwned")`, "runtime", "", 0},
	{"no_os_exit", `os.exit(3)`, "runtime", "", 0},
	{"no_os_getenv", `return os.getenv("HOME")`, "runtime", "", 0},
	{"no_os_remove", `os.remove("/tmp/x")`, "runtime", "", 0},
	{"no_package", `return package.loaded`, "runtime", "", 0},
	{"no_collectgarbage", `collectgarbage("collect")`, "runtime", "", 0},
	{"no_newproxy", `return newproxy(true)`, "runtime", "", 0},
	{"no_string_dump", `return string.dump(print)`, "runtime", "", 0},
	{"no_channel", `return channel.make()`, "runtime", "", 0},
	{"no_coroutine", `return coroutine.create(print)`, "runtime", "", 0},
	{"no_printregs", `_printregs()`, "runtime", "", 0},
	{"no_dump_via_metatable", `return ("").dump`, "ok", "", 0},
	{"no_gopher_globals", `assert(_GOPHER_LUA_VERSION == nil and arg == nil) return 1`, "ok", "", 0},

	// string metatable and global poisoning (the clean run afterwards must see pristine libraries)
	{"string_meta_index", `getmetatable("").__index = {len = function() return 42 end}`, "runtime", "", 0},
	{"string_meta_index_pcall", `pcall(function() getmetatable("").__index = {} end) return 1`, "ok", "", 0},
	{"string_setmetatable", `pcall(setmetatable, "", {__index = {len = function() return 42 end}}) return 1`, "ok", "", 0},
	{"number_setmetatable", `pcall(setmetatable, 1, {__index = function() return 42 end}) return 1`, "ok", "", 0},
	{"function_setmetatable", `pcall(setmetatable, print, {__call = function() end}) return 1`, "ok", "", 0},
	{"string_len_nil", `pcall(function() string.len = nil end) return 1`, "ok", "", 0},
	{"string_len_nil_error", `string.len = nil`, "runtime", "read-only", 0},
	{"string_new_key", `pcall(function() string.evil = print end) return 1`, "ok", "", 0},
	{"rawset_string", `pcall(rawset, string, "len", function() return 42 end) pcall(rawset, string, "x", 1) return 1`, "ok", "", 0},
	{"table_insert_math", `pcall(table.insert, math, 1) pcall(table.insert, math, 1, 2) return 1`, "ok", "", 0},
	{"table_remove_string", `pcall(table.remove, string) pcall(table.sort, string) return 1`, "ok", "", 0},
	{"pairs_rawset_libs", `for _, lib in ipairs({string, table, math, os, json, state}) do for k in pairs(lib) do pcall(rawset, lib, k, nil) end end return 1`, "ok", "", 0},
	{"pairs_state_value", `local f, s = pairs(string) return s == nil`, "ok", "", 0},
	{"globals_print_nil", `_G.print = nil; pcall = nil; string = nil; x_leak = 1; return 1`, "ok", "", 0},
	{"setmetatable_G", `pcall(setmetatable, _G, {__index = function() return 1 end}) pcall(function() getmetatable(_G).__index = nil end) return 1`, "ok", "", 0},
	{"rawset_G", `rawset(_G, "x_leak", 1) rawset(_G, "string", {}) return 1`, "ok", "", 0},
	{"ctx_write", `pcall(function() ctx.x = 1 end) pcall(rawset, ctx, "x", 1) return 1`, "ok", "", 0},
	{"library_function_env", `local f = string.len pcall(function() setfenv(f, {}) end) return 1`, "ok", "", 0},
	{"math_randomseed", `math.randomseed(42) return math.random(1, 10) > 0`, "ok", "", 0},

	// source bombs
	{"source_huge", "-- " + strings.Repeat("x", 300<<10), "syntax_limit", "over the limit", 0},
	{"source_deep_tables", deepTables, "syntax", "too many syntax levels", 0},
	{"source_deep_functions", "return " + strings.Repeat("function() return ", 5000) + "1" + strings.Repeat(" end", 5000), "syntax", "too many syntax levels", 0},
	{"source_deep_unary", "return " + strings.Repeat("- ", 100000) + "1", "syntax", "too many syntax levels", 0},
	{"source_deep_not", "return " + strings.Repeat("not ", 50000) + "1", "syntax", "too many syntax levels", 0},
	{"source_deep_blocks", strings.Repeat("do ", 30000) + strings.Repeat("end ", 30000), "syntax", "too many syntax levels", 0},
	{"source_deep_parens", "return " + strings.Repeat("(", 100000) + "1" + strings.Repeat(")", 100000), "syntax", "too many syntax levels", 0},
	{"source_long_sum", "return " + strings.Repeat("1 + ", 60000) + "1", "syntax", "too many syntax levels", 0},
	{"source_long_concat", "return " + strings.Repeat("'a' .. ", 30000) + "'a'", "syntax", "too many syntax levels", 0},
	{"source_long_power", "return " + strings.Repeat("2 ^ ", 60000) + "1", "syntax", "too many syntax levels", 0},
	{"source_long_concat_calls", "return " + strings.Repeat("f() .. ", 30000) + "'a'", "syntax", "too many syntax levels", 0},
	{"source_ok_nested_ifs", "local x = 1 " + strings.Repeat("if x == 0 then x = 1 else ", 150) + " x = 2 " + strings.Repeat(" end", 150) + " return x", "ok", "", 0},
	{"source_many_args", "return select('#', " + strings.Repeat("1, ", 60000) + "1)", "syntax", "too many values", 0},
	{"source_many_locals", "local " + strings.Repeat("a, ", 60000) + "b = 1", "syntax", "too many values", 0},
	{"source_many_returns", "return " + strings.Repeat("1, ", 60000) + "1", "syntax", "too many values", 0},
	{"source_big_table_ok", "local t = {" + strings.Repeat("1, ", 20000) + "1} return #t", "ok", "", 0},
	{"source_unterminated", "return [[" + strings.Repeat("x", 200000), "syntax", "", 0},
	// gopher-lua compiles these but panics running them (unchecked operand ranges).
	{"source_long_loop_body", longLoopBody, "syntax", "too long", 0},
	{"source_many_upvalues", manyUpvalues(100), "syntax", "upvalues (more than 60)", 0},
	{"source_ok_upvalues", manyUpvalues(60), "ok", "", 0},
	{"source_garbage", "\x00\xff\xfe" + strings.Repeat("@#$%", 1000), "syntax", "", 0},
}

// manyUpvalues is a chunk whose inner function uses n upvalues.
func manyUpvalues(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "local a%d = %d\n", i, i%100)
	}
	b.WriteString("local function f() local s = 0\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "s = s + a%d\n", i)
	}
	b.WriteString("return s end return f()")
	return b.String()
}

// cleanCheck runs after each attack, in the same pool: it fails unless the libraries are pristine.
const cleanCheck = `
assert(type(string.len) == "function" and string.len("abc") == 3, "string.len")
assert(("x"):rep(3) == "xxx" and ("abc"):upper() == "ABC", "string methods")
assert(#"abcd" == 4 and ("x"):len() == 1, "string length")
assert(getmetatable("") == "locked", "string metatable")
assert(rawget(string, "len") == nil and rawget(string, "x") == nil and rawget(string, "evil") == nil, "string proxy")
assert(string.evil == nil, "string.evil")
assert(type(print) == "function" and type(pcall) == "function" and type(setmetatable) == "function", "base")
assert(x_leak == nil and rawget(_G, "x_leak") == nil, "leaked global")
assert(math.pi > 3.14 and math.pi < 3.15 and math.floor(2.5) == 2, "math")
assert(next(math) == nil and rawget(math, 1) == nil, "math proxy")
local t = {} table.insert(t, "a") table.insert(t, 1, "b") assert(#t == 2 and t[1] == "b", "table.insert")
local n = 0 for k in pairs(string) do n = n + 1 end assert(n == 13, "pairs(string) gives " .. n)
assert(getmetatable(_G) == "locked", "globals metatable")
assert(not pcall(function() return (1).x end), "number metatable")
assert(not pcall(function() return print.x end), "function metatable")
assert(json.encode({1, "a"}) == '[1,"a"]', "json")
assert(type(state.get) == "function" and type(notify) == "function", "api")
assert(ctx == nil or ctx.x == nil, "ctx")
assert(string.format("%5.1f|%-3s|%x", 3.14159, "a", 255) == "  3.1|a  |ff", "format")
return "clean"
`

func TestAttackCorpus(t *testing.T) {
	if os.Getenv("RULELUA_ATTACK") != "" {
		t.Skip("in a child")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range attacks {
		if raceEnabled && i%10 != 0 {
			// Under -race each child takes about a second to start and the
			// VM runs ten times slower: a sample keeps the race detector on
			// the sandbox's paths, and make test-go runs the whole corpus
			// without -race, with the real timing margins.
			continue
		}
		t.Run(a.name, func(t *testing.T) {
			cmd := exec.Command(exe, "-test.run=^TestAttackChild$", "-test.v")
			cmd.Env = append(os.Environ(), "RULELUA_ATTACK="+a.name)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "CASE-OK "+a.name) {
				t.Fatalf("child failed (%v):\n%s", err, tail(string(out), 3000))
			}
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, "CASE-OK") {
					t.Log(strings.TrimSpace(line))
				}
			}
		})
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func TestAttackChild(t *testing.T) {
	name := os.Getenv("RULELUA_ATTACK")
	if name == "" {
		t.Skip("only in a child of TestAttackCorpus")
	}
	var a *attack
	for i := range attacks {
		if attacks[i].name == name {
			a = &attacks[i]
		}
	}
	if a == nil {
		t.Fatalf("unknown case %q", name)
	}
	// Warm the pool so that memory measured below is the attack's.
	clean := mustCompile(t, "clean.lua", cleanCheck)
	cleanCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if res, err := clean.Run(cleanCtx, map[string]any{}, nil); err != nil || res.Value != "clean" {
		t.Fatalf("clean check before the attack: %v %v", res.Value, err)
	}

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	peak := samplePeakHeap()
	created := atomic.LoadInt64(&statesCreated)

	start := time.Now()
	var err error
	s, cerr := Compile(a.name+".lua", a.src)
	if cerr != nil {
		err = cerr
	} else {
		_, err = s.Run(context.Background(), map[string]any{"turn": map[string]any{"n": 1}}, &testHost{})
	}
	elapsed := time.Since(start)
	peakHeap := peak()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)

	// The attack: ends in time, with the expected outcome.
	if margin := attackMargin * raceScale; elapsed > DefaultRuleDeadline+margin {
		t.Errorf("took %v, over the deadline plus %v", elapsed, margin)
	}
	if msg := checkOutcome(a, cerr, err); msg != "" {
		t.Error(msg)
	}
	bound := uint64(attackMemBound)
	if a.memBound != 0 {
		bound = a.memBound
	}
	sysGrowth := after.Sys - before.Sys
	heapGrowth := uint64(0)
	if peakHeap > before.HeapAlloc {
		heapGrowth = peakHeap - before.HeapAlloc
	}
	if sysGrowth > bound || heapGrowth > bound {
		t.Errorf("memory grew by %d MiB (Sys) / %d MiB (peak heap), bound %d MiB", sysGrowth>>20, heapGrowth>>20, bound>>20)
	}
	if _, statErr := os.Stat("/tmp/rulelua-pwned"); statErr == nil {
		t.Error("an attack touched the file system")
	}

	// Then a clean script in the same pool sees pristine libraries, on the same state when
	// the attack did not fail (an erroring state is discarded).
	for i := 0; i < 3; i++ {
		res, cleanErr := clean.Run(cleanCtx, map[string]any{}, nil)
		if cleanErr != nil || res.Value != "clean" {
			t.Fatalf("clean check after the attack: %v %v", res.Value, cleanErr)
		}
	}
	if err == nil && cerr == nil && atomic.LoadInt64(&statesCreated) != created {
		t.Errorf("the clean run did not reuse the attack's state")
	}
	if !t.Failed() {
		fmt.Printf("CASE-OK %s: %v in %v, mem +%d KiB\n", a.name, errSummary(err), elapsed.Round(time.Millisecond), max(sysGrowth, heapGrowth)>>10)
	}
}

func errSummary(err error) string {
	if err == nil {
		return "no error"
	}
	var le *Error
	if errors.As(err, &le) {
		msg := le.Message
		if len(msg) > 120 {
			msg = msg[:120] + "..."
		}
		return le.Kind.String() + " error: " + msg
	}
	return err.Error()
}

func checkOutcome(a *attack, cerr, err error) string {
	var le *Error
	if err != nil && !errors.As(err, &le) {
		return fmt.Sprintf("error %v is not an *Error", err)
	}
	if le != nil && le.Kind == KindTimeout && (raceEnabled || a.want == "limit") {
		// Slowed down (by the race detector, or a loaded machine: these run
		// on shared ones) so that the deadline came before the limit: the
		// run still ended in time, and the memory bound below still holds.
		return ""
	}
	if a.msg != "" && (err == nil || !strings.Contains(err.Error(), a.msg)) {
		return fmt.Sprintf("error %v, want it to contain %q", err, a.msg)
	}
	switch a.want {
	case "ok":
		if err != nil {
			return fmt.Sprintf("unexpected error %v", err)
		}
	case "any":
	case "bounded":
		if err == nil || (le.Kind != KindLimit && le.Kind != KindTimeout) {
			return fmt.Sprintf("error %v, want a limit or a timeout", err)
		}
	case "error":
		if err == nil {
			return "no error"
		}
	case "syntax", "syntax_limit":
		if cerr == nil {
			return fmt.Sprintf("compiled; run error %v", err)
		}
		want := KindSyntax
		if a.want == "syntax_limit" {
			want = KindLimit
		}
		if le.Kind != want {
			return fmt.Sprintf("compile error kind %v (%v), want %v", le.Kind, err, want)
		}
	default:
		if err == nil {
			return "no error, want " + a.want
		}
		want := map[string]ErrorKind{"timeout": KindTimeout, "limit": KindLimit, "runtime": KindRuntime}[a.want]
		if le.Kind != want {
			return fmt.Sprintf("error kind %v (%v), want %v", le.Kind, err, a.want)
		}
		if want == KindTimeout && !errors.Is(err, context.DeadlineExceeded) {
			return "timeout does not unwrap to context.DeadlineExceeded"
		}
		if want == KindLimit && !errors.Is(err, ErrLimit) {
			return "limit error does not unwrap to ErrLimit"
		}
	}
	return ""
}

// samplePeakHeap samples the live heap every half millisecond until the returned function is
// called, and returns the peak seen.
func samplePeakHeap() func() uint64 {
	stop := make(chan struct{})
	done := make(chan uint64)
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var peak uint64
		tick := time.NewTicker(500 * time.Microsecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak {
				peak = v
			}
			select {
			case <-stop:
				done <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 { close(stop); return <-done }
}
