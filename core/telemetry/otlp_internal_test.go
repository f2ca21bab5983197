package telemetry

import (
	"encoding/json"
	"reflect"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/protobuf/encoding/protojson"
)

// Slice attributes go out as OTLP arrays of their elements, in order.
func TestAnyValue_slices(t *testing.T) {
	for _, c := range []struct {
		v    attribute.Value
		want string
	}{
		{attribute.BoolSliceValue([]bool{true, false}), `{"arrayValue":{"values":[{"boolValue":true},{"boolValue":false}]}}`},
		{attribute.Int64SliceValue([]int64{1, -2}), `{"arrayValue":{"values":[{"intValue":"1"},{"intValue":"-2"}]}}`},
		{attribute.Float64SliceValue([]float64{0.5}), `{"arrayValue":{"values":[{"doubleValue":0.5}]}}`},
		{attribute.StringSliceValue([]string{"a", "b"}), `{"arrayValue":{"values":[{"stringValue":"a"},{"stringValue":"b"}]}}`},
		{attribute.StringSliceValue(nil), `{"arrayValue":{}}`},
	} {
		b, err := protojson.Marshal(anyValue(c.v))
		if err != nil {
			t.Fatal(err)
		}
		var got, want any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal([]byte(c.want), &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%v: %s, want %s", c.v.Type(), b, c.want)
		}
	}
}
