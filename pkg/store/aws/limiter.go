package awsstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// limiterTTLSlack keeps a window's item a while past its end, so TTL never
// removes a window that a slow clock still counts in.
const limiterTTLSlack = time.Minute

// Limiter implements store.Limiter with one DynamoDB item per scope and
// fixed window (pk LIMIT#<scope>#<window start, epoch ms>, sk LIMIT), its
// counters attributes of the item (with the records' counter prefix, so
// they read as counters through Records too). A take is one conditional
// UpdateItem that ADDs to every counter taken from, its condition each
// counter's limit: exact under any concurrency, one write however many
// counters a take counts and checks (a key's rpm and tpm), a read when it
// only checks, and TTL removes old windows.
type Limiter struct {
	db    *dynamodb.Client
	table string
	now   func() time.Time
}

var _ store.Limiter = (*Limiter)(nil)

// NewLimiter returns a limiter keeping its windows in table.
func NewLimiter(db *dynamodb.Client, table string) *Limiter {
	return &Limiter{db: db, table: table, now: time.Now}
}

// Take applies takes to scope's current window if every counter then
// holds at most its limit.
func (l *Limiter) Take(ctx context.Context, scope string, window time.Duration, takes ...store.Take) (store.Decision, error) {
	if err := store.CheckTakes(window, takes); err != nil {
		return store.Decision{}, fmt.Errorf("limiter %s: %w", scope, err)
	}
	now := l.now()
	start := now.Truncate(window)
	end := start.Add(window)
	key := keyItem(store.Key{PK: "LIMIT#" + scope + "#" + strconv.FormatInt(start.UnixMilli(), 10), SK: "LIMIT"})
	writes, fits := false, true
	for _, t := range takes {
		writes = writes || t.N > 0
		fits = fits && t.N <= t.Limit
	}
	// A take that only checks, or one that can never fit, is answered
	// with a read, not a write.
	if !writes || !fits {
		out, err := l.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &l.table, Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return store.Decision{}, wrap(err, "limiter %s: read window", scope)
		}
		return decide(out.Item, takes, now, end), nil
	}
	e := newExpr()
	var adds, conds []string
	for _, t := range takes {
		c := e.name(counterPrefix + t.Counter)
		if t.N > 0 {
			adds = append(adds, c+" "+e.value(num(t.N)))
		}
		conds = append(conds, "(attribute_not_exists("+c+") OR "+c+" <= "+e.value(num(t.Limit-t.N))+")")
	}
	update := "ADD " + strings.Join(adds, ", ") +
		" SET " + e.name(attrTTL) + " = if_not_exists(" + e.name(attrTTL) + ", " + e.value(num(ttlSeconds(end.Add(limiterTTLSlack)))) + ")"
	cond := strings.Join(conds, " AND ")
	out, err := l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           &l.table,
		Key:                                 key,
		UpdateExpression:                    &update,
		ConditionExpression:                 &cond,
		ExpressionAttributeNames:            e.Names(),
		ExpressionAttributeValues:           e.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		d := decide(ccf.Item, takes, now, end)
		if d.Allowed { // the item changed between the write and its copy: refuse by the first counter
			d = store.Decision{Refused: takes[0].Counter, RetryAfter: end.Sub(now)}
		}
		return d, nil
	case err != nil:
		return store.Decision{}, wrap(err, "limiter %s: take", scope)
	}
	first := takes[0]
	return store.Decision{Allowed: true, Remaining: first.Limit - counterIn(out.Attributes, first.Counter)}, nil
}

// decide answers takes from a window item as it is (nil: empty) without
// changing it: refused by the first counter that the take would carry
// past its limit, else allowed (what a check answers).
func decide(it item, takes []store.Take, now, end time.Time) store.Decision {
	for _, t := range takes {
		if held := counterIn(it, t.Counter); held+t.N > t.Limit {
			return store.Decision{Refused: t.Counter, Remaining: max(t.Limit-held, 0), RetryAfter: end.Sub(now)}
		}
	}
	first := takes[0]
	return store.Decision{Allowed: true, Remaining: first.Limit - counterIn(it, first.Counter) - first.N}
}

// counterIn reads a window item's counter (0 for none).
func counterIn(it item, counter string) int64 {
	n, err := intAttr(it, counterPrefix+counter)
	if err != nil {
		return 0
	}
	return n
}
