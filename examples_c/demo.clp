;;; demo.clp - CLIPS rules calling Clara.  Run with: make demo
;;; (or: bin/clara-clips -f examples_c/demo.clp)
;;;
;;; A question arrives as a fact; a rule sends it to Clara in the simple
;;; form (the default evaluator, echo out of the box); other rules call
;;; tools explicitly and react to the envelopes they get back, reading
;;; them with json-get.

(deftemplate question (slot text))
(deftemplate clock (slot zone))
(deftemplate tool-call (slot tool) (slot arguments (default "{}")))
(deftemplate outcome (slot tool) (slot status) (slot value))

;; Simple form: no "tool" key, the whole object goes to the default evaluator.
(defrule ask-the-evaluator
   (question (text ?q))
   =>
   (bind ?reply (clara-evaluate (str-cat "{\"question\":\"" ?q "\"}")))
   (printout t "evaluator (" (json-get ?reply "tool") ") answered: " (json-get ?reply "result") crlf))

;; Explicit form: a named tool with arguments.
(defrule what-time-is-it
   (clock (zone ?z))
   =>
   (bind ?reply (clara-evaluate (str-cat "{\"tool\":\"get_time\",\"arguments\":{\"timezone\":\"" ?z "\"}}")))
   (if (eq (json-get ?reply "status") "success")
    then (printout t "in " ?z " the UTC offset is " (sub-string 24 29 (json-get ?reply "result.time")) crlf)
    else (printout t "get_time refused " ?z ": " (json-get ?reply "message") crlf)))

;; Any tool call; the envelope becomes a fact that other rules reason about.
(defrule call-a-tool
   (tool-call (tool ?t) (arguments ?a))
   =>
   (bind ?reply (clara-evaluate (str-cat "{\"tool\":\"" ?t "\",\"arguments\":" ?a "}")))
   (bind ?status (json-get ?reply "status"))
   (assert (outcome (tool ?t) (status ?status)
                    (value (if (eq ?status "success") then (json-get ?reply "result") else (json-get ?reply "error"))))))

(defrule tool-worked
   (outcome (tool ?t) (status "success") (value ?v))
   =>
   (printout t "tool " ?t " returned " ?v crlf))

;; Errors are data too: json-get reads the error code.
(defrule tool-missing
   (outcome (tool ?t) (status "error") (value "unknown_tool"))
   =>
   (printout t "no tool named " ?t " is registered; falling back to echo" crlf)
   (assert (tool-call (tool "echo") (arguments (str-cat "{\"wanted\":\"" ?t "\"}")))))

(deffacts demo
   (question (text "what is 2+2?"))
   (clock (zone "Asia/Tokyo"))
   (clock (zone "Mars/Olympus_Mons"))
   (tool-call (tool "echo") (arguments "{\"message\":\"hello from CLIPS\",\"n\":42}"))
   (tool-call (tool "weather")))

(reset)
(run)
(exit)
