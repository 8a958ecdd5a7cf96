// Package strictjson decodes one JSON object into a struct the way a
// contract written as JSON reads: member names exactly as the struct's
// json tags spell them, each at most once, no others. encoding/json alone
// matches names regardless of case ({"Key": ...} fills "key") and lets the
// last of two equal names win ({"key": "a", "key": "b"}), so a body that
// means something else to another parser passes unnoticed.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// MemberError is a member that v has no field for, or has twice.
type MemberError struct {
	Name string
	// Twice is true for a member given twice, false for an unknown one.
	Twice bool
	// Members are the names v has, in its fields' order.
	Members []string
}

func (e *MemberError) Error() string {
	if e.Twice {
		return fmt.Sprintf("member %q is given twice", e.Name)
	}
	return fmt.Sprintf("unknown member %q; members are %s", e.Name, strings.Join(e.Members, ", "))
}

// ErrTrailing is data after the one JSON value.
var ErrTrailing = errors.New("more than one JSON value")

// Decode decodes data, one JSON value, into v, a pointer to a struct. A
// value that is an object is first checked member by member: the first
// member v has no exact field for, or that comes twice, is a *MemberError.
// A null is a *json.UnmarshalTypeError, as an array is: encoding/json
// leaves the struct as it was, which would be refused later for a member
// it lacks, not for what it is. Other problems are encoding/json's errors
// (*json.SyntaxError, *json.UnmarshalTypeError, io.EOF for no value at
// all), or ErrTrailing.
func Decode(data []byte, v any) error {
	if string(bytes.Trim(data, " \t\r\n")) == "null" {
		return &json.UnmarshalTypeError{Value: "null", Type: reflect.TypeOf(v).Elem()}
	}
	members := names(reflect.TypeOf(v).Elem())
	if err := checkMembers(data, members); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return ErrTrailing
	}
	return nil
}

// Members reads data, one JSON object whose member names are the
// caller's to choose (a map's keys), as its members in order: each name
// at most once, where encoding/json into a map lets the last of two equal
// names win. A name given twice is a *MemberError; data that is not an
// object, a *json.UnmarshalTypeError; other problems, encoding/json's
// errors or ErrTrailing.
func Members(data []byte) (names []string, values []json.RawMessage, err error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, err
	}
	if tok != json.Delim('{') {
		return nil, nil, &json.UnmarshalTypeError{Value: kindOf(tok), Type: reflect.TypeFor[map[string]json.RawMessage]()}
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		name, _ := tok.(string)
		if slices.Contains(names, name) {
			return nil, nil, &MemberError{Name: name, Twice: true}
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		names, values = append(names, name), append(values, v)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, ErrTrailing
	}
	return names, values, nil
}

// kindOf names a JSON token's kind as encoding/json's errors do.
func kindOf(tok json.Token) string {
	switch tok.(type) {
	case json.Delim:
		return "array"
	case string:
		return "string"
	case float64, json.Number:
		return "number"
	case bool:
		return "bool"
	}
	return "null"
}

// checkMembers checks the member names of data's top-level object, if it
// is one; anything else is left for the decoder to report.
func checkMembers(data []byte, members []string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		name, _ := tok.(string)
		switch {
		case !slices.Contains(members, name):
			return &MemberError{Name: name, Members: members}
		case seen[name]:
			return &MemberError{Name: name, Twice: true, Members: members}
		}
		seen[name] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}

// names are the JSON names of t's exported fields.
func names(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

// ErrNotWhole is Whole's error for a literal that is no whole number: a
// fraction, or no number at all. ErrRange is its error for a whole number
// beyond int64.
var (
	ErrNotWhole = errors.New("not a whole number")
	ErrRange    = errors.New("a whole number beyond int64")
)

// Beyond says that member, whose literal raw Whole read as ErrRange, is
// more (or less) than any such member can be: it is a whole number, which
// "must be a whole number" would deny. A long literal is cut at 40 bytes
// (its bytes are ASCII: no character is cut).
func Beyond(member, raw string) string {
	than := "more"
	if strings.HasPrefix(raw, "-") {
		than = "less"
	}
	if len(raw) > 40 {
		raw = raw[:40] + "…"
	}
	return fmt.Sprintf("%q is %s, %s than any %s can be", member, raw, than, member)
}

// Whole reads a JSON number literal whose value is a whole number,
// in any of the forms JSON writes one (100, 1e2, 100.0, 1.00e2), from
// -9223372036854775807 to 9223372036854775807 (the callers bound it
// further). It reads the literal's digits
// exactly, never as a float64: 1.0000000000000001, which a float64 would
// round to 1, is not a whole number (ErrNotWhole). A whole number beyond
// those (1e30) is ErrRange, with the int64 nearest it, so that a caller
// can tell "too large" from "not a number" and say so.
func Whole(raw []byte) (int64, error) {
	lit, neg := strings.CutPrefix(string(raw), "-")
	mantissa, exp, hasExp := strings.Cut(strings.ToLower(lit), "e")
	whole, frac, _ := strings.Cut(mantissa, ".")
	if whole == "" || !digits(whole) || !digits(frac) || hasExp && !digits(strings.TrimLeft(exp, "+-")) {
		return 0, ErrNotWhole // a string, null, true, an object: not a number
	}
	// The value is all the mantissa's digits times 10^scale.
	all := strings.TrimLeft(whole+frac, "0")
	if all == "" {
		return 0, nil // zero, whatever the exponent
	}
	beyond := func() (int64, error) {
		if neg {
			return math.MinInt64, ErrRange
		}
		return math.MaxInt64, ErrRange
	}
	trimmed := strings.TrimRight(all, "0")
	scale := int64(len(all)-len(trimmed)) - int64(len(frac))
	if hasExp {
		// An exponent beyond the literal's length and 19 more, either
		// way, leaves no whole int64 (and is not added up): a fraction
		// below, a number too large above.
		e, err := strconv.ParseInt(exp, 10, 64)
		switch {
		case err != nil && !errors.Is(err, strconv.ErrRange):
			return 0, ErrNotWhole // 1e+-5, which JSON does not write
		case (err != nil || e < -int64(len(raw))-19) && strings.HasPrefix(exp, "-"):
			return 0, ErrNotWhole
		case err != nil || e > int64(len(raw))+19:
			return beyond()
		}
		scale += e
	}
	switch {
	case scale < 0:
		return 0, ErrNotWhole // digits after the point
	case int64(len(trimmed))+scale > 19:
		return beyond() // more than an int64 holds (19 digits)
	}
	u, err := strconv.ParseUint(trimmed+strings.Repeat("0", int(scale)), 10, 64)
	switch {
	case err != nil || u > math.MaxInt64:
		return beyond()
	case neg:
		return -int64(u), nil
	}
	return int64(u), nil
}

// digits reports whether s is ASCII digits only (or empty).
func digits(s string) bool {
	return strings.Trim(s, "0123456789") == ""
}
