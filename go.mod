module github.com/clara-lib/clara

go 1.24

require github.com/tidwall/gjson v1.20.0

require (
	github.com/pelletier/go-toml/v2 v2.4.3 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.0 // indirect
)
