; --test-mode (see test_mode.args) turns Clara's test mode on: a tool that
; declares exec, network or fs_write is skipped and reported as skipped;
; other tools run.
(printout t (clara-call deploy target staging) crlf)
(printout t (clara-call echo target staging) crlf)
(exit)
