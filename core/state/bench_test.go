package state_test

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/clara-lib/clara/core/state"
)

// BenchmarkScopeCached is the rule engine's read per event: a scope that did
// not change since the last call.
func BenchmarkScopeCached(b *testing.B) {
	s, err := state.Open("")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var ws []state.Write
	for i := range 20 {
		ws = append(ws, state.Write{Scope: "session", Key: "k" + strconv.Itoa(i), Value: []byte(`{"n":1}`)})
	}
	if err := s.Apply(ws); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if m, err := s.Scope("session"); err != nil || len(m) != 20 {
				b.Fatal(m, err)
			}
		}
	})
}

// BenchmarkApply is one set_state emission: two keys in one transaction,
// into a cached scope of 20 keys.
func BenchmarkApply(b *testing.B) {
	for _, kind := range []string{"memory", "file"} {
		b.Run(kind, func(b *testing.B) {
			path := ""
			if kind == "file" {
				path = filepath.Join(b.TempDir(), "state.db")
			}
			s, err := state.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for i := range 20 {
				s.Apply([]state.Write{{Scope: "session", Key: "k" + strconv.Itoa(i), Value: []byte(`1`)}})
			}
			s.Scope("session")
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				v := []byte(strconv.Itoa(i))
				if err := s.Apply([]state.Write{{Scope: "session", Key: "k1", Value: v}, {Scope: "session", Key: "k2", Value: v}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
