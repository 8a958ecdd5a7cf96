package strictjson_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/ft251/ratelimit/internal/strictjson"
)

// TestMembersKeepsOrderAndRefusesANameTwice: a map's members come in the
// order written, and a name given twice is an error, where encoding/json
// would keep the last silently.
func TestMembersKeepsOrderAndRefusesANameTwice(t *testing.T) {
	names, values, err := strictjson.Members([]byte(` {"pro": {"limit": 1}, "basic": 2} `))
	if err != nil || fmt.Sprint(names) != "[pro basic]" || string(values[0]) != `{"limit": 1}` || string(values[1]) != "2" {
		t.Errorf("= %q %q %v", names, values, err)
	}
	var member *strictjson.MemberError
	if _, _, err := strictjson.Members([]byte(`{"pro": 1, "pro": 2}`)); !errors.As(err, &member) || !member.Twice || member.Name != "pro" {
		t.Errorf("a name twice: %v, want a MemberError", err)
	}
	var typ *json.UnmarshalTypeError
	for in, kind := range map[string]string{`[1]`: "array", `"x"`: "string", `null`: "null", `3`: "number"} {
		if _, _, err := strictjson.Members([]byte(in)); !errors.As(err, &typ) || typ.Value != kind {
			t.Errorf("%s: %v, want a type error naming %s", in, err, kind)
		}
	}
	if _, _, err := strictjson.Members([]byte(`{} {}`)); !errors.Is(err, strictjson.ErrTrailing) {
		t.Errorf("two objects: %v, want ErrTrailing", err)
	}
	if names, _, err := strictjson.Members([]byte(`{}`)); err != nil || len(names) != 0 {
		t.Errorf("an empty object: %v %v", names, err)
	}
}

// TestDecodeRefusesNullForAnObject: null decodes into a struct as nothing
// at all, which would be refused later for its first missing member, not
// for what it is; Decode calls it the type error it is.
func TestDecodeRefusesNullForAnObject(t *testing.T) {
	var v struct {
		Key string `json:"key"`
	}
	var typ *json.UnmarshalTypeError
	for _, in := range []string{`null`, " null\n"} {
		if err := strictjson.Decode([]byte(in), &v); !errors.As(err, &typ) || typ.Value != "null" || typ.Field != "" {
			t.Errorf("%q: %v, want a type error naming null", in, err)
		}
	}
	if err := strictjson.Decode([]byte(`null null`), &v); !errors.Is(err, strictjson.ErrTrailing) {
		t.Errorf("two nulls: %v, want ErrTrailing", err)
	}
}

// TestWhole: whole numbers in every form JSON writes them, exactly;
// fractions and what is no number are ErrNotWhole; whole numbers beyond
// int64 are ErrRange (they were ErrNotWhole's "not a whole number": 1e30
// is one).
func TestWhole(t *testing.T) {
	for lit, want := range map[string]struct {
		n   int64
		err error
	}{
		"100": {100, nil}, "1e2": {100, nil}, "100.0": {100, nil}, "1.00e2": {100, nil}, "1E+2": {100, nil},
		"-5": {-5, nil}, "0": {0, nil}, "0e-400": {0, nil}, "-0.0": {0, nil},
		"9223372036854775807": {math.MaxInt64, nil}, "-9223372036854775807": {-math.MaxInt64, nil},
		"1.5": {0, strictjson.ErrNotWhole}, "1.0000000000000001": {0, strictjson.ErrNotWhole}, "1e-400": {0, strictjson.ErrNotWhole},
		"1e-9223372036854775809": {0, strictjson.ErrNotWhole}, `"5"`: {0, strictjson.ErrNotWhole}, "null": {0, strictjson.ErrNotWhole},
		"true": {0, strictjson.ErrNotWhole}, "{}": {0, strictjson.ErrNotWhole},
		"9223372036854775808": {math.MaxInt64, strictjson.ErrRange}, "1e30": {math.MaxInt64, strictjson.ErrRange},
		"99999999999999999999": {math.MaxInt64, strictjson.ErrRange}, "1e400": {math.MaxInt64, strictjson.ErrRange},
		"1e9223372036854775807": {math.MaxInt64, strictjson.ErrRange}, "1e99999999999999999999": {math.MaxInt64, strictjson.ErrRange},
		"-1e30": {math.MinInt64, strictjson.ErrRange}, "-9223372036854775808": {math.MinInt64, strictjson.ErrRange},
	} {
		n, err := strictjson.Whole([]byte(lit))
		if n != want.n || !errors.Is(err, want.err) || (want.err == nil) != (err == nil) {
			t.Errorf("Whole(%s) = %d, %v; want %d, %v", lit, n, err, want.n, want.err)
		}
	}
}
