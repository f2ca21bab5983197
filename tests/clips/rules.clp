; Rules calling Clara on their right-hand side and reasoning over the answers.
(deftemplate ask (slot tool) (slot args))
(deftemplate answer (slot tool) (slot status) (slot detail))
(defrule call-clara
   (ask (tool ?t) (args ?a))
   =>
   (bind ?r (clara-evaluate (str-cat "{\"tool\":\"" ?t "\",\"arguments\":" ?a "}")))
   (assert (answer (tool ?t) (status (json-get ?r "status"))
                   (detail (if (eq (json-get ?r "status") "success") then (json-get ?r "result") else (json-get ?r "error"))))))
(defrule report-success
   (answer (tool ?t) (status "success") (detail ?d))
   =>
   (printout t ?t " succeeded: " ?d crlf))
(defrule report-failure
   (answer (tool ?t) (status "error") (detail ?code))
   =>
   (printout t ?t " failed with " ?code crlf))
(deffacts requests
   (ask (tool "echo") (args "{\"x\":1}"))
   (ask (tool "missing_tool") (args "{}"))
   (ask (tool "get_time") (args "{\"timezone\":\"Mars/Olympus\"}")))
(reset)
(run)
(exit)
