; Asynchronous calls: a handle at once, the answer later.
(bind ?h (clara-evaluate-async "{\"tool\":\"echo\",\"arguments\":{\"x\":1}}"))
(printout t "a handle: " (type ?h) crlf)
(printout t "its answer: " (clara-eval-result ?h) crlf)
; The handle is spent once the answer is collected.
(clara-eval-complete ?h)
(clara-eval-result ?h)
; Mistakes are errors, never a crash.
(clara-evaluate-async "{\"tool\":")
(clara-eval-cancel 987654321)
(clara-eval-complete "7")

; Rules start three calls and react to their answers as facts: (clara-poll)
; asserts one clara-reply fact per finished call.
(deftemplate job (slot label) (slot handle) (slot answer (default none)))
(defrule start
   =>
   (assert (job (label echo) (handle (clara-evaluate-async "{\"tool\":\"echo\",\"arguments\":{\"n\":1}}"))))
   (assert (job (label math) (handle (clara-evaluate-async "{\"tool\":\"math_eval\",\"arguments\":{\"expression\":\"6*7\"}}"))))
   (assert (job (label typo) (handle (clara-evaluate-async "{\"tool\":\"ecko\"}"))))
   (assert (waiting)))
(defrule poll
   (declare (salience -10))
   ?w <- (waiting)
   (job (answer none))
   =>
   (retract ?w)
   (clara-poll)
   (assert (waiting)))
(defrule reply
   ?r <- (clara-reply (handle ?h) (status ?s) (tool ?t) (json ?j))
   ?job <- (job (handle ?h) (answer none))
   =>
   (retract ?r)
   (modify ?job (answer (str-cat ?s " from " ?t ": " ?j))))
(defrule all-answered
   (declare (salience -20))
   (not (job (answer none)))
   =>
   (foreach ?label (create$ echo math typo)
      (do-for-fact ((?j job)) (eq ?j:label ?label)
         (printout t ?j:label " -> " ?j:answer crlf))))
(reset)
(run)

; (clear) removes every construct; the template of the replies comes back.
(clear)
(printout t "after clear: " (list-deftemplates) crlf)
(printout t "nothing left to poll: " (clara-poll) crlf)
(exit)
