package service

import (
	"encoding/json"
	"testing"
)

// /ping's body, appended without reflection, is json.Marshal's, byte for
// byte, whatever its strings hold; a body it cannot append is left to
// Marshal.
func TestPingBodyAppendsAsMarshal(t *testing.T) {
	keys := []string{"k0001", "", "a b", `q"uote`, `back\slash`, "<html>&", "tab\there", "é", "\u2028", "\x7f", "~!#$%^*()_+-=[]{}|;':,./?"}
	for _, key := range keys {
		for _, tier := range []string{"", "pro", "<b>"} {
			for _, burst := range []int64{0, 7} {
				b := pingBody{usageBody: usageBody{Key: key, Count: -3, Limit: 1 << 40, Remaining: 0, WindowStart: "2026-12-02T00:00:00Z", ResetSeconds: 59, Burst: burst, Tier: tier}}
				want, err := json.Marshal(b)
				if err != nil {
					t.Fatal(err)
				}
				got, ok := b.appendJSON(nil)
				if ok && string(got) != string(want) {
					t.Errorf("key %q, tier %q: appended %s, Marshal writes %s", key, tier, got, want)
				}
				if !ok && plainJSON(key) && plainJSON(tier) {
					t.Errorf("key %q, tier %q: not appended, though plain", key, tier)
				}
			}
		}
	}
	if _, ok := (pingBody{Policies: []policyBody{{}}}).appendJSON(nil); ok {
		t.Error("a body of several policies appended: only one's is")
	}
}
