; Every json-get result type, checked with (type ...).
(bind ?r (clara-evaluate "{\"tool\":\"echo\",\"arguments\":{\"s\":\"text \\\"quoted\\\"\",\"i\":42,\"neg\":-7,\"f\":1.5,\"e\":2e3,\"big\":123456789012345678901,\"t\":true,\"no\":false,\"n\":null,\"o\":{\"k\":\"v\"},\"a\":[1, 2, 3],\"u\":\"\\u00e9\"}}"))
(bind ?paths (create$ "result.s" "result.i" "result.neg" "result.f" "result.e" "result.big" "result.t" "result.no" "result.n" "result.missing" "result.o" "result.a" "result.a.1" "result.a.#" "result.u" "status"))
(progn$ (?p ?paths) (bind ?v (json-get ?r ?p)) (printout t ?p " -> " ?v " : " (type ?v) crlf))
(printout t "integer math: " (+ (json-get ?r "result.i") 1) crlf)
(printout t "float math: " (* (json-get ?r "result.f") 2) crlf)
(printout t "nested: " (json-get (json-get ?r "result.o") "k") crlf)
(printout t "eq nil: " (eq (json-get ?r "result.n") nil) crlf)
; A string holding a NUL cannot be a CLIPS string: an error, not a cut string.
(printout t "nul: " (json-get "{\"s\":\"a\\u0000b\"}" "s") crlf)
(exit)
