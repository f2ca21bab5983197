package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/clara-lib/clara/core/config"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/rules"
)

func rulesCommand(env *environment) *cobra.Command {
	return groupCommand("rules", "Work with rules: test them", rulesTestCommand(env))
}

// testRun is the report of `clara rules test --format json`.
type testRun struct {
	Files    []fileReport    `json:"files"`
	Passed   int             `json:"passed"`
	Failed   int             `json:"failed"`
	Coverage *rules.Coverage `json:"coverage,omitempty"`
}

// fileReport is one test file's report, or why it did not run.
type fileReport struct {
	rules.TestReport
	Error    string            `json:"error,omitempty"`
	Problems protocol.Problems `json:"problems,omitempty"`
}

func rulesTestCommand(env *environment) *cobra.Command {
	var (
		verbose, coverage bool
		runPattern        string
		format            string
	)
	c := &cobra.Command{
		Use:   "test [FILE...]",
		Short: "Run rule test files; without files, the built-in rules' own tests",
		Long: `Run rule test files (NAME.test.toml or .json, docs/rules.md "Testing rules")
against the rules in force, or against the rule files a test names, and
report each file. A FILE is inside project_root, as rules_test requires.
Without FILE, the built-in rules' own tests run against the built-in rules
and the default thresholds (whatever the configuration says).

-v lists every case; --run runs only the cases whose name the regular
expression matches; --coverage lists the rules no case fired and the
actions no case applied (a rule's actions apply all or none: a rule that
matched but never fired was skipped each time, its template failing);
--format json prints the whole report as JSON. Exit status 1 when a case
failed or a file did not load.`,
		Example: `  clara rules test
  clara rules test rules/valve.test.toml -v
  clara rules test rules/*.test.toml --run 'deny' --coverage
  clara rules test --format json`,
		RunE: func(cmd *cobra.Command, files []string) error {
			if env.json {
				format = "json"
			}
			if format != "text" && format != "json" {
				return usageError("--format %q: choose one of text, json", format)
			}
			opts := rules.TestOptions{Coverage: coverage}
			if runPattern != "" {
				re, err := regexp.Compile(runPattern)
				if err != nil {
					return usageError("--run: %v", err)
				}
				opts.Run = re
			}
			var run testRun
			if len(files) == 0 {
				run = builtinTests(opts)
			} else {
				if err := env.start(); err != nil {
					return err
				}
				for _, f := range files {
					rep, err := env.engine.TestRules(f, opts)
					run.Files = append(run.Files, reportOf(f, rep, err))
				}
			}
			cov := &rules.Coverage{}
			for _, f := range run.Files {
				run.Passed += f.Passed
				run.Failed += f.Failed
				if f.Coverage != nil {
					cov = mergeCoverage(cov, f.Coverage)
				}
			}
			if coverage {
				run.Coverage = cov
			}
			if format == "json" {
				text, _ := json.MarshalIndent(run, "", "  ")
				fmt.Fprintln(env.stdout, string(text))
			} else {
				printTestRun(env, run, verbose)
			}
			for _, f := range run.Files {
				if f.Error != "" || f.Failed > 0 {
					return &exitError{code: exitFailed}
				}
			}
			return nil
		},
	}
	c.Flags().BoolVarP(&verbose, "verbose", "v", false, "list every case, not only the failed ones")
	c.Flags().StringVar(&runPattern, "run", "", "run only the cases whose name matches this `REGEX`")
	c.Flags().StringVar(&format, "format", "text", "the report's format: text or json")
	c.Flags().BoolVar(&coverage, "coverage", false, "list the rules no case fired and the actions no case applied")
	_ = c.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return c
}

// builtinTests runs the built-in rules' own test files against the
// built-in rules alone, with the default thresholds.
func builtinTests(opts rules.TestOptions) testRun {
	var run testRun
	thresholds := config.Build(config.Defaults()).Rules.Thresholds.Map()
	set, err := rules.Load(rules.BuiltinSources(), thresholds)
	for _, src := range rules.BuiltinTests() {
		if err != nil {
			run.Files = append(run.Files, reportOf(src.Name, rules.TestReport{}, err))
			continue
		}
		tf, perr := rules.ParseTests(src)
		if perr != nil {
			run.Files = append(run.Files, reportOf(src.Name, rules.TestReport{}, perr))
			continue
		}
		run.Files = append(run.Files, reportOf(src.Name, tf.RunWith(set, thresholds, opts), nil))
	}
	return run
}

// reportOf is a file's report, or its error with the problems it lists.
func reportOf(file string, rep rules.TestReport, err error) fileReport {
	if err == nil {
		return fileReport{TestReport: rep}
	}
	fr := fileReport{TestReport: rules.TestReport{File: file, Cases: []rules.CaseResult{}}, Error: err.Error()}
	var ps protocol.Problems
	var pe *protocol.Error
	if errors.As(err, &ps) {
		fr.Problems = ps
	} else if errors.As(err, &pe) && errors.As(pe.Cause, &ps) {
		fr.Problems = ps
		fr.Error = strings.TrimPrefix(pe.Message, "rules_test: ")
	} else if errors.As(err, &pe) {
		fr.Error = strings.TrimPrefix(pe.Message, "rules_test: ")
	}
	return fr
}

