package awsstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// limiterCounter is the window item's counter; with the records' counter
// prefix it reads as counter "taken" through Records too.
const limiterCounter = counterPrefix + "taken"

// limiterTTLSlack keeps a window's item a while past its end, so TTL never
// removes a window that a slow clock still counts in.
const limiterTTLSlack = time.Minute

// Limiter implements store.Limiter with one DynamoDB item per scope and
// fixed window (pk LIMIT#<scope>#<window start, epoch ms>, sk LIMIT), taken
// from with a conditional ADD: exact under any concurrency, one write per
// take (a check, n = 0, is a read), and TTL removes old windows.
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

// Take takes n units if the window then holds at most limit.
func (l *Limiter) Take(ctx context.Context, scope string, window time.Duration, limit, n int64) (store.Decision, error) {
	if window <= 0 || limit < 0 || n < 0 {
		return store.Decision{}, fmt.Errorf("limiter %s: bad window %v, limit %d or n %d", scope, window, limit, n)
	}
	now := l.now()
	start := now.Truncate(window)
	end := start.Add(window)
	key := keyItem(store.Key{PK: "LIMIT#" + scope + "#" + strconv.FormatInt(start.UnixMilli(), 10), SK: "LIMIT"})
	refused := func(taken int64) store.Decision {
		return store.Decision{Allowed: false, Remaining: max(limit-taken, 0), RetryAfter: end.Sub(now)}
	}
	// A take of nothing only checks the window, and one that can never fit
	// is refused: both are answered with a read, not a write.
	if n == 0 || n > limit {
		out, err := l.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &l.table, Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return store.Decision{}, wrap(err, "limiter %s: read window", scope)
		}
		taken := takenIn(out.Item)
		if n == 0 && taken <= limit {
			return store.Decision{Allowed: true, Remaining: limit - taken}, nil
		}
		return refused(taken), nil
	}
	e := newExpr()
	counter := e.name(limiterCounter)
	update := "ADD " + counter + " " + e.value(num(n)) +
		" SET " + e.name(attrTTL) + " = if_not_exists(" + e.name(attrTTL) + ", " + e.value(num(ttlSeconds(end.Add(limiterTTLSlack)))) + ")"
	cond := "attribute_not_exists(" + counter + ") OR " + counter + " <= " + e.value(num(limit-n))
	out, err := l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           &l.table,
		Key:                                 key,
		UpdateExpression:                    &update,
		ConditionExpression:                 &cond,
		ExpressionAttributeNames:            e.Names(),
		ExpressionAttributeValues:           e.Values(),
		ReturnValues:                        types.ReturnValueUpdatedNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return refused(takenIn(ccf.Item)), nil
	case err != nil:
		return store.Decision{}, wrap(err, "limiter %s: take %d", scope, n)
	}
	return store.Decision{Allowed: true, Remaining: limit - takenIn(out.Attributes)}, nil
}

// takenIn reads a window item's counter (0 for none).
func takenIn(it item) int64 {
	n, err := intAttr(it, limiterCounter)
	if err != nil {
		return 0
	}
	return n
}
