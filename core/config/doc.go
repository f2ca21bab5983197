// Package config is Clara's configuration: every key declared once, as a
// tagged field of Config, and everything else derived from those
// declarations by reflection — the checking of a text (types, bounds,
// unknown keys), the defaults, the merge of a change into the configuration
// in force, the typed Config, default_config.toml and the table of
// docs/configuration.md (both checked by this package's tests).
//
// A key is declared by a field's tags:
//
//	key:"name"       its name in its table ("*" collects the other keys of a table)
//	default:"v"      its default, a TOML value ('literal string', 1000, true, [])
//	doc:"text"       what it is, for people
//	min:"n" max:"n"  the bounds of an integer
//	check:"name"     an extra check of a string (see checks)
//	oneshot:"true"   applied by the clara_configure call that gives it, never kept
//
// A nested struct is a table; []map[string]any is an array of tables whose
// entries a check reads (tools).
//
// Problems are reported all at once, each with the line and column of its
// key in the text when the text is TOML or JSON (protocol.Problem).
//
// config imports core/protocol and core/toolbox (to check [[tools]]
// descriptors); nothing in it keeps state: Parse, Merge and Build are pure.
package config
