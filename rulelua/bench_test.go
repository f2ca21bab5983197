package rulelua

import (
	"context"
	"reflect"
	"testing"
)

func BenchmarkRun_seedRule(b *testing.B) {
	s := mustCompile(b, "seed.lua", seedRule)
	ctx := context.Background()
	var res Result
	var err error
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err = s.Run(ctx, seedCtx, nil)
	}
	b.StopTimer()
	if err != nil || res.Value != true {
		b.Fatalf("got %#v, %v", res.Value, err)
	}
}

func BenchmarkRun_seedRule_parallel(b *testing.B) {
	s := mustCompile(b, "seed.lua", seedRule)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			res, err := s.Run(ctx, seedCtx, nil)
			if err != nil || res.Value != true {
				b.Errorf("got %#v, %v", res.Value, err)
				return
			}
		}
	})
}

func BenchmarkRun_inlineCondition(b *testing.B) {
	s := mustCompile(b, "inline.lua", `return ctx.turn.token_usage > 0.8`)
	ctx := context.Background()
	var res Result
	var err error
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err = s.Run(ctx, seedCtx, nil)
	}
	b.StopTimer()
	if err != nil || res.Value != true {
		b.Fatalf("got %#v, %v", res.Value, err)
	}
}

func BenchmarkCall_wordCount(b *testing.B) {
	s := mustCompile(b, "word_count", wordCount)
	args := map[string]any{"text": "the quick brown fox jumps over the lazy dog"}
	ctx := context.Background()
	var res Result
	var err error
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err = s.Call(ctx, args, nil)
	}
	b.StopTimer()
	if err != nil || !reflect.DeepEqual(res.Value, map[string]any{"words": 9.0}) {
		b.Fatalf("got %#v, %v", res.Value, err)
	}
}

func BenchmarkRun_freshState(b *testing.B) {
	s := mustCompile(b, "seed.lua", seedRule)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		st := newState()
		res, err := st.run(context.Background(), s, runInput{arg: seedCtx}, nil)
		st.endRun()
		st.close()
		if err != nil || res.Value != true {
			b.Fatalf("got %#v, %v", res.Value, err)
		}
	}
}

func BenchmarkConcat_loop(b *testing.B) {
	s := mustCompile(b, "concat.lua", `local s = "" for i = 1, 100 do s = s .. "x" end return #s`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if res, err := s.Run(context.Background(), nil, nil); err != nil || res.Value != 100.0 {
			b.Fatalf("got %#v, %v", res.Value, err)
		}
	}
}

// BenchmarkCallJSON_echo5 is the Lua side of the bench row "Lua tool": a tool returning its five
// arguments, JSON in and out.
func BenchmarkCallJSON_echo5(b *testing.B) {
	s := mustCompile(b, "lua_echo", `return function(args) return args end`)
	args := []byte(`{"city":"Lyon","country":"FR","days":3,"units":"metric","detailed":false}`)
	ctx := context.Background()
	var res Result
	var err error
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err = s.CallJSON(ctx, args, nil)
	}
	b.StopTimer()
	if err != nil || string(res.JSON) != `{"city":"Lyon","country":"FR","days":3,"detailed":false,"units":"metric"}` {
		b.Fatalf("got %s, %v", res.JSON, err)
	}
}
