package jsonx

import (
	"encoding/binary"
	"math/bits"
	"math/rand"
	"testing"
)

// plainWord says of eight bytes what plainByte says of each, and nonPlain where the
// first byte that is not plain is: every byte value at every position among plain
// ones, every pair of values at two positions, and random words.
func TestPlainWord_agreesWithPlainByte(t *testing.T) {
	check := func(b [8]byte) {
		want := true
		for _, c := range b {
			want = want && plainByte[c]
		}
		if got := plainWord(binary.LittleEndian.Uint64(b[:])); got != want {
			t.Fatalf("% x: plainWord %v, plainByte %v", b, got, want)
		}
		// nonPlain's lowest bit is the first byte that is not plain.
		first := 8
		for j, c := range b {
			if !plainByte[c] {
				first = j
				break
			}
		}
		m := nonPlain(binary.LittleEndian.Uint64(b[:]))
		if got := bits.TrailingZeros64(m) >> 3; m != 0 && got != first || m == 0 && first != 8 {
			t.Fatalf("% x: nonPlain says byte %d, the first that is not plain is %d", b, got, first)
		}
	}
	filler := [8]byte{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'}
	for pos := range 8 {
		for v := range 256 {
			b := filler
			b[pos] = byte(v)
			check(b)
			for pos2 := pos + 1; pos2 < 8; pos2++ {
				for v2 := range 256 {
					b2 := b
					b2[pos2] = byte(v2)
					check(b2)
				}
			}
		}
	}
	r := rand.New(rand.NewSource(1))
	for range 1 << 20 {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], r.Uint64())
		check(b)
		for j := range b { // mostly plain words, with a few bytes of every kind
			if r.Intn(4) != 0 {
				b[j] = byte(0x20 + r.Intn(0x60))
			}
		}
		check(b)
	}
}
