; Rules fire file-change callbacks: facts say which files changed; a rule
; hands each to callback_trigger and asserts what the first run reported
; (json-get reads its name, ok flag and exit code); two more rules report.
; Run with --config callbacks.toml (see callbacks.args): the project root is
; an empty directory that run.sh makes afresh, so the ids start at CB1.
(printout t "created " (json-get (clara-evaluate "{\"tool\":\"callback_upsert\",\"arguments\":{\"action\":\"create\",\"name\":\"lint\",\"pattern\":[\"*.clp\",\"!vendor/**\"],\"blocking\":true,\"timeout_secs\":10,\"success_message\":\"Lint passed\",\"script_content\":\"echo \\\"linting $CLARA_CALLBACK_NAME\\\"\"}}") "result.callback.id") crlf)
(printout t "created " (json-get (clara-evaluate "{\"tool\":\"callback_upsert\",\"arguments\":{\"action\":\"create\",\"name\":\"spell\",\"pattern\":\"*.txt\",\"blocking\":true,\"timeout_secs\":10,\"script_content\":\"echo typo >&2; exit 3\"}}") "result.callback.id") crlf)
(deftemplate changed (slot file))
(deftemplate run (slot file) (slot name) (slot ok) (slot exit-code) (slot output) (slot notice))
(defrule fire-callbacks
   (changed (file ?f))
   =>
   (bind ?r (clara-evaluate (str-cat "{\"tool\":\"callback_trigger\",\"arguments\":{\"changed_files\":[\"" ?f "\"]}}")))
   (if (= (json-get ?r "result.callbacks.#") 0)
    then (printout t ?f ": no callback matches" crlf)
    else (assert (run (file ?f) (name (json-get ?r "result.callbacks.0.name"))
                      (ok (json-get ?r "result.callbacks.0.ok"))
                      (exit-code (json-get ?r "result.callbacks.0.exit_code"))
                      (output (json-get ?r "result.callbacks.0.output_tail"))
                      (notice (json-get ?r "result.notices.0"))))))
(defrule passed
   (run (file ?f) (name ?n) (ok TRUE) (exit-code ?c) (output ?o) (notice ?m))
   =>
   (printout t ?f ": " ?n " ok, exit code " ?c ", output \"" ?o "\"; " ?m crlf))
(defrule failed
   (run (file ?f) (name ?n) (ok FALSE) (exit-code ?c) (output ?o))
   =>
   (printout t ?f ": " ?n " FAILED, exit code " ?c ", output \"" ?o "\"" crlf))
(deffacts edits
   (changed (file "src/rules.clp"))
   (changed (file "vendor/lib.clp"))
   (changed (file "notes.txt")))
(reset)
(run)
; A dry run says what would fire, and runs nothing.
(printout t "dry run: " (json-get (clara-evaluate "{\"tool\":\"callback_trigger\",\"arguments\":{\"changed_files\":[\"a.clp\",\"b.txt\",\"c.md\"],\"dry_run\":true}}") "result.callbacks.#") " would fire" crlf)
; A tool reporting changed_files (save_files, a Lua tool of callbacks.toml)
; fires the matching blocking callbacks: its envelope carries their runs.
(deffunction save-file (?file)
   (bind ?r (clara-evaluate (str-cat "{\"tool\":\"save_files\",\"arguments\":{\"files\":[\"" ?file "\"]}}")))
   (printout t "save_files " ?file ": " (json-get ?r "status"))
   (if (eq (json-get ?r "callbacks") nil)
    then (printout t ", no callback ran" crlf)
    else (printout t ", " (json-get ?r "callbacks.#") " callback ran: " (json-get ?r "callbacks.0.name")
                   " ok " (json-get ?r "callbacks.0.ok") ", exit code " (json-get ?r "callbacks.0.exit_code") crlf)))
(save-file "main.clp")
; Turned off, the callback fires no more.
(printout t "toggle: " (json-get (clara-evaluate "{\"tool\":\"callback_toggle\",\"arguments\":{\"id\":\"CB1\",\"active\":false}}") "result.active") crlf)
(save-file "main.clp")
(exit)
