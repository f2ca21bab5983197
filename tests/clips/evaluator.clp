; --evaluator applies after --config (see evaluator.args): echo again.
(printout t (clara-evaluate "{\"q\":1}") crlf)
(exit)
