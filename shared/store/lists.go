package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// Listings of runs, policies and trigger configurations go through gsi1,
// newest first, one bounded page per call: a page is at most MaxPage items
// and at most maxRounds Query calls, so no listing reads the whole table in
// one response however large it grows. Each listed item is written once and
// never updated, so a listing costs its partition of gsi1 one write per
// item in its life (a run's head, updated on every event, is not indexed:
// its listing item is, and the page reads the heads it names).
//
// Positions are an item's gsi1 sort key (its creation time, '#', its id),
// unique and totally ordered; a page's Next is the position of the last
// item it evaluated, and the following page starts strictly below it.

// The gsi1 partitions of the listings.
const (
	runIndex     = "RUN"
	policyIndex  = "POLICY"
	triggerIndex = "TRIGGER"
)

// MaxPage bounds a page of a listing (and the keys of one BatchGetItem).
const MaxPage = 100

// maxRounds bounds the Query calls behind one filtered page: a filter that
// matches rarely ends a page short, with Next, rather than read on.
const maxRounds = 4

// ListQuery selects one page of a listing.
type ListQuery struct {
	// Limit is the most items the page holds (1..MaxPage).
	Limit int
	// Cursor is an earlier page's Next: the page starts below it.
	Cursor string
	// CreatedAfter and CreatedBefore, when set, bound the creation time
	// (inclusive, to the second).
	CreatedAfter, CreatedBefore time.Time
}

// RunFilter narrows a listing of runs. Empty fields match everything.
type RunFilter struct {
	ListQuery
	Status     vocab.RunStatus
	Trigger    string
	Repository string
}

// RunPage is one page of runs, newest first.
type RunPage struct {
	Runs []Head
	// Next is the position to continue from; "" on the last page.
	Next string
}

// runListing is a run's listing item, RUN#<id>/LISTING, written with the
// head and never changed: what a listing filters by, besides the status.
type runListing struct {
	RunID      string `dynamodbav:"run_id"`
	Trigger    string `dynamodbav:"trigger"`
	Repository string `dynamodbav:"repository,omitempty"`
	CreatedAt  string `dynamodbav:"created_at"`
	GSI1PK     string `dynamodbav:"gsi1pk"`
	GSI1SK     string `dynamodbav:"gsi1sk"`
}

const listingSK = "LISTING"

func runListingItem(h Head) (map[string]types.AttributeValue, error) {
	l := runListing{RunID: h.RunID, Trigger: h.Trigger, CreatedAt: h.CreatedAt, GSI1PK: runIndex, GSI1SK: h.CreatedAt + "#" + h.RunID}
	if h.GitHub != nil {
		l.Repository = strings.ToLower(h.GitHub.Repository)
	}
	return item(runPK(h.RunID), listingSK, l)
}

// ListRuns returns one page of runs, newest first. The status is read from
// each run's head (consistently); the other filters from its listing item
// (through the index, which is eventually consistent: a run created a
// moment ago may be missing from the first page).
func (s *Store) ListRuns(ctx context.Context, f RunFilter) (RunPage, error) {
	var filter []string
	names := map[string]string{}
	values := map[string]types.AttributeValue{}
	if f.Trigger != "" {
		filter = append(filter, "#trigger = :trigger")
		names["#trigger"] = "trigger"
		values[":trigger"] = &types.AttributeValueMemberS{Value: f.Trigger}
	}
	if f.Repository != "" {
		filter = append(filter, "#repository = :repository")
		names["#repository"] = "repository"
		values[":repository"] = &types.AttributeValueMemberS{Value: strings.ToLower(f.Repository)}
	}
	var page RunPage
	at := func(p string) (string, string) { return runPK(idOf(p)), listingSK }
	next, err := s.listPage(ctx, "list runs", runIndex, f.ListQuery, at, strings.Join(filter, " AND "), names, values, func(avs []map[string]types.AttributeValue) (int, error) {
		keys := make([]string, 0, len(avs))
		for _, av := range avs {
			var l runListing
			if err := attributevalue.UnmarshalMap(av, &l); err != nil {
				return 0, fmt.Errorf("store: decode run listing: %w", err)
			}
			keys = append(keys, runPK(l.RunID))
		}
		heads, err := batchGet[Head](ctx, s, "list runs", keys, "HEAD")
		if err != nil {
			return 0, err
		}
		n := 0
		for _, h := range heads {
			if f.Status == "" || h.Status == f.Status {
				page.Runs = append(page.Runs, h)
				n++
			}
		}
		return n, nil
	})
	page.Next = next
	return page, err
}

