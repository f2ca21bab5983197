; Facts for the model: clips_facts, clips_assert and (once exposed)
; clips_eval are tools that read and change this program. They run while
; the program waits for Clara, never while its rules run; here a
; clara-call makes them run at once.
(deftemplate reading (slot sensor) (slot celsius) (multislot tags))
(assert (reading (sensor "boiler") (celsius 97) (tags hot urgent)))
(assert (note "an ordered fact" 3))
(clara-call clips_facts template reading)
(clara-call clips_facts template note)
(clara-call clips_assert template reading slots (clara-json "{\"sensor\":\"pump\",\"celsius\":40.5,\"tags\":[\"cold\",true]}"))
(clara-call clips_facts template reading)
; Mistakes are the call's errors.
(clara-call clips_assert template nosuch)
(clara-call clips_assert template reading slots (clara-json "{\"celsius\":{\"deep\":1}}"))
(clara-call clips_facts limit 0)
; clips_eval is off until the program exposes it.
(clara-call clips_eval expression "(+ 1 2)")
(clara-expose "clips_eval")
(clara-call clips_eval expression "(create$ a 2 \"three\")")
(clara-expose "anything_else")
(exit)
