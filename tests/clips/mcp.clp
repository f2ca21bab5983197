; (clara-mcp-listen ADDR) serves Clara's tools to MCP clients while CLIPS
; goes on, and answers the URL; (clara-mcp-stop) ends it.
(defglobal ?*url* = "")
(progn (bind ?*url* (clara-mcp-listen "127.0.0.1:0")) (stringp ?*url*))
(printout t "served at a loopback URL: " (eq (str-index "http://127.0.0.1:" ?*url*) 1) crlf)
(printout t "the MCP path: " (sub-string (- (str-length ?*url*) 3) (str-length ?*url*) ?*url*) crlf)
; Other hosts only with mcp.allow_remote = true.
(clara-mcp-listen "0.0.0.0:0")
(clara-mcp-stop)
(exit)