// PolicySummary is a policy in a listing: its first version's creation and
// its latest version.
type PolicySummary struct {
	CreatedAt string
	Latest    PolicyVersion
}

// PolicyPage is one page of policies, newest first.
type PolicyPage struct {
	Policies []PolicySummary
	Next     string
}

// ListPolicies returns one page of policies, newest first, each with its
// latest version (read consistently).
func (s *Store) ListPolicies(ctx context.Context, q ListQuery) (PolicyPage, error) {
	var page PolicyPage
	at := func(p string) (string, string) { return policyPK(idOf(p)), versionSK(1) }
	next, err := s.listPage(ctx, "list policies", policyIndex, q, at, "", nil, nil, func(avs []map[string]types.AttributeValue) (int, error) {
		keys := make([]string, 0, len(avs))
		created := map[string]string{}
		for _, av := range avs {
			var v PolicyVersion
			if err := attributevalue.UnmarshalMap(av, &v); err != nil {
				return 0, fmt.Errorf("store: decode policy listing: %w", err)
			}
			keys = append(keys, policyPK(v.PolicyID))
			created[v.PolicyID] = v.CreatedAt
		}
		latest, err := batchGet[PolicyVersion](ctx, s, "list policies", keys, "LATEST")
		if err != nil {
			return 0, err
		}
		for _, v := range latest {
			page.Policies = append(page.Policies, PolicySummary{CreatedAt: created[v.PolicyID], Latest: v})
		}
		return len(latest), nil
	})
	page.Next = next
	return page, err
}

// TriggerPage is one page of trigger configurations, newest first.
type TriggerPage struct {
	Triggers []Trigger
	Next     string
}

// ListTriggerPage returns one page of trigger configurations, newest first.
func (s *Store) ListTriggerPage(ctx context.Context, q ListQuery) (TriggerPage, error) {
	var page TriggerPage
	at := func(p string) (string, string) { return triggerPK(idOf(p)), "HEAD" }
	next, err := s.listPage(ctx, "list triggers", triggerIndex, q, at, "", nil, nil, func(avs []map[string]types.AttributeValue) (int, error) {
		for _, av := range avs {
			var t Trigger
			if err := attributevalue.UnmarshalMap(av, &t); err != nil {
				return 0, fmt.Errorf("store: decode trigger: %w", err)
			}
			page.Triggers = append(page.Triggers, t)
		}
		return len(avs), nil
	})
	page.Next = next
	return page, err
}

// listPage queries partition pk of gsi1 newest first, from q's cursor and
// within its creation bounds, filtered by filter, handing each Query's
// matching items to take, which keeps some and says how many. It stops
// once q.Limit items are kept, the partition ends, or after maxRounds
// queries, and returns the position to continue from ("" at the end).
// Each Query evaluates at most the items still wanted, so a page never
// holds more than q.Limit. at gives the table key of the item at a
// position, which a cursor resumes from as the ExclusiveStartKey (a key
// condition on the cursor would do, but minidyn counts the items a key
// condition excludes against Limit when a filter is set).
func (s *Store) listPage(ctx context.Context, op, pk string, q ListQuery, at func(position string) (pk, sk string), filter string, names map[string]string, values map[string]types.AttributeValue, take func([]map[string]types.AttributeValue) (int, error)) (string, error) {
	if q.Limit < 1 || q.Limit > MaxPage {
		return "", fmt.Errorf("store: %s: limit %d outside 1..%d", op, q.Limit, MaxPage)
	}
	in, ok := s.pageQuery(pk, q, at, filter, names, values)
	if !ok {
		return "", nil // nothing below the cursor is in bounds
	}
	kept := 0
	for range maxRounds {
		in.Limit = aws.Int32(int32(q.Limit - kept))
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return "", translate(op, err)
		}
		if len(out.Items) > 0 {
			n, err := take(out.Items)
			if err != nil {
				return "", err
			}
			kept += n
		}
		if len(out.LastEvaluatedKey) == 0 {
			return "", nil
		}
		if sortKey(out.LastEvaluatedKey) == "" {
			return "", fmt.Errorf("store: %s: a page ended without a position", op)
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
		if kept >= q.Limit {
			break
		}
	}
	return sortKey(in.ExclusiveStartKey), nil
}

