; Approvals from CLIPS (issue 28): clara-clips is Clara's approval handler.
; A call the program waits for cannot be approved by a rule, so it is
; rejected at once, never a deadlock: a synchronous call...
(printout t "sync: " (clara-evaluate "{\"tool\":\"pay\",\"arguments\":{\"to\":\"bob\",\"amount\":5}}") crlf)
; ... and the call clara-eval-result waits for.
(bind ?h (clara-evaluate-async "{\"tool\":\"pay\",\"arguments\":{\"to\":\"bob\",\"amount\":5}}"))
(printout t "awaited: " (clara-eval-result ?h) crlf)

; An asynchronous call's approval becomes a fact at (clara-poll); a rule
; decides it with (clara-approve ?id), (clara-approve ?id "{edited}") or
; (clara-reject ?id "why"), and the call goes on.
(deftemplate job (slot to) (slot handle) (slot status (default none)))
(defrule start
   =>
   (assert (job (to "bob") (handle (clara-evaluate-async "{\"tool\":\"pay\",\"session\":\"desk\",\"arguments\":{\"to\":\"bob\",\"amount\":500}}"))))
   (assert (waiting)))
(defrule then-carol "one call after the other, so that the output is in one order"
   (job (to "bob") (status success))
   =>
   (assert (job (to "carol") (handle (clara-evaluate-async "{\"tool\":\"pay\",\"arguments\":{\"to\":\"carol\",\"amount\":500}}")))))
(defrule then-mallory
   (job (to "carol") (status success))
   =>
   (assert (job (to "mallory") (handle (clara-evaluate-async "{\"tool\":\"pay\",\"arguments\":{\"to\":\"mallory\",\"amount\":500}}")))))
(defrule poll
   (declare (salience -10))
   ?w <- (waiting)
   (job (status none))
   =>
   (retract ?w)
   (clara-poll)
   (assert (waiting)))
(defrule approve-bob
   ?a <- (clara-approval-required (id ?id) (tool "pay") (session ?s) (reason ?why) (arguments ?args&:(eq (json-get ?args "to") "bob")))
   =>
   (retract ?a)
   (printout t "asked in " ?s ": " ?why " " ?args crlf)
   (clara-approve ?id))
(defrule approve-carol-for-less
   ?a <- (clara-approval-required (id ?id) (arguments ?args&:(eq (json-get ?args "to") "carol")))
   =>
   (retract ?a)
   (printout t "carol gets 50" crlf)
   (clara-approve ?id "{\"to\":\"carol\",\"amount\":50}"))
(defrule reject-mallory
   ?a <- (clara-approval-required (id ?id) (arguments ?args&:(eq (json-get ?args "to") "mallory")))
   =>
   (retract ?a)
   (printout t "not mallory" crlf)
   (clara-reject ?id "mallory is not paid"))
(defrule reply
   ?r <- (clara-reply (handle ?h) (status ?s) (json ?j))
   ?job <- (job (to ?to) (handle ?h) (status none))
   =>
   (retract ?r)
   (modify ?job (status ?s))
   (printout t ?to ": " ?s " " (if (eq ?s success) then (json-get ?j "result") else (json-get ?j "message")) crlf))
(reset)
(run)
; A call cancelled while its approval waits ends at once, and never runs;
; the approval can no longer be decided.
(bind ?h (clara-evaluate-async "{\"tool\":\"pay\",\"arguments\":{\"to\":\"dave\",\"amount\":1}}"))
(while (not (any-factp ((?a clara-approval-required)) (eq (json-get ?a:arguments "to") "dave"))) do (clara-poll))
(bind ?id (fact-slot-value (nth$ 1 (find-fact ((?a clara-approval-required)) (eq (json-get ?a:arguments "to") "dave"))) id))
(clara-eval-cancel ?h)
(while (not (any-factp ((?r clara-reply)) (eq ?r:handle ?h))) do (clara-poll))
(do-for-fact ((?r clara-reply)) (eq ?r:handle ?h) (printout t "cancelled: " ?r:status " " (json-get ?r:json "error") crlf))
(clara-approve ?id)
; No decision in time (approvals.toml: policy.approval_timeout_ms = 5000):
; rejected, never run.
(bind ?h (clara-evaluate-async "{\"tool\":\"pay\",\"arguments\":{\"to\":\"erin\",\"amount\":1}}"))
(while (not (any-factp ((?r clara-reply)) (eq ?r:handle ?h))) do (clara-poll))
(do-for-fact ((?r clara-reply)) (eq ?r:handle ?h) (printout t "timed out: " (json-get ?r:json "message") crlf))
; Mistakes are errors, never a crash.
(clara-approve 987654321)
(clara-reject 987654321 "no")
(clara-approve "7")
(clara-reject 1 42)
(exit)
