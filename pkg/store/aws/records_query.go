package awsstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// prefixEnd is above every string that starts with a given prefix (bar ones
// continuing with U+10FFFF itself), in DynamoDB's UTF-8 byte order.
const prefixEnd = "\U0010FFFF"

// keyCondition is a query's key condition, or empty when no sort key can
// match (so no request is needed).
type keyCondition struct {
	expr      string
	empty     bool
	dropAfter bool // the bound is inclusive (BETWEEN): skip the After item
}

// buildKeyCondition renders PK, SKPrefix and the exclusive After cursor.
// DynamoDB has no "begins_with AND >" on one key, so a prefix with a cursor
// inside it becomes BETWEEN the cursor and the prefix's end (or its start,
// descending) and the cursor's own item is dropped from the results.
func buildKeyCondition(e *expr, pkAttr, skAttr string, q store.Query) keyCondition {
	kc := keyCondition{expr: e.name(pkAttr) + " = " + e.value(str(q.PK))}
	p, a := q.SKPrefix, q.After
	var sk string
	if p != "" || a != "" {
		sk = e.name(skAttr)
	}
	switch {
	case a == "" && p == "":
	case a == "":
		kc.expr += " AND begins_with(" + sk + ", " + e.value(str(p)) + ")"
	case p == "" && !q.Desc:
		kc.expr += " AND " + sk + " > " + e.value(str(a))
	case p == "":
		kc.expr += " AND " + sk + " < " + e.value(str(a))
	case strings.HasPrefix(a, p):
		kc.dropAfter = true
		if q.Desc {
			kc.expr += " AND " + sk + " BETWEEN " + e.value(str(p)) + " AND " + e.value(str(a))
		} else {
			kc.expr += " AND " + sk + " BETWEEN " + e.value(str(a)) + " AND " + e.value(str(p+prefixEnd))
		}
	case (a < p) != q.Desc:
		// The cursor lies before every prefixed key in query order.
		kc.expr += " AND begins_with(" + sk + ", " + e.value(str(p)) + ")"
	default:
		// The cursor lies after every prefixed key in query order.
		kc.empty = true
	}
	return kc
}

// Query reads one page of a partition in sort-key order. It pages through
// DynamoDB until it has Limit live records and knows whether more follow:
// expired items and the cursor's own item are skipped client-side (a
// keys-only index has no expiry to skip on).
func (r *Records) Query(ctx context.Context, q store.Query) (store.Page, error) {
	if q.Limit <= 0 {
		return store.Page{}, fmt.Errorf("dynamodb query %s %s: limit %d must be > 0", q.Index, q.PK, q.Limit)
	}
	pkAttr, skAttr, index, err := indexAttrs(q.Index)
	if err != nil {
		return store.Page{}, err
	}
	e := newExpr()
	kc := buildKeyCondition(e, pkAttr, skAttr, q)
	if kc.empty {
		return store.Page{}, nil
	}
	in := &dynamodb.QueryInput{
		TableName:                 &r.table,
		IndexName:                 index,
		KeyConditionExpression:    &kc.expr,
		ExpressionAttributeNames:  e.Names(),
		ExpressionAttributeValues: e.Values(),
		ScanIndexForward:          aws.Bool(!q.Desc),
		ConsistentRead:            aws.Bool(index == nil), // GSIs are eventually consistent only
	}
	var page store.Page
	now := r.now()
	for {
		// One more than needed tells whether more follow; one more again
		// covers the cursor's item.
		in.Limit = aws.Int32(int32(min(q.Limit-len(page.Records)+2, 1000)))
		out, err := r.db.Query(ctx, in)
		if err != nil {
			return store.Page{}, wrap(err, "dynamodb query %s %s", q.Index, q.PK)
		}
		for _, it := range out.Items {
			sk, _ := it[skAttr].(*types.AttributeValueMemberS)
			keysOnly := q.Index.KeysOnly()
			if sk == nil || (kc.dropAfter && sk.Value == q.After) || !strings.HasPrefix(sk.Value, q.SKPrefix) || (!keysOnly && expired(it, now)) {
				continue
			}
			if len(page.Records) == q.Limit {
				page.More = true
				return page, nil
			}
			rec, err := decodeRecord(it)
			if err != nil {
				return store.Page{}, fmt.Errorf("dynamodb query %s %s: %w", q.Index, q.PK, err)
			}
			if keysOnly {
				// What the index projects, whatever an emulator returns.
				rec = rec.KeysIn(q.Index)
			}
			page.Records = append(page.Records, rec)
		}
		if len(out.LastEvaluatedKey) == 0 {
			return page, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// indexAttrs names the key attributes of an index and the IndexName to
// query (nil for the table).
func indexAttrs(ix store.Index) (pk, sk string, name *string, err error) {
	switch ix {
	case store.Table:
		return attrPK, attrSK, nil, nil
	case store.GSI1:
		return attrGSI1PK, attrGSI1SK, aws.String(string(store.GSI1)), nil
	case store.GSI2:
		return attrGSI2PK, attrGSI2SK, aws.String(string(store.GSI2)), nil
	}
	return "", "", nil, fmt.Errorf("dynamodb query: unknown index %q", ix)
}
