; make demo-agent: CLIPS rules decide when to ask the model and which tools
; it may use. The model reads the program's facts (clips_facts), calls the
; plant's tools under Clara's rules (a deny rule guards the valve; the
; built-in budget rule talks to the model), and writes its advice back as a
; fact (clips_assert) that a rule of the program reacts to.
(deftemplate reading (slot sensor) (slot celsius))
(deftemplate limit (slot sensor) (slot celsius))
(deftemplate advice (slot text))

(deffacts plant
   (limit (sensor boiler) (celsius 90))
   (reading (sensor boiler) (celsius 97)))

(defrule too-hot "A reading above its limit: ask the model, with these tools only."
   (reading (sensor ?s) (celsius ?c))
   (limit (sensor ?s) (celsius ?max&:(> ?c ?max)))
   =>
   (bind ?answer (clara-call chat
      prompt (str-cat "The " ?s " reads " ?c " C, above its " ?max " C limit. What should the operator do?")
      allow_tools TRUE
      tools (create$ clips_facts clips_assert valve_status open_valve)
      max_tool_calls 3))
   (if (neq (json-get ?answer "status") "success") then
      (printout t "The model could not be asked: " (json-get ?answer "message") crlf)
    else
      (loop-for-count (?i 0 (- (json-get ?answer "result.tool_calls.#") 1))
         (printout t "tool call: " (json-get ?answer (str-cat "result.tool_calls." ?i ".name"))
                     " -> " (json-get ?answer (str-cat "result.tool_calls." ?i ".status")) crlf))
      (printout t "Model: " (json-get ?answer "result.content") crlf)))

(defrule tell-the-operator "The model's advice, asserted by the model itself."
   (advice (text ?text))
   =>
   (printout t "Advice: " ?text crlf))

(reset)
(run)
(exit)
