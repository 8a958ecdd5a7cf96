package typednil_test

import (
	"testing"

	"github.com/ft251/ratelimit/internal/typednil"
)

type store struct{}

func (*store) Name() string { return "s" }

type named interface{ Name() string }

func TestIs(t *testing.T) {
	var nilPtr *store
	var nilIface named
	var heldNil named = nilPtr
	var nilMap map[string]int
	var nilFunc func()
	for name, tc := range map[string]struct {
		v    any
		want bool
	}{
		"nil":                        {nil, true},
		"a nil interface":            {nilIface, true},
		"an interface holding nil":   {heldNil, true},
		"a nil pointer":              {nilPtr, true},
		"a nil map":                  {nilMap, true},
		"a nil func":                 {nilFunc, true},
		"a pointer":                  {&store{}, false},
		"an interface holding one":   {named(&store{}), false},
		"a value that cannot be nil": {store{}, false},
		"zero":                       {0, false},
	} {
		if got := typednil.Is(tc.v); got != tc.want {
			t.Errorf("%s: Is = %v, want %v", name, got, tc.want)
		}
	}
}

func TestMissing(t *testing.T) {
	var nilPtr *store
	if err := typednil.Missing("store", nil); err == nil || err.Error() != "no store" {
		t.Errorf("Missing(nil) = %v", err)
	}
	if err := typednil.Missing("store", nilPtr); err == nil || err.Error() != "no store: a nil *typednil_test.store" {
		t.Errorf("Missing(a nil pointer) = %v", err)
	}
	if err := typednil.Missing("store", &store{}); err != nil {
		t.Errorf("Missing(a store) = %v", err)
	}
}
