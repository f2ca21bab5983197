; CLARA_CONFIG names startup/clara.toml (startup.env), whose policy denies
; echo and whose rule file has a typo: the library refuses every call
; with invalid_config, the typo's place in details, rather than serve echo
; on the defaults (issue 26 §2).
(deffunction show (?what ?request)
  (bind ?r (clara-evaluate ?request))
  (printout t ?what ": " (json-get ?r "status") " " (json-get ?r "error")
            " at line " (json-get ?r "details.0.line") " col " (json-get ?r "details.0.col")
            ": " (json-get ?r "details.0.message") crlf))
(show "echo" "{\"tool\":\"echo\",\"arguments\":{\"x\":1}}")
(show "get_time" "{\"tool\":\"get_time\"}")
(show "the simple form" "{\"x\":1}")
(printout t "the file named: " (if (str-index "startup/rules/typo.toml" (json-get (clara-evaluate "{\"tool\":\"echo\"}") "details.0.file")) then yes else no) crlf)
(exit)
