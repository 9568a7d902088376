package awsstore

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Attribute names of the single table (ARCHITECTURE §4).
const (
	attrPK     = "pk"
	attrSK     = "sk"
	attrGSI1PK = "gsi1pk"
	attrGSI1SK = "gsi1sk"
	attrGSI2PK = "gsi2pk"
	attrGSI2SK = "gsi2sk"
	// attrTTL is the expiry in epoch seconds, rounded up, that DynamoDB's TTL
	// sweeper acts on (late: reads never rely on it).
	attrTTL = "ttl"
	// attrExp is the exact expiry in epoch nanoseconds. Reads and conditions
	// use it, so a record expires at ExpiresAt to the nanosecond, as it does
	// in the local adapter, not up to a second early or late.
	attrExp    = "exp"
	attrStatus = "status"
	attrVer    = "ver"
	attrBody   = "body"
	// counterPrefix keeps counters apart from the fixed attributes above:
	// counter "lines" is the numeric attribute "n_lines".
	counterPrefix = "n_"
)

// item is one DynamoDB item.
type item = map[string]types.AttributeValue

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func keyItem(k store.Key) item {
	return item{attrPK: str(k.PK), attrSK: str(k.SK)}
}

// ttlSeconds rounds t up to whole epoch seconds, so DynamoDB never deletes an
// item before it has expired.
func ttlSeconds(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

// encodeRecord renders rec as a full item with the given version. Empty
// optional fields are left out: a GSI key must not be empty, and an item
// without gsi1pk/gsi1sk is simply not in gsi1 (a sparse index).
func encodeRecord(rec store.Record, ver int64) item {
	it := keyItem(rec.Key)
	for attr, v := range optionalAttrs(rec) {
		if v != nil {
			it[attr] = v
		}
	}
	for name, n := range rec.Counters {
		it[counterPrefix+name] = num(n)
	}
	it[attrVer] = num(ver)
	return it
}

// optionalAttrs maps every optional, non-counter attribute to its value, or
// to nil when rec leaves it empty (Update removes those).
func optionalAttrs(rec store.Record) map[string]types.AttributeValue {
	m := map[string]types.AttributeValue{
		attrGSI1PK: nil, attrGSI1SK: nil, attrGSI2PK: nil, attrGSI2SK: nil,
		attrStatus: nil, attrBody: nil, attrTTL: nil, attrExp: nil,
	}
	set := func(attr, v string) {
		if v != "" {
			m[attr] = str(v)
		}
	}
	set(attrGSI1PK, rec.GSI1.PK)
	set(attrGSI1SK, rec.GSI1.SK)
	set(attrGSI2PK, rec.GSI2.PK)
	set(attrGSI2SK, rec.GSI2.SK)
	set(attrStatus, rec.Status)
	if len(rec.Body) > 0 {
		m[attrBody] = &types.AttributeValueMemberB{Value: rec.Body}
	}
	if !rec.ExpiresAt.IsZero() {
		m[attrTTL] = num(ttlSeconds(rec.ExpiresAt))
		m[attrExp] = num(rec.ExpiresAt.UnixNano())
	}
	return m
}

// decodeRecord reads an item written by encodeRecord (or by Add).
func decodeRecord(it item) (store.Record, error) {
	var rec store.Record
	var err error
	get := func(attr string) string {
		if v, ok := it[attr].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	rec.Key = store.Key{PK: get(attrPK), SK: get(attrSK)}
	rec.GSI1 = store.IndexKey{PK: get(attrGSI1PK), SK: get(attrGSI1SK)}
	rec.GSI2 = store.IndexKey{PK: get(attrGSI2PK), SK: get(attrGSI2SK)}
	rec.Status = get(attrStatus)
	if b, ok := it[attrBody].(*types.AttributeValueMemberB); ok {
		rec.Body = b.Value
	}
	if rec.ExpiresAt, _, err = expiry(it); err != nil {
		return store.Record{}, err
	}
	if _, ok := it[attrVer]; ok {
		if rec.Version, err = intAttr(it, attrVer); err != nil {
			return store.Record{}, err
		}
	}
	for attr := range it {
		name, ok := strings.CutPrefix(attr, counterPrefix)
		if !ok {
			continue
		}
		n, err := intAttr(it, attr)
		if err != nil {
			return store.Record{}, err
		}
		if rec.Counters == nil {
			rec.Counters = map[string]int64{}
		}
		rec.Counters[name] = n
	}
	return rec, nil
}

// intAttr reads a numeric attribute as an int64.
func intAttr(it item, attr string) (int64, error) {
	v, ok := it[attr].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("attribute %q is not a number", attr)
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		// A number written by someone else, e.g. "1.5e3": accept what fits.
		f, ferr := strconv.ParseFloat(v.Value, 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > math.MaxInt64 {
			return 0, fmt.Errorf("attribute %q: %w", attr, err)
		}
		n = int64(f)
	}
	return n, nil
}

// expiry reads an item's expiry: exact from exp, else (an item written by
// another tool) from ttl. ok is false for an item that never expires.
func expiry(it item) (t time.Time, ok bool, err error) {
	if _, has := it[attrExp]; has {
		ns, err := intAttr(it, attrExp)
		if err != nil {
			return time.Time{}, false, err
		}
		return time.Unix(0, ns), true, nil
	}
	if _, has := it[attrTTL]; has {
		s, err := intAttr(it, attrTTL)
		if err != nil {
			return time.Time{}, false, err
		}
		return time.Unix(s, 0), true, nil
	}
	return time.Time{}, false, nil
}

// expired reports whether it has expired by now. DynamoDB deletes expired
// items late (up to days; moto never), so every read checks this itself.
func expired(it item, now time.Time) bool {
	t, ok, err := expiry(it)
	return err == nil && ok && !now.Before(t)
}

// live reports whether it is present and not expired.
func live(it item, now time.Time) bool {
	return it != nil && !expired(it, now)
}

// holds evaluates cond against it (nil: absent) the way the condition
// expression does on the server. It is used after a failed optimistic write,
// to tell a failed condition from a lost race.
func holds(c store.Cond, it item, now time.Time) bool {
	isLive := live(it, now)
	if c.Absent && isLive {
		return false
	}
	if c.Exists || len(c.StatusIn) > 0 || c.Version > 0 {
		if !isLive {
			return false
		}
	}
	if len(c.StatusIn) > 0 {
		status := ""
		if v, ok := it[attrStatus].(*types.AttributeValueMemberS); ok {
			status = v.Value
		}
		if !slices.Contains(c.StatusIn, status) {
			return false
		}
	}
	if c.Version > 0 {
		if v, err := intAttr(it, attrVer); err != nil || v != c.Version {
			return false
		}
	}
	for name, most := range c.AtMost {
		var n int64
		if _, ok := it[counterPrefix+name]; ok && isLive {
			v, err := intAttr(it, counterPrefix+name)
			if err != nil {
				return false
			}
			n = v
		}
		if n > most {
			return false
		}
	}
	return true
}
