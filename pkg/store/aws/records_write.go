package awsstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// op is one planned DynamoDB write: exactly one field is set. The same op
// runs as a single-item call or as an element of TransactWriteItems.
type op struct {
	put    *types.Put
	update *types.Update
	del    *types.Delete
}

// snapshots holds items read before a write (nil: absent).
type snapshots map[store.Key]item

func (s snapshots) known(k store.Key) bool {
	_, ok := s[k]
	return ok
}

// needsSnapshot reports whether a write can only be planned from the item's
// current state: a Put must know the version it replaces unless its
// condition pins it (Absent: none; Version: that one).
func needsSnapshot(w store.Write) bool {
	return w.Kind == store.WritePut && !w.Cond.Absent && w.Cond.Version == 0
}

// plan turns a store.Write into a DynamoDB write.
func (r *Records) plan(w store.Write, snaps snapshots, now time.Time) (op, error) {
	rec := w.Record
	e := newExpr()
	switch w.Kind {
	case store.WritePut:
		switch {
		case w.Cond.Absent:
			return r.putOp(encodeRecord(rec, 1), e, e.cond(w.Cond, now)), nil
		case w.Cond.Version > 0:
			return r.putOp(encodeRecord(rec, w.Cond.Version+1), e, e.cond(w.Cond, now)), nil
		}
		snap := snaps[rec.Key]
		ver := int64(1)
		if live(snap, now) {
			if v, err := intAttr(snap, attrVer); err == nil {
				ver = v + 1
			}
		}
		return r.putOp(encodeRecord(rec, ver), e, and(e.cond(w.Cond, now), e.sameItem(snap))), nil

	case store.WriteUpdate:
		var set, remove []string
		for _, attr := range slices.Sorted(maps.Keys(optionalAttrs(rec))) {
			if v := optionalAttrs(rec)[attr]; v != nil {
				set = append(set, e.name(attr)+" = "+e.value(v))
			} else {
				remove = append(remove, e.name(attr))
			}
		}
		set = append(set, e.name(attrVer)+" = "+e.name(attrVer)+" + "+e.value(num(1)))
		update := "SET " + strings.Join(set, ", ")
		if len(remove) > 0 {
			update += " REMOVE " + strings.Join(remove, ", ")
		}
		cond := and(e.cond(w.Cond, now), e.liveItem(now))
		return op{update: &types.Update{
			TableName: &r.table, Key: keyItem(rec.Key), UpdateExpression: &update,
			ConditionExpression: &cond, ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		}}, nil

	case store.WriteAdd:
		if snap := snaps[rec.Key]; snap != nil && expired(snap, now) {
			// ADD would add to the expired item's counters: replace it
			// instead, if it is still the item we saw.
			fresh := store.Record{Key: rec.Key, Counters: rec.Counters}
			return r.putOp(encodeRecord(fresh, 1), e, and(e.cond(w.Cond, now), e.sameItem(snap))), nil
		}
		var adds []string
		for _, name := range slices.Sorted(maps.Keys(rec.Counters)) {
			adds = append(adds, e.name(counterPrefix+name)+" "+e.value(num(rec.Counters[name])))
		}
		ver := e.name(attrVer)
		update := "SET " + ver + " = if_not_exists(" + ver + ", " + e.value(num(1)) + ")"
		if len(adds) > 0 {
			update += " ADD " + strings.Join(adds, ", ")
		}
		cond := and(e.cond(w.Cond, now), e.absentOrLive(now))
		return op{update: &types.Update{
			TableName: &r.table, Key: keyItem(rec.Key), UpdateExpression: &update,
			ConditionExpression: &cond, ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		}}, nil

	case store.WriteDelete:
		cond := e.cond(w.Cond, now)
		return op{del: &types.Delete{
			TableName: &r.table, Key: keyItem(rec.Key), ConditionExpression: strPtr(cond),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		}}, nil
	}
	return op{}, fmt.Errorf("write %s/%s: unknown kind %d", rec.Key.PK, rec.Key.SK, w.Kind)
}

func (r *Records) putOp(it item, e *expr, cond string) op {
	return op{put: &types.Put{
		TableName: &r.table, Item: it, ConditionExpression: strPtr(cond),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	}}
}

