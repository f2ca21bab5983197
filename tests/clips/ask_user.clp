; ask_user from CLIPS (issue 14): clara-clips is Clara's input handler.
; A question asked in a call the program waits for cannot be answered, so
; it is declined at once, never a deadlock: a synchronous call...
(printout t "sync: " (clara-evaluate "{\"tool\":\"ask_user\",\"arguments\":{\"prompt\":\"Which city?\"}}") crlf)
; ... and the call clara-eval-result waits for.
(bind ?h (clara-evaluate-async "{\"tool\":\"ask_user\",\"arguments\":{\"prompt\":\"Which city?\"}}"))
(printout t "awaited: " (clara-eval-result ?h) crlf)

; An asynchronous call's question becomes a fact at (clara-poll); a rule
; answers it with (clara-answer ?id "text") and the call goes on.
(deftemplate job (slot label) (slot handle) (slot answer (default none)))
(defrule start
   =>
   (assert (job (label city) (handle (clara-evaluate-async "{\"tool\":\"ask_user\",\"session\":\"desk\",\"arguments\":{\"prompt\":\"Which city?\"}}"))))
   (assert (waiting)))
(defrule then-booking "one question after the other, so that the output is in one order"
   (job (label city) (answer success))
   =>
   (assert (job (label booking) (handle (clara-evaluate-async "{\"tool\":\"ask_user\",\"session\":\"desk\",\"arguments\":{\"prompt\":\"May I book it?\"}}")))))
(defrule poll
   (declare (salience -10))
   ?w <- (waiting)
   (job (answer none))
   =>
   (retract ?w)
   (clara-poll)
   (assert (waiting)))
(defrule answer-city
   ?q <- (clara-input-required (id ?id) (session ?s) (prompt "Which city?"))
   =>
   (retract ?q)
   (printout t "asked in " ?s ": Which city?" crlf)
   (clara-answer ?id "Boston \"MA\""))
(defrule decline-booking
   ?q <- (clara-input-required (id ?id) (prompt "May I book it?"))
   =>
   (retract ?q)
   (printout t "asked: May I book it?" crlf)
   (clara-answer ?id FALSE))
(defrule reply
   ?r <- (clara-reply (handle ?h) (status ?s) (json ?j))
   ?job <- (job (label ?l) (handle ?h) (answer none))
   =>
   (retract ?r)
   (modify ?job (answer ?s))
   (printout t ?l ": " ?s " " (json-get ?j "result") crlf))
(reset)
(run)
; A call cancelled while its question is open ends at once; the question
; can no longer be answered.
(bind ?h (clara-evaluate-async "{\"tool\":\"ask_user\",\"arguments\":{\"prompt\":\"Still there?\"}}"))
(while (not (any-factp ((?q clara-input-required)) (eq ?q:prompt "Still there?"))) do (clara-poll))
(bind ?id (fact-slot-value (nth$ 1 (find-fact ((?q clara-input-required)) TRUE)) id))
(clara-eval-cancel ?h)
(while (not (any-factp ((?r clara-reply)) (eq ?r:handle ?h))) do (clara-poll))
(do-for-fact ((?r clara-reply)) (eq ?r:handle ?h) (printout t "cancelled: " ?r:status " " (json-get ?r:json "error") crlf))
(clara-answer ?id "too late")
; Mistakes are errors, never a crash.
(clara-answer 987654321 "hello")
(clara-answer "7" "hello")
(clara-answer 1 42)
(exit)
