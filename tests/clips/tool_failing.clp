; A rule keeps calling a tool that keeps failing. Clara's built-in rule
; repeated_failure notices the streak: the third failure's envelope carries
; a notice, which the program reads with json-get and acts on by giving up.
(deftemplate attempt (slot n))
(defrule read-sensor
   ?a <- (attempt (n ?n&:(<= ?n 5)))
   =>
   (retract ?a)
   (bind ?r (clara-evaluate "{\"tool\":\"sensor\",\"session\":\"plant\"}"))
   (printout t "attempt " ?n ": " (json-get ?r "error") " (" (json-get ?r "message") ")" crlf)
   (if (neq (json-get ?r "notices") nil)
    then (printout t "  notice from " (json-get ?r "notices.0.rule") " [" (json-get ?r "notices.0.priority")
                     "]: " (json-get ?r "notices.0.message") crlf)
         (assert (gave-up ?n))
    else (assert (attempt (n (+ ?n 1))))))
(defrule give-up
   (gave-up ?n)
   =>
   (printout t "gave up after " ?n " attempts" crlf))
(reset)
(assert (attempt (n 1)))
(run)
; The notice also waited in the session's queue.
(printout t "queued notices: "
   (json-get (clara-evaluate "{\"tool\":\"notifications_drain\",\"session\":\"plant\"}") "result.notices.#") crlf)
; Events from CLIPS: a rule loaded at run time reacts to (clara-emit ...).
(clara-evaluate "{\"tool\":\"rules_load\",\"arguments\":{\"name\":\"plant.toml\",\"toml\":\"[rule]\\nid = \\\"pressure\\\"\\ntrigger = \\\"plant.pressure\\\"\\n[condition]\\nexpression = \\\"context.bar > 6\\\"\\n[action]\\ntype = \\\"notify_self\\\"\\nmessage = \\\"pressure {{ context.bar }} bar in {{ context.unit | upper }}\\\"\\npriority = \\\"high\\\"\\n\"}}")
(defglobal ?*e* = "")
(bind ?*e* (clara-emit "{\"event\":\"plant.pressure\",\"session\":\"plant\",\"payload\":{\"unit\":\"boiler\",\"bar\":7.5}}"))
(printout t "fired: " (json-get ?*e* "result.fired.0.rule") ", notice: " (json-get ?*e* "result.notices.0.message") crlf)
(printout t "fired at 2 bar: "
   (json-get (clara-emit "{\"event\":\"plant.pressure\",\"payload\":{\"unit\":\"boiler\",\"bar\":2}}") "result.fired.#") crlf)
(printout t "bad event: " (json-get (clara-emit "{\"event\":\"Plant Pressure\"}") "error") crlf)
