package pattern

import (
	"fmt"
	"math/rand"
	"testing"
)

// benchSets are 50 realistic callback patterns (SPEC §12 "globs": 10,000 changed paths × 50
// callbacks, dry run, ≤ 20 ms).
var benchSets = [][]string{
	{"*.rs"},
	{"*.go"},
	{"*.go", "!vendor/**"},
	{"src/**/*.go"},
	{"*.py", "!**/migrations/**"},
	{"**/test_*.py"},
	{"docs/"},
	{"docs/**/*.md"},
	{"*.md", "!CHANGELOG.md"},
	{"/Makefile"},
	{"Makefile", "*.mk"},
	{"*.ts", "*.tsx", "!node_modules/"},
	{"web/src/**/*.tsx"},
	{"*.css", "*.scss"},
	{"/package.json", "/package-lock.json"},
	{"Cargo.toml", "Cargo.lock"},
	{"crates/*/src/**/*.rs"},
	{"*.c", "*.h"},
	{"include/**/*.h"},
	{"*.proto"},
	{".github/workflows/*.yml"},
	{"*.yml", "*.yaml"},
	{"Dockerfile", "docker-compose*.yml"},
	{"*.sql"},
	{"db/migrations/"},
	{"*.json", "!package-lock.json", "!**/node_modules/**"},
	{"*.toml"},
	{"/config/*.toml"},
	{"scripts/*.sh"},
	{"*.sh", "!vendor/"},
	{"tests/**"},
	{"**/*_test.go"},
	{"cmd/*/main.go"},
	{"internal/**/*.go", "!internal/gen/**"},
	{"*.java"},
	{"src/main/java/**/*.java"},
	{"*.kt", "*.kts"},
	{"*.swift"},
	{"*.[ch]pp"},
	{"*.lua"},
	{"lib/**/*.rb", "Gemfile"},
	{"*.tf"},
	{"assets/**/*.png", "assets/**/*.svg"},
	{"*.lock"},
	{"README*"},
	{"LICENSE"},
	{"*.txt", "!requirements*.txt"},
	{"requirements*.txt", "pyproject.toml", "setup.py"},
	{"build/", "!build/keep/"},
	{"*.env", ".env*"},
}

// benchPaths generates n changed paths from a realistic source tree.
func benchPaths(n int) []string {
	rng := rand.New(rand.NewSource(1))
	pick := func(xs ...string) string { return xs[rng.Intn(len(xs))] }
	word := func() string {
		return pick("core", "util", "api", "server", "client", "model", "view", "auth", "db", "http",
			"config", "parser", "lexer", "runtime", "sched", "store", "cache", "net", "io", "fmt")
	}
	out := make([]string, 0, n)
	for len(out) < n {
		var p string
		switch rng.Intn(14) {
		case 0, 1, 2:
			p = fmt.Sprintf("src/%s/%s/%s_%d.go", word(), word(), word(), rng.Intn(50))
		case 3:
			p = fmt.Sprintf("crates/%s/src/%s/%s.rs", word(), word(), word())
		case 4:
			p = fmt.Sprintf("docs/%s/%s.md", word(), word())
		case 5:
			p = fmt.Sprintf("node_modules/%s-%s/lib/%s/index.js", word(), word(), word())
		case 6:
			p = fmt.Sprintf("web/src/components/%s/%s%d.tsx", word(), word(), rng.Intn(9))
		case 7:
			p = fmt.Sprintf("tests/%s/test_%s.py", word(), word())
		case 8:
			p = fmt.Sprintf("vendor/github.com/%s/%s/%s.go", word(), word(), word())
		case 9:
			p = fmt.Sprintf("a/%s/b/%s/c/%s/d/%s/e/%s.txt", word(), word(), word(), word(), word())
		case 10:
			p = pick("Makefile", "README.md", "Cargo.toml", "package.json", ".github/workflows/ci.yml",
				"go.mod", "go.sum", "Dockerfile", ".env", "LICENSE", "pyproject.toml")
		case 11:
			p = fmt.Sprintf("internal/%s/%s/%s_test.go", word(), word(), word())
		case 12:
			p = fmt.Sprintf("build/%s/%s.o", word(), word())
		default:
			p = fmt.Sprintf("include/%s/%s.h", word(), word())
		}
		out = append(out, p)
	}
	return out
}

func compileBenchSets(tb testing.TB) []*Set {
	sets := make([]*Set, len(benchSets))
	for i, lines := range benchSets {
		s, err := Compile(lines)
		if err != nil {
			tb.Fatal(err)
		}
		sets[i] = s
	}
	return sets
}

// BenchmarkMatch_10000paths_50sets measures the whole dry run per op: 10,000 paths prepared once,
// each tested against 50 sets (500,000 checks).
func BenchmarkMatch_10000paths_50sets(b *testing.B) {
	sets := compileBenchSets(b)
	paths := benchPaths(10000)
	b.ReportAllocs()
	b.ResetTimer()
	hits := 0
	for i := 0; i < b.N; i++ {
		hits = 0
		for _, rel := range paths {
			p := Prepare(rel)
			for _, s := range sets {
				if s.MatchPath(p) {
					hits++
				}
			}
		}
	}
	b.StopTimer()
	checks := float64(len(paths) * len(sets))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/checks, "ns/check")
	b.ReportMetric(float64(hits), "hits")
}

// BenchmarkMatch_10000paths_50sets_Match is the same with Match (the path split for every set).
func BenchmarkMatch_10000paths_50sets_Match(b *testing.B) {
	sets := compileBenchSets(b)
	paths := benchPaths(10000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, rel := range paths {
			for _, s := range sets {
				s.Match(rel)
			}
		}
	}
	b.StopTimer()
	checks := float64(len(paths) * len(sets))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/checks, "ns/check")
}

// TestBenchSetsAgreeWithReference checks the benchmark's sets and paths against git's algorithm,
// so the benchmark measures correct answers.
func TestBenchSetsAgreeWithReference(t *testing.T) {
	sets := compileBenchSets(t)
	paths := benchPaths(2000)
	hits := 0
	for i, s := range sets {
		ref := refParse(benchSets[i])
		for _, p := range paths {
			got := s.Match(p)
			if want := refIgnored(ref, p); got != want {
				t.Fatalf("%q %q: %v, reference %v", benchSets[i], p, got, want)
			}
			if got {
				hits++
			}
		}
	}
	if hits == 0 {
		t.Fatal("no set matches any path")
	}
	t.Logf("%d of %d checks match", hits, len(sets)*len(paths))
}
