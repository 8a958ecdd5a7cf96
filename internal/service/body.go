package service

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/ft251/ratelimit/internal/strictjson"
)

// MaxCheckBody bounds a POST /check or admin body.
const MaxCheckBody = 64 << 10

// readJSON reads req's body, one JSON object, into v, a pointer to a
// struct whose json tags are the members it takes, exactly: 415 for
// another media type than application/json (none given is taken as JSON)
// or a charset but UTF-8 (the body is read as UTF-8, as RFC 8259 has JSON
// sent) or a Content-Encoding but identity, 413 beyond MaxCheckBody, and
// bad's 400 for anything else wrong, with example in the message for an
// empty body. A member that is null is a 400 too, whichever it is: null
// stands for no value, which no member takes (one that is optional is
// left out).
func readJSON(req *request, v any, bad func(why string) *Problem, example string) error {
	if p := unsupportedBody(req.r); p != nil {
		return p
	}
	body, err := io.ReadAll(http.MaxBytesReader(req.w, req.r.Body, MaxCheckBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return problem(http.StatusRequestEntityTooLarge, TypeInvalidRequest, fmt.Sprintf("The body is over %d bytes.", MaxCheckBody))
	case err != nil:
		return bad("the body could not be read")
	}
	if err := strictjson.Decode(body, v); err != nil {
		return bad(jsonProblem(err, example))
	}
	if why, ok := nullMember(body); ok {
		return bad(why)
	}
	return nil
}

// unsupportedBody is the 415 for a body of r that is not JSON in UTF-8 as
// it comes: another media type or charset, or a Content-Encoding but
// identity, which is not undone here (read as it came, a gzipped body
// would be "invalid JSON" and a plain one labelled gzip taken). A POST's
// says what it accepts. Content-Encoding is a list, and its lines are one
// list (RFC 9110 §5.3): every coding on every line counts. Content-Type
// is one value: lines that differ are refused, not the first one taken.
func unsupportedBody(r *http.Request) *Problem {
	var p *Problem
	cts := r.Header.Values("Content-Type")
	twoTypes := slices.ContainsFunc(cts, func(ct string) bool { return ct != cts[0] })
	if twoTypes || len(cts) > 0 && cts[0] != "" && !utf8JSON(cts[0]) {
		p = problem(http.StatusUnsupportedMediaType, TypeInvalidRequest, "The body must be application/json.")
	}
	if enc := strings.Join(r.Header.Values("Content-Encoding"), ", "); p == nil && !onlyIdentity(enc) {
		p = problem(http.StatusUnsupportedMediaType, TypeInvalidRequest, fmt.Sprintf("The body must be sent without a Content-Encoding, not %q.", enc))
		p.header.Set("Accept-Encoding", "identity")
	}
	if p != nil && r.Method == http.MethodPost {
		p.header.Set("Accept-Post", "application/json")
	}
	return p
}

// utf8JSON reports whether the media type ct is application/json in UTF-8.
func utf8JSON(ct string) bool {
	mt, params, err := mime.ParseMediaType(ct)
	cs, ok := params["charset"]
	return err == nil && mt == "application/json" && (!ok || strings.EqualFold(cs, "utf-8"))
}

// onlyIdentity reports whether the codings list holds none but identity.
func onlyIdentity(codings string) bool {
	for c := range strings.SplitSeq(codings, ",") {
		if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
			return false
		}
	}
	return true
}

// nullMember says which member of body's object, a body that decoded as
// one, is null or is an array holding a null: the first. encoding/json
// reads a null element of a []string as "", which would be refused later
// as a name no policy has, not as the null it is.
func nullMember(body []byte) (why string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return "", false
		}
		name, _ := tok.(string)
		if string(value) == "null" {
			return fmt.Sprintf("%q must not be null", name), true
		}
		if holdsNull(value) {
			return fmt.Sprintf("%q must not hold null", name), true
		}
	}
	return "", false
}

// holdsNull reports whether value is an array with a null element.
func holdsNull(value json.RawMessage) bool {
	var elems []json.RawMessage
	if len(value) == 0 || value[0] != '[' || json.Unmarshal(value, &elems) != nil {
		return false
	}
	for _, e := range elems {
		if string(bytes.TrimSpace(e)) == "null" {
			return true
		}
	}
	return false
}

// jsonProblem says what is wrong with a body in its terms, not the
// decoder's Go types.
func jsonProblem(err error, example string) string {
	var typ *json.UnmarshalTypeError
	var syn *json.SyntaxError
	var member *strictjson.MemberError
	switch {
	case errors.As(err, &member):
		return member.Error()
	case errors.As(err, &typ) && typ.Field != "":
		return fmt.Sprintf("%q must be %s, not %s", typ.Field, kindName(typ.Type.String()), typ.Value)
	case errors.As(err, &typ):
		return "the body must be a JSON object, not " + typ.Value
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d", syn.Offset)
	case errors.Is(err, io.EOF):
		return "the body is empty; it must be a JSON object such as " + example
	case errors.Is(err, strictjson.ErrTrailing):
		return "the body holds more than one JSON value"
	}
	return "invalid JSON"
}

// wholeMember reads raw, a body's member, as a whole number in any form
// JSON writes one, of at least least (math.MinInt64: any), or says why it
// is not one: above int64 (strictjson.Beyond), or no whole number, or
// less than least (a literal below int64 is told as no whole number).
func wholeMember(member string, raw json.RawMessage, least int64) (int64, string) {
	n, err := strictjson.Whole(raw)
	switch {
	case errors.Is(err, strictjson.ErrRange) && n > 0:
		return 0, strictjson.Beyond(member, string(raw))
	case err != nil || n < least:
		atLeast := ""
		if least != math.MinInt64 {
			atLeast = " of at least " + strconv.FormatInt(least, 10)
		}
		return 0, fmt.Sprintf("%q must be a whole number%s, not %s", member, atLeast, truncate(string(raw), 40))
	}
	return n, ""
}

// kindName names a Go type of a body's member as JSON would.
func kindName(goType string) string {
	switch goType {
	case "string", "*string":
		return "a string"
	case "int64", "*int64", "json.Number":
		return "a whole number"
	case "[]string", "*[]string":
		return "an array of strings"
	}
	return "another type"
}
