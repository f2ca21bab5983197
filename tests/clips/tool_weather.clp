; A rule calls a tool written in C (registered by tool_driver.c) and reacts
; to invalid arguments by reading the violations in "details".
(deftemplate forecast-request (slot json))
(defrule ask-weather
   (forecast-request (json ?args))
   =>
   (bind ?r (clara-evaluate (str-cat "{\"tool\":\"weather\",\"arguments\":" ?args "}")))
   (if (eq (json-get ?r "status") "success")
    then (printout t "forecast for " (json-get ?r "result.city") ": " (json-get ?r "result.forecast") crlf)
    else (printout t "refused (" (json-get ?r "error") "), " (json-get ?r "details.#") " problems:" crlf)
         (loop-for-count (?i 0 (- (json-get ?r "details.#") 1)) do
            (printout t "  at '" (json-get ?r (str-cat "details." ?i ".pointer")) "': "
                        (json-get ?r (str-cat "details." ?i ".message")) crlf))))
(deffacts requests
   (forecast-request (json "{\"city\":\"Lyon\"}"))
   (forecast-request (json "{\"city\":\"\",\"units\":\"kelvin\",\"wind\":true}")))
(reset)
(run)
(printout t "details as JSON: " (json-get (clara-evaluate "{\"tool\":\"weather\",\"arguments\":{}}") "details") crlf)
