package strictjson_test

import (
	"encoding/json"
	"errors"
	"fmt"
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