// runOne runs an op as a single-item call. For an update it returns the
// updated attributes.
func (r *Records) runOne(ctx context.Context, o op) (item, error) {
	var err error
	var got item
	switch {
	case o.put != nil:
		_, err = r.db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: o.put.TableName, Item: o.put.Item, ConditionExpression: o.put.ConditionExpression,
			ExpressionAttributeNames: o.put.ExpressionAttributeNames, ExpressionAttributeValues: o.put.ExpressionAttributeValues,
		})
	case o.update != nil:
		var out *dynamodb.UpdateItemOutput
		out, err = r.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: o.update.TableName, Key: o.update.Key, UpdateExpression: o.update.UpdateExpression,
			ConditionExpression:      o.update.ConditionExpression,
			ExpressionAttributeNames: o.update.ExpressionAttributeNames, ExpressionAttributeValues: o.update.ExpressionAttributeValues,
			ReturnValues: types.ReturnValueUpdatedNew,
		})
		if err == nil {
			got = out.Attributes
			if got == nil {
				got = item{}
			}
		}
	case o.del != nil:
		_, err = r.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: o.del.TableName, Key: o.del.Key, ConditionExpression: o.del.ConditionExpression,
			ExpressionAttributeNames: o.del.ExpressionAttributeNames, ExpressionAttributeValues: o.del.ExpressionAttributeValues,
		})
	}
	switch {
	case err == nil:
		return got, nil
	case conditionFailed(err):
		return nil, wrapAs(store.ErrConditionFailed, err, "condition")
	default:
		return nil, wrap(err, "write")
	}
}

// runTransaction runs ops with TransactWriteItems. A cancellation caused by
// a failed condition, or by a conflicting transaction, is reported as
// ErrConditionFailed so that apply re-reads and decides.
func (r *Records) runTransaction(ctx context.Context, ops []op) error {
	items := make([]types.TransactWriteItem, len(ops))
	for i, o := range ops {
		items[i] = types.TransactWriteItem{Put: o.put, Update: o.update, Delete: o.del}
	}
	_, err := r.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		return nil
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) && retryableCancel(tce) {
		return wrapAs(store.ErrConditionFailed, err, "transaction cancelled")
	}
	var tconflict *types.TransactionConflictException
	if errors.As(err, &tconflict) {
		return wrapAs(store.ErrConditionFailed, err, "transaction conflict")
	}
	return wrap(err, "transaction")
}

// retryableCancel reports whether every reason for a cancellation is a
// failed condition or a conflict (or no reason was given, as some
// emulators do); anything else (validation, throttling) is a real error.
func retryableCancel(tce *types.TransactionCanceledException) bool {
	for _, reason := range tce.CancellationReasons {
		switch aws.ToString(reason.Code) {
		case "", "None", "ConditionalCheckFailed", "TransactionConflict":
		default:
			return false
		}
	}
	return true
}

// readSnapshots reads the current items under keys into snaps (nil: absent)
// with strongly consistent BatchGetItem calls.
func (r *Records) readSnapshots(ctx context.Context, keys []store.Key, snaps snapshots) error {
	seen := map[store.Key]bool{}
	var reqKeys []item
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			reqKeys = append(reqKeys, keyItem(k))
			snaps[k] = nil
		}
	}
	if len(reqKeys) == 1 {
		it, err := r.read(ctx, keys[0])
		snaps[keys[0]] = it
		return err
	}
	for len(reqKeys) > 0 {
		// BatchGetItem takes at most 100 keys; Transact never has more.
		n := min(len(reqKeys), 100)
		req := map[string]types.KeysAndAttributes{r.table: {Keys: reqKeys[:n], ConsistentRead: aws.Bool(true)}}
		reqKeys = reqKeys[n:]
		for attempt := 1; len(req) > 0; attempt++ {
			out, err := r.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return wrap(err, "dynamodb batch get")
			}
			for _, it := range out.Responses[r.table] {
				pk, _ := it[attrPK].(*types.AttributeValueMemberS)
				sk, _ := it[attrSK].(*types.AttributeValueMemberS)
				if pk != nil && sk != nil {
					snaps[store.Key{PK: pk.Value, SK: sk.Value}] = it
				}
			}
			req = out.UnprocessedKeys
			if len(req) > 0 {
				if err := sleep(ctx, backoff(attempt)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
