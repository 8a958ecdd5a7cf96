// Package typednil tells an interface that holds a nil pointer (or map,
// slice, func or channel) from one that holds something: `var s
// *memory.Store` passed as a limiter.Store is not == nil, yet every call
// on it panics. Constructors ask here so that such a value is refused
// where it is given, with its type named, not at the first request.
package typednil

import (
	"errors"
	"fmt"
	"reflect"
)

// Is reports whether v is nil or holds a nil value of a kind that can be
// nil.
func Is(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}

// Missing is nil when v holds something, or else the error that says no
// what was given: "no store", or "no store: a nil *memory.Store" when v is
// a nil value of a type that would have done.
func Missing(what string, v any) error {
	switch {
	case v == nil:
		return errors.New("no " + what)
	case Is(v):
		return fmt.Errorf("no %s: a nil %T", what, v)
	}
	return nil
}
