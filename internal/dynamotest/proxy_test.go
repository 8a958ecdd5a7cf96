package dynamotest

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestMain(m *testing.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}

// The proxy plays DynamoDB's part for a repeated TransactWriteItems: a
// repeat sent while the first call still runs is told
// TransactionInProgressException, and one sent after it succeeded gets
// its answer; moto applies neither. (Before the proxy knew of calls in
// flight, the repeat sent meanwhile was passed on to moto, which ignores
// the token, and the item was added to twice.)
func TestARepeatedTransactionIsAppliedOnce(t *testing.T) {
	t.Parallel()
	p := NewProxy(t, Endpoint(t))
	table := CreateTable(t, p.URL)
	c := Client(t, p.URL)
	ctx := context.Background()
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}, "sk": &types.AttributeValueMemberS{Value: "k"}}
	// A token of this run's own: the front of the binary's moto (Start)
	// keeps every token it saw, as DynamoDB keeps one for ten minutes, and
	// a fixed one, seen again by -count=2's second run with another
	// table, is told IdempotentParameterMismatchException.
	in := &dynamodb.TransactWriteItemsInput{
		ClientRequestToken: aws.String(rand.Text()),
		TransactItems: []types.TransactWriteItem{{Update: &types.Update{
			TableName: &table, Key: key, UpdateExpression: aws.String("ADD n :one"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
		}}},
	}
	once := func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }
	var meanwhile error
	p.Before("TransactWriteItems", func() { _, meanwhile = c.TransactWriteItems(ctx, in, once) })
	if _, err := c.TransactWriteItems(ctx, in, once); err != nil {
		t.Fatal(err)
	}
	var running *types.TransactionInProgressException
	if !errors.As(meanwhile, &running) {
		t.Errorf("a repeat while the first call ran: %v, want TransactionInProgressException", meanwhile)
	}
	if _, err := c.TransactWriteItems(ctx, in, once); err != nil {
		t.Errorf("a repeat after the first call succeeded: %v, want its answer", err)
	}
	got, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := got.Item["n"].(*types.AttributeValueMemberN); n == nil || n.Value != "1" {
		t.Errorf("the item after one call and two repeats: %v, want n = 1", got.Item)
	}
}
