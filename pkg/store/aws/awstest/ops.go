package awstest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// Operations counts the AWS operations made through an aws.Config, at the
// SDK's own middleware stack (CountOperations adds a step to its
// APIOptions): every service, every client built from the config, the real
// requests. For DynamoDB it also sums the bytes of the items written and
// read (DynamoDB's item size: attribute names and values), which is what
// capacity units are billed on.
type Operations struct {
	mu     sync.Mutex
	counts map[string]int
	// DynamoDB capacity units as on-demand tables bill them: a write unit
	// per started KB of an item written, a read unit (strongly consistent)
	// per started 4 KB read.
	wcu, rcu int
	// inFlight are the operations begun and not yet ended, by name: an
	// operation is counted when it ends, so a caller waiting for quiet
	// must also see none under way (Idle).
	inFlight map[string]int
}

// CountOperations adds the counting step to cfg and returns the counter.
func CountOperations(cfg *aws.Config) *Operations {
	o := &Operations{counts: map[string]int{}, inFlight: map[string]int{}}
	cfg.APIOptions = append(cfg.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("sluiceCountOperations", o.handle), middleware.After)
	})
	return o
}

func (o *Operations) handle(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	op := awsmiddleware.GetServiceID(ctx) + " " + awsmiddleware.GetOperationName(ctx)
	o.mu.Lock()
	o.inFlight[op]++
	o.mu.Unlock()
	out, md, err := next.HandleInitialize(ctx, in)
	wcu, rcu := capacity(in.Parameters, out.Result)
	o.mu.Lock()
	o.inFlight[op]--
	o.counts[op]++
	o.wcu += wcu
	o.rcu += rcu
	o.mu.Unlock()
	return out, md, err
}

// Reset forgets what was counted.
func (o *Operations) Reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.counts)
	o.wcu, o.rcu = 0, 0
}

// Counts returns the operations counted so far: "Service Operation" → calls.
func (o *Operations) Counts() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.counts)
}

// Idle reports whether no operation is under way but a queue's receive: a
// worker's long poll waits by design (up to 20 s) and is always under way
// while the worker runs.
func (o *Operations) Idle() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for op, n := range o.inFlight {
		if n > 0 && op != "SQS ReceiveMessage" {
			return false
		}
	}
	return true
}

// Capacity returns the DynamoDB write and read units counted so far.
func (o *Operations) Capacity() (wcu, rcu int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.wcu, o.rcu
}

// String lists the counts, one "Service Operation n" per line, sorted.
func (o *Operations) String() string {
	counts := o.Counts()
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(&b, "%s %d\n", k, counts[k])
	}
	wcu, rcu := o.Capacity()
	fmt.Fprintf(&b, "DynamoDB WCU %d, RCU %d\n", wcu, rcu)
	return b.String()
}

// capacity is the DynamoDB units one operation uses, from its input (items
// written) and output (items read). A conditional write that fails still
// uses its units; an update is billed on the larger of the item before and
// after, which the counter takes as the attributes it sets (a lower bound).
func capacity(params, result any) (wcu, rcu int) {
	switch in := params.(type) {
	case *dynamodb.PutItemInput:
		wcu += writeUnits(in.Item)
	case *dynamodb.UpdateItemInput:
		wcu += max(1, writeUnits(in.Key)+len(aws.ToString(in.UpdateExpression))/1024)
	case *dynamodb.DeleteItemInput:
		wcu++
	case *dynamodb.BatchWriteItemInput:
		for _, reqs := range in.RequestItems {
			for _, r := range reqs {
				if r.PutRequest != nil {
					wcu += writeUnits(r.PutRequest.Item)
				} else {
					wcu++
				}
			}
		}
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range in.TransactItems {
			switch {
			case it.Put != nil:
				wcu += 2 * writeUnits(it.Put.Item) // transactions bill twice
			default:
				wcu += 2
			}
		}
	}
	switch out := result.(type) {
	case *dynamodb.GetItemOutput:
		rcu += max(1, readUnits(itemSize(out.Item)))
	case *dynamodb.QueryOutput:
		n := 0
		for _, it := range out.Items {
			n += itemSize(it)
		}
		rcu += max(1, readUnits(n))
	case *dynamodb.BatchGetItemOutput:
		for _, items := range out.Responses {
			for _, it := range items {
				rcu += max(1, readUnits(itemSize(it)))
			}
		}
	case *dynamodb.TransactGetItemsOutput:
		for _, r := range out.Responses {
			rcu += 2 * max(1, readUnits(itemSize(r.Item)))
		}
	}
	return wcu, rcu
}

func writeUnits(item map[string]ddbtypes.AttributeValue) int {
	return max(1, (itemSize(item)+1023)/1024)
}

func readUnits(size int) int { return (size + 4095) / 4096 }

// itemSize is DynamoDB's size of an item: each attribute's name plus its
// value (strings and binaries by length, numbers about their digits).
func itemSize(item map[string]ddbtypes.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v ddbtypes.AttributeValue) int {
	switch v := v.(type) {
	case *ddbtypes.AttributeValueMemberS:
		return len(v.Value)
	case *ddbtypes.AttributeValueMemberB:
		return len(v.Value)
	case *ddbtypes.AttributeValueMemberN:
		return (len(v.Value)+1)/2 + 1
	case *ddbtypes.AttributeValueMemberBOOL, *ddbtypes.AttributeValueMemberNULL:
		return 1
	case *ddbtypes.AttributeValueMemberM:
		return 3 + itemSize(v.Value)
	case *ddbtypes.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *ddbtypes.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *ddbtypes.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += (len(s)+1)/2 + 1
		}
		return n
	case *ddbtypes.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	}
	return 0
}

// IsWrite reports whether a counted operation ("Service Operation") writes
// or sends: what a request kind does whatever the timing (reads and
// receives also depend on polling and on how SQS groups messages).
func IsWrite(op string) bool {
	_, name, _ := strings.Cut(op, " ")
	for _, prefix := range []string{"Put", "Update", "Delete", "BatchWrite", "TransactWrite", "Send", "Publish", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload", "Copy", "Encrypt", "GenerateDataKey"} {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}
