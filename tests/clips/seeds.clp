; Seed 000's proposed API and streaming (issue 32). CLIPS 6.30 keeps no
; top-level ?variables between commands: globals hold what carries over.

; "Structured responses", as the seed writes them.
(defglobal ?*response* = (clara-evaluate-json "{\"question\":\"what is 2+2?\"}"))
(defglobal ?*answer* = (get-field ?*response* "answer"))
(printout t "answer: " ?*answer* crlf)
(printout t "status: " (get-field ?*response* "status") " tool: " (get-field ?*response* "tool") crlf)
(printout t ?*response* crlf)
(printout t "missing: " (get-field ?*response* "nothing.here") crlf)
(printout t "from a string: " (get-field "{\"status\":\"success\",\"result\":{\"n\":3}}" "n") crlf)
(printout t (clara-call echo wrapped ?*response*) crlf)
(get-field 42 "x")

; JSON written by hand: JSON5 where strict JSON fails.
(printout t (clara-evaluate "{tool:'echo', arguments:{n:0x10, s:'say \"hi\"', list:[1,2,],}} // JSON5") crlf)
(printout t (clara-evaluate "{tool:'echo', arguments:{n:Infinity}}") crlf)
(printout t (clara-evaluate "{\"tool\":\"echo\",\"arguments\":{\"n\":1}}") crlf)

; Streaming: the pieces come as facts at each (clara-poll), the rules
; never wait for the model.
(printout t "stream: " (clara-stream facts) crlf)
(defglobal ?*h* = (clara-evaluate-async "{tool:'chat', session:'story', arguments:{prompt:'Tell me a story.', stream:true}}"))
(defglobal ?*polls* = 0)
(while (= (length$ (find-all-facts ((?r clara-reply)) TRUE)) 0) do (clara-poll) (bind ?*polls* (+ ?*polls* 1)))
(do-for-all-facts ((?t clara-token)) TRUE (printout t "token " ?t:handle " " ?t:session " [" ?t:text "]" crlf))
(printout t "same call: " (= (fact-slot-value (nth$ 1 (find-all-facts ((?t clara-token)) TRUE)) handle) ?*h*) crlf)
(do-for-all-facts ((?r clara-reply)) TRUE (printout t "reply " ?r:status " " (get-field ?r:json "content") crlf))

; On a router: the text is printed as it is polled.
(printout t "stream: " (clara-stream t) crlf)
(defglobal ?*h2* = (clara-evaluate-async "{tool:'chat', session:'story', arguments:{prompt:'And then?', stream:true}}"))
(while (not (clara-eval-complete ?*h2*)) do (bind ?*polls* 0))
(bind ?*polls* (clara-poll))
(printout t crlf "polled " ?*polls* " reply" crlf)
(printout t "stop: " (clara-stream FALSE) crlf)
(clara-stream "a-router-name-that-is-far-too-long-to-be-one-because-it-goes-on-and-on")
(exit)
