; Run with --config options.toml (see options.args): simple-form requests
; go to get_time, and requests deeper than 3 levels are refused.
(printout t "evaluator: " (json-get (clara-evaluate "{}") "tool") crlf)
(printout t "depth 3: " (json-get (clara-evaluate "{\"tool\":\"echo\",\"arguments\":{\"a\":[1]}}") "status") crlf)
(printout t "depth 4: " (json-get (clara-evaluate "{\"tool\":\"echo\",\"arguments\":{\"a\":[[1]]}}") "message") crlf)
(exit)
