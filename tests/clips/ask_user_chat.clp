; A chat whose model asks the user (issue 14), from CLIPS: the chat runs
; asynchronously, its question arrives as a (clara-input-required) fact at
; (clara-poll), a rule answers it, and the chat's typed result (its
; result_schema, set by the model with set_result) arrives as a clara-reply.
; The model is tests/llm/ask_user_answer.toml (see ask_user_chat.llm).
(defrule start
   =>
   (assert (chat (clara-evaluate-async "{\"tool\":\"chat\",\"session\":\"clips\",\"arguments\":{\"prompt\":\"Find out which city the user means.\",\"allow_tools\":true,\"tools\":[\"ask_user\"],\"result_schema\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}}")))
   (assert (waiting)))
(defrule poll
   (declare (salience -10))
   ?w <- (waiting)
   (chat ?h)
   (not (clara-reply (handle ?h)))
   =>
   (retract ?w)
   (clara-poll)
   (assert (waiting)))
(defrule answer
   ?q <- (clara-input-required (id ?id) (session ?s) (prompt ?p))
   =>
   (retract ?q)
   (printout t "the model asks (" ?s "): " ?p crlf)
   (clara-answer ?id "Boston"))
(defrule done
   (chat ?h)
   (clara-reply (handle ?h) (status ?s) (json ?j))
   =>
   (printout t ?s ": " (json-get ?j "result.result") ", " (json-get ?j "result.finish_reason") crlf))
(reset)
(run)
(exit)