// mergeCoverage adds b's counts to a's, rule by rule (a rule is its file,
// line and id: test files that name their own rule files may load the
// same rule).
func mergeCoverage(a, b *rules.Coverage) *rules.Coverage {
	at := map[string]int{}
	for i, r := range a.Rules {
		at[ruleKey(r)] = i
	}
	for _, r := range b.Rules {
		i, ok := at[ruleKey(r)]
		if !ok {
			r.Actions = append([]rules.ActionCoverage(nil), r.Actions...)
			at[ruleKey(r)] = len(a.Rules)
			a.Rules = append(a.Rules, r)
			continue
		}
		mine := &a.Rules[i]
		mine.Matched += r.Matched
		mine.Fired += r.Fired
		for j := range mine.Actions {
			if j < len(r.Actions) {
				mine.Actions[j].Applied += r.Actions[j].Applied
			}
		}
	}
	return a
}

func ruleKey(r rules.RuleCoverage) string { return fmt.Sprintf("%s:%d:%s", r.File, r.Line, r.ID) }

// printTestRun writes the report for people: a line per file, the failed
// cases (every case with -v), a summary, then the coverage.
func printTestRun(env *environment, run testRun, verbose bool) {
	w := env.stdout
	for _, f := range run.Files {
		if f.Error != "" {
			fmt.Fprintf(w, "FAIL %s: %s\n", f.File, f.Error)
			for _, p := range relativeProblems(f.Problems) {
				fmt.Fprintf(w, "  %s\n", p)
			}
			continue
		}
		status := "ok  "
		if f.Failed > 0 {
			status = "FAIL"
		}
		fmt.Fprintf(w, "%s %s: %d passed, %d failed\n", status, f.File, f.Passed, f.Failed)
		for _, c := range f.Cases {
			if c.Passed && !verbose {
				continue
			}
			mark := "ok  "
			if !c.Passed {
				mark = "FAIL"
			}
			fmt.Fprintf(w, "  %s %s\n", mark, c.Name)
			for _, p := range c.Problems {
				fmt.Fprintf(w, "         %s\n", p)
			}
		}
	}
	broken := 0
	for _, f := range run.Files {
		if f.Error != "" {
			broken++
		}
	}
	summary := fmt.Sprintf("rules test: %s, %d passed, %d failed", plural(len(run.Files), "file"), run.Passed, run.Failed)
	if broken > 0 {
		summary += fmt.Sprintf(", %d not run", broken)
	}
	fmt.Fprintln(w, summary)
	if run.Coverage != nil {
		printCoverage(env, run.Coverage)
	}
}

// printCoverage lists what no case fired: the rules (with why, when one
// matched but was skipped) and the actions.
func printCoverage(env *environment, cov *rules.Coverage) {
	w := env.stdout
	sort.SliceStable(cov.Rules, func(i, j int) bool {
		if cov.Rules[i].File != cov.Rules[j].File {
			return cov.Rules[i].File < cov.Rules[j].File
		}
		return cov.Rules[i].Line < cov.Rules[j].Line
	})
	fired, actions, applied := 0, 0, 0
	var rulesLeft, actionsLeft []string
	for _, r := range cov.Rules {
		where := fmt.Sprintf("%s:%d", relative(r.File), r.Line)
		if r.Fired > 0 {
			fired++
		} else if r.Matched > 0 {
			rulesLeft = append(rulesLeft, fmt.Sprintf("%s %s (%s): matched in %s but was skipped each time (a template or a Lua action failed)",
				where, r.ID, r.Trigger, plural(r.Matched, "case")))
		} else {
			rulesLeft = append(rulesLeft, fmt.Sprintf("%s %s (%s)", where, r.ID, r.Trigger))
		}
		for _, a := range r.Actions {
			actions++
			if a.Applied > 0 {
				applied++
			} else {
				actionsLeft = append(actionsLeft, fmt.Sprintf("%s %s action %d (%s)", where, r.ID, a.Index, a.Type))
			}
		}
	}
	fmt.Fprintf(w, "coverage: %d of %d rules fired, %d of %d actions applied\n", fired, len(cov.Rules), applied, actions)
	if len(rulesLeft) > 0 {
		fmt.Fprintln(w, "rules no case fired:")
		for _, s := range rulesLeft {
			fmt.Fprintln(w, "  "+s)
		}
	}
	if len(actionsLeft) > 0 {
		fmt.Fprintln(w, "actions no case applied:")
		for _, s := range actionsLeft {
			fmt.Fprintln(w, "  "+s)
		}
	}
}
