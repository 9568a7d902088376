package awsstore

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// expr collects the placeholders of one request's expressions. Every
// attribute name goes through a #placeholder, so reserved words (status,
// ttl) and arbitrary counter names are safe.
type expr struct {
	names  map[string]string // placeholder → attribute name
	byName map[string]string // attribute name → placeholder
	values map[string]types.AttributeValue
}

func newExpr() *expr {
	return &expr{names: map[string]string{}, byName: map[string]string{}, values: map[string]types.AttributeValue{}}
}

// name returns the placeholder for an attribute name.
func (e *expr) name(attr string) string {
	if p, ok := e.byName[attr]; ok {
		return p
	}
	p := "#n" + strconv.Itoa(len(e.names))
	e.names[p] = attr
	e.byName[attr] = p
	return p
}

// value returns a new placeholder for v.
func (e *expr) value(v types.AttributeValue) string {
	p := ":v" + strconv.Itoa(len(e.values))
	e.values[p] = v
	return p
}

// Names and Values return the maps for the request, nil when empty (the
// service rejects empty maps).
func (e *expr) Names() map[string]string {
	if len(e.names) == 0 {
		return nil
	}
	return e.names
}

func (e *expr) Values() map[string]types.AttributeValue {
	if len(e.values) == 0 {
		return nil
	}
	return e.values
}

// and joins non-empty conditions. Every condition built here can be joined
// as is: one with a top-level OR comes parenthesized (DynamoDB rejects
// redundant parentheses, so nothing is wrapped twice).
func and(conds ...string) string {
	var parts []string
	for _, c := range conds {
		if c != "" {
			parts = append(parts, c)
		}
	}
	return strings.Join(parts, " AND ")
}

// absentOrExpired holds when no live item has the key.
func (e *expr) absentOrExpired(now time.Time) string {
	return "(attribute_not_exists(" + e.name(attrPK) + ") OR " + e.name(attrExp) + " <= " + e.value(num(now.UnixNano())) + ")"
}

// liveItem holds when a live item has the key.
func (e *expr) liveItem(now time.Time) string {
	return "attribute_exists(" + e.name(attrPK) + ") AND (attribute_not_exists(" + e.name(attrExp) + ") OR " +
		e.name(attrExp) + " > " + e.value(num(now.UnixNano())) + ")"
}

// absentOrLive holds unless an expired item has the key: an expired item
// must be replaced, not added to or kept (see Records.Add).
func (e *expr) absentOrLive(now time.Time) string {
	return "(attribute_not_exists(" + e.name(attrPK) + ") OR attribute_not_exists(" + e.name(attrExp) + ") OR " +
		e.name(attrExp) + " > " + e.value(num(now.UnixNano())) + ")"
}

// cond renders a store.Cond as a condition expression ("" when it always
// holds). Expired items count as absent, as they do for reads.
func (e *expr) cond(c store.Cond, now time.Time) string {
	var parts []string
	if c.Absent {
		parts = append(parts, e.absentOrExpired(now))
	}
	if c.Exists || len(c.StatusIn) > 0 || c.Version > 0 {
		parts = append(parts, e.liveItem(now))
	}
	if len(c.StatusIn) > 0 {
		status := e.name(attrStatus)
		var alts []string
		var vals []string
		for _, s := range c.StatusIn {
			if s == "" {
				// An empty status is stored as no attribute at all.
				alts = append(alts, "attribute_not_exists("+status+")")
				continue
			}
			vals = append(vals, e.value(str(s)))
		}
		if len(vals) > 0 {
			alts = append(alts, status+" IN ("+strings.Join(vals, ", ")+")")
		}
		if len(alts) == 1 {
			parts = append(parts, alts[0])
		} else {
			parts = append(parts, "("+strings.Join(alts, " OR ")+")")
		}
	}
	if c.Version > 0 {
		parts = append(parts, e.name(attrVer)+" = "+e.value(num(c.Version)))
	}
	for _, name := range slices.Sorted(maps.Keys(c.AtMost)) {
		parts = append(parts, e.atMost(counterPrefix+name, c.AtMost[name], now))
	}
	return and(parts...)
}

// atMost holds when the counter attribute is at most most, a missing
// attribute or a missing or expired item counting as 0 (a comparison with a
// missing attribute is false in DynamoDB, so the zero cases are spelled out).
func (e *expr) atMost(attr string, most int64, now time.Time) string {
	le := e.name(attr) + " <= " + e.value(num(most))
	if most < 0 {
		return e.liveItem(now) + " AND " + le
	}
	return "(attribute_not_exists(" + e.name(attrPK) + ") OR " + e.name(attrExp) + " <= " + e.value(num(now.UnixNano())) +
		" OR attribute_not_exists(" + e.name(attr) + ") OR " + le + ")"
}

// sameItem holds while the item is still the one a snapshot saw: absent if
// it was absent, else with the same version and expiry. Writes that depend
// on a snapshot (a Put computing the next version, an Add replacing an
// expired item) carry it so a concurrent write makes them fail and retry.
func (e *expr) sameItem(snap item) string {
	if snap == nil {
		return "attribute_not_exists(" + e.name(attrPK) + ")"
	}
	parts := []string{"attribute_exists(" + e.name(attrPK) + ")"}
	for _, attr := range []string{attrVer, attrExp} {
		if v, ok := snap[attr]; ok {
			parts = append(parts, e.name(attr)+" = "+e.value(v))
		} else {
			parts = append(parts, "attribute_not_exists("+e.name(attr)+")")
		}
	}
	return strings.Join(parts, " AND ")
}

// strPtr returns nil for "" so optional expression fields stay unset.
func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