// pageQuery is listPage's Query of partition pk newest first, within q's
// creation bounds, from q's cursor; ok is false when nothing below the
// cursor is in bounds.
func (s *Store) pageQuery(pk string, q ListQuery, at func(position string) (pk, sk string), filter string, names map[string]string, values map[string]types.AttributeValue) (in *dynamodb.QueryInput, ok bool) {
	// Sort keys are "<RFC 3339 time>#<id>": "#" sorts below every id
	// character and "~" above, so these bounds are inclusive of their
	// instant.
	var lo, hi string
	if !q.CreatedAfter.IsZero() {
		lo = FormatTime(q.CreatedAfter) + "#"
	}
	if !q.CreatedBefore.IsZero() {
		hi = FormatTime(q.CreatedBefore) + "#~"
	}
	cursor := q.Cursor
	switch {
	case cursor == "":
	case lo != "" && cursor <= lo:
		return nil, false
	case hi != "" && cursor > hi:
		cursor = "" // everything in bounds is below the cursor
	}
	vals := map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: pk}}
	for k, v := range values {
		vals[k] = v
	}
	in = &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		IndexName:                 aws.String(gsi1),
		KeyConditionExpression:    aws.String(sortBounds(lo, hi, vals)),
		ExpressionAttributeValues: vals,
		ScanIndexForward:          aws.Bool(false),
	}
	if filter != "" {
		in.FilterExpression = aws.String(filter)
	}
	if len(names) > 0 {
		in.ExpressionAttributeNames = names
	}
	if cursor != "" {
		ipk, isk := at(cursor)
		in.ExclusiveStartKey = keyOf(ipk, isk)
		in.ExclusiveStartKey[attrGSI1PK] = &types.AttributeValueMemberS{Value: pk}
		in.ExclusiveStartKey[attrGSI1SK] = &types.AttributeValueMemberS{Value: cursor}
	}
	return in, true
}

// sortBounds is the key condition of a gsi1 partition between lo and hi
// (either may be ""), their values put in vals.
func sortBounds(lo, hi string, vals map[string]types.AttributeValue) string {
	if lo != "" {
		vals[":lo"] = &types.AttributeValueMemberS{Value: lo}
	}
	if hi != "" {
		vals[":hi"] = &types.AttributeValueMemberS{Value: hi}
	}
	switch {
	case lo != "" && hi != "":
		return "gsi1pk = :pk AND gsi1sk BETWEEN :lo AND :hi"
	case lo != "":
		return "gsi1pk = :pk AND gsi1sk >= :lo"
	case hi != "":
		return "gsi1pk = :pk AND gsi1sk <= :hi"
	}
	return "gsi1pk = :pk"
}

// idOf is the id in a listing position ("<time>#<id>").
func idOf(position string) string {
	_, id, _ := strings.Cut(position, "#")
	return id
}

func sortKey(av map[string]types.AttributeValue) string {
	if s, ok := av[attrGSI1SK].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// batchGet reads the items pk/sk for each pk in pks (at most MaxPage), with
// consistent reads, and returns those that exist in the order of pks. Keys
// DynamoDB leaves unprocessed are asked again, a bounded number of times.
func batchGet[T any](ctx context.Context, s *Store, op string, pks []string, sk string) ([]T, error) {
	if len(pks) == 0 {
		return nil, nil
	}
	if len(pks) > MaxPage {
		return nil, fmt.Errorf("store: %s: %d keys in one batch", op, len(pks))
	}
	keys := make([]map[string]types.AttributeValue, 0, len(pks))
	seen := map[string]bool{}
	for _, pk := range pks {
		if !seen[pk] {
			seen[pk] = true
			keys = append(keys, keyOf(pk, sk))
		}
	}
	got := map[string]map[string]types.AttributeValue{}
	req := map[string]types.KeysAndAttributes{s.table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
	for attempt := 0; len(req) > 0; attempt++ {
		if attempt == sdkAttempts {
			return nil, fmt.Errorf("store: %s: keys left unprocessed: %w", op, ErrUnavailable)
		}
		if attempt > 0 {
			t := time.NewTimer(time.Duration(attempt) * txBackoffMin)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, translate(op, ctx.Err())
			case <-t.C:
			}
		}
		out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return nil, translate(op, err)
		}
		for _, av := range out.Responses[s.table] {
			if p, ok := av[attrPK].(*types.AttributeValueMemberS); ok {
				got[p.Value] = av
			}
		}
		req = out.UnprocessedKeys
	}
	var res []T
	for _, pk := range pks {
		av, ok := got[pk]
		if !ok {
			continue
		}
		delete(got, pk)
		var v T
		if err := attributevalue.UnmarshalMap(av, &v); err != nil {
			return nil, fmt.Errorf("store: decode %s/%s: %w", pk, sk, err)
		}
		res = append(res, v)
	}
	return res, nil
}
