package dynamodb

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// Attribute names.
const (
	attrPK      = "pk"
	attrSK      = "sk"
	attrCount   = "count"
	attrWindow  = "window_seconds"
	attrExpires = "expires_at"
	attrTAT     = "tat"
	// attrEmission is the emission interval, in nanoseconds, a bucket's
	// TAT was written with (decide.State.Emission).
	attrEmission = "emission_ns"
	attrLimit    = "limit"
	attrBurst    = "burst"
)

// Sort keys of the items beside a key's counters, in the same partition.
const (
	skBucket   = "gcra"
	skOverride = "override"
)

// sep separates the parts of a partition key. limiter.ValidKey refuses
// control characters, so no client key holds it: a key can neither pass
// for another kind of item nor run into the next part.
const sep = "\x1f"

// Kinds of item, the first part of every partition key.
const (
	kindCounter = "counter"
	kindCall    = "call"
)

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func num(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// CounterPartition is the partition key of key's counters under p.
func CounterPartition(p limiter.Policy, key string) string {
	return kindCounter + sep + decide.StoreKey(p, key)
}

// CounterKey is the primary key of key's counter under p in the window
// that starts at windowStart.
func CounterKey(p limiter.Policy, key string, windowStart time.Time) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK: str(CounterPartition(p, key)),
		attrSK: str("window#" + decide.FormatWindow(windowStart)),
	}
}

// BucketKey is the primary key of key's GCRA bucket under p: its TAT in
// Unix nanoseconds, expiring once it has drained.
func BucketKey(p limiter.Policy, key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: str(CounterPartition(p, key)), attrSK: str(skBucket)}
}

// OverrideKey is the primary key of key's override under p, which never
// expires.
func OverrideKey(p limiter.Policy, key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: str(CounterPartition(p, key)), attrSK: str(skOverride)}
}

// AuditPartition is the partition key of key's audit records in a window.
func AuditPartition(key string, windowStart time.Time) string {
	return kindCall + sep + key + sep + decide.FormatWindow(windowStart)
}

// numberOf reads a number attribute of item; a missing one is 0.
func numberOf(item map[string]types.AttributeValue, attr string) (int64, error) {
	v, ok := item[attr].(*types.AttributeValueMemberN)
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(v.Value, "-") {
		// The windows count denied attempts unconditionally: a count
		// past an int64 denies under any limit, as decide.CountCap does.
		return decide.CountCap, nil
	}
	return n, err
}
