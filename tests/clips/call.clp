; (clara-call TOOL key value ...) builds the request from CLIPS values: no
; JSON to write or escape by hand. Each value goes to the echo tool and
; comes back through json-get, which must give the same CLIPS value.
(deffunction round-trip (?label ?v)
   (bind ?r (clara-call echo v ?v))
   (bind ?back (json-get ?r "result.v"))
   (printout t ?label ": " (json-get ?r "result") " -> " (type ?back)
               (if (eq ?back ?v) then ", the same" else "") crlf))
; Strings: every character JSON must escape, and UTF-8.
(round-trip "plain" "hello")
(round-trip "empty" "")
(round-trip "quotes" "say \"hi\"")
(round-trip "backslashes" "C:\\temp\\new \\\" \\\\")
(round-trip "newline and tab" "line 1
line 2	after a tab")
(round-trip "control characters" (json-get "{\"s\":\"a\\u0001b\\u001fc\\u007fd\\r\"}" "s"))
(round-trip "UTF-8" "é ü ß 日本語 😀")
(round-trip "a string that looks like JSON stays a string" "{\"tool\":\"x\"}")
; Symbols: TRUE, FALSE and nil are JSON's true, false and null.
(round-trip "symbol" abc)
(round-trip "symbol with a quote" (sym-cat "odd\"sym"))
(round-trip "TRUE" TRUE)
(round-trip "FALSE" FALSE)
(round-trip "nil" nil)
(round-trip "instance name" [pump-1])
; Numbers: integers stay integers, floats stay floats.
(round-trip "integer" 42)
(round-trip "negative" -7)
(round-trip "largest integer" 9223372036854775807)
(round-trip "smallest integer" -9223372036854775808)
(round-trip "float" 1.5)
(round-trip "whole float" 2.0)
(round-trip "tenth" 0.1)
(round-trip "third" (/ 1.0 3))
(round-trip "large float" 1e300)
(round-trip "small float" -2.5e-300)
; Multifields are arrays, of any of the types above.
(round-trip "multifield" (create$ a "b c" 3 4.5 TRUE FALSE nil [i] (clara-json "{\"k\":[1]}")))
(round-trip "empty multifield" (create$))
; (clara-json TEXT) passes JSON through as JSON.
(round-trip "clara-json object" (clara-json "{\"a\": [1, 2.5, \"x\"], \"b\": {\"c\": null}}"))
(round-trip "clara-json array" (clara-json "[true, false]"))
(round-trip "clara-json string" (clara-json "\"quoted\""))
(round-trip "clara-json number" (clara-json "12.50"))
(defglobal ?*kept* = (clara-json "{\"kept\":1}"))
(printout t "a clara-json value prints as " ?*kept* crlf)
(round-trip "a clara-json value in a global" ?*kept*)
; Several arguments, a tool named by a string, keys that are strings.
(printout t (clara-call echo message "hi" n 42 tags (create$ a b)) crlf)
(printout t (clara-call "echo" "key with spaces" 1 ":session" "a key, not a keyword") crlf)
(printout t (clara-call echo) crlf)
; :session sets the request's session: each session has its own kv store.
(printout t (clara-call kv_set :session s1 key colour value red) crlf)
(printout t (clara-call kv_set :session s2 key colour value (create$ green blue)) crlf)
(printout t "s1: " (json-get (clara-call kv_get key colour :session s1) "result.value")
            ", s2: " (json-get (clara-call kv_get key colour :session s2) "result.value")
            ", default: " (json-get (clara-call kv_get key colour) "result.found") crlf)
; :policy narrows what this one call may use.
(printout t (clara-call echo x 1 :policy (clara-json "{\"deny\":[\"echo\"]}")) crlf)
(printout t (clara-call echo x 1 :policy (clara-json "{\"allow\":[\"echo\"]}")) crlf)
; :id is echoed back; :trace TRUE adds the trace of the rules.
(printout t (clara-call echo :id 7 x 1) crlf)
(printout t (clara-call echo :id "req-1" x 1) crlf)
(printout t "trace: " (neq (json-get (clara-call echo :trace TRUE) "trace") nil)
            ", without: " (json-get (clara-call echo :trace FALSE) "trace") crlf)
; Clara's own errors are data, as with clara-evaluate.
(printout t (clara-call no_such_tool) crlf)
(printout t (clara-call get_time timezone Mars/Olympus) crlf)
; From a rule: slot values go straight into the call.
(deftemplate reading (slot sensor) (slot value) (multislot tags))
(defrule report
   (reading (sensor ?s) (value ?v) (tags $?t))
   =>
   (bind ?r (clara-call echo sensor ?s value ?v tags ?t))
   (printout t "rule sent " (json-get ?r "result") crlf))
(deffacts readings
   (reading (sensor "boiler \"B\"") (value 7.5) (tags hot high))
   (reading (sensor pump) (value 3) (tags)))
(reset)
(run)
(exit)
