package infra

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
)

// grant is one Allow statement reduced to what it allows: its actions
// (lower case), resources and LeadingKeys condition.
type grant struct {
	actions, resources, leadingKeys []string
}

func (g grant) String() string {
	return fmt.Sprintf("%v on %v leading keys %v", g.actions, g.resources, g.leadingKeys)
}

func grantsOf(t *testing.T, l *loaded, fn string) []grant {
	t.Helper()
	r := resources(l.doc, "AWS::Serverless::Function")[fn]
	if r == nil {
		t.Fatalf("template has no %s", fn)
	}
	sts, errs := functionStatements(fn, r)
	for _, err := range errs {
		t.Error(err)
	}
	var out []grant
	for _, st := range sts {
		if st.fields["Effect"] != "Allow" {
			continue
		}
		g := grant{resources: asStrings(st.fields["Resource"])}
		for _, a := range asStrings(st.fields["Action"]) {
			g.actions = append(g.actions, strings.ToLower(a))
		}
		sort.Strings(g.actions)
		if c, ok := st.fields["Condition"]; ok {
			g.leadingKeys = asStrings(dig(asMap(c), "ForAllValues:StringLike", "dynamodb:LeadingKeys"))
			if fn == "ExportFunction" && (len(g.leadingKeys) == 0 || len(asMap(c)) != 1) {
				t.Errorf("%s: condition %v, want only ForAllValues:StringLike on dynamodb:LeadingKeys", fn, c)
			}
		}
		out = append(out, g)
	}
	return out
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// TestExportPrivileges: the export function may read the table's stream,
// Query runs' partitions, read and move the export checkpoints (their own
// partitions), create and read objects under ledger/ in the ledger bucket
// and send to its own failure queue: each statement is one of these, and
// nothing else of any service. No other function touches the bucket.
func TestExportPrivileges(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	allowed := []grant{
		{[]string{"dynamodb:describestream", "dynamodb:getrecords", "dynamodb:getsharditerator", "dynamodb:liststreams"}, []string{"SUB:${Table.Arn}/stream/*"}, nil},
		{[]string{"dynamodb:query"}, []string{"GETATT:Table.Arn"}, []string{"RUN#*"}},
		{[]string{"dynamodb:getitem", "dynamodb:updateitem"}, []string{"GETATT:Table.Arn"}, []string{"EXPORT#*"}},
		{[]string{"s3:getobject", "s3:putobject"}, []string{"SUB:${LedgerBucket.Arn}/ledger/*"}, nil},
		{[]string{"sqs:sendmessage"}, []string{"GETATT:ExportFailureQueue.Arn"}, nil},
	}
	got := grantsOf(t, l, "ExportFunction")
	for _, g := range got {
		if !slices.ContainsFunc(allowed, func(a grant) bool {
			return slices.Equal(a.actions, g.actions) && slices.Equal(a.resources, g.resources) && slices.Equal(a.leadingKeys, g.leadingKeys)
		}) {
			t.Errorf("ExportFunction holds %s, which is not one of its grants", g)
		}
	}
	if len(got) != len(allowed) {
		t.Errorf("ExportFunction has %d Allow statements, want %d", len(got), len(allowed))
	}
	for _, fn := range sortedKeys(resources(l.doc, "AWS::Serverless::Function")) {
		if fn == "ExportFunction" {
			continue
		}
		for _, g := range grantsOf(t, l, fn) {
			for _, r := range g.resources {
				if strings.Contains(r, "LedgerBucket") || strings.HasPrefix(r, "arn:aws:s3") {
					t.Errorf("%s holds %s: only ExportFunction touches the ledger bucket", fn, g)
				}
			}
			for _, k := range g.leadingKeys {
				if strings.HasPrefix(k, "EXPORT#") {
					t.Errorf("%s holds %s: only ExportFunction moves export checkpoints", fn, g)
				}
			}
		}
	}
}

// TestLedgerBucket: the bucket is encrypted, blocks every kind of public
// access, takes no ACLs, keeps versions, outlives the stack, and its
// policy refuses every request not made over TLS, to the bucket and to
// its objects.
func TestLedgerBucket(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	b := resources(l.doc, "AWS::S3::Bucket")["LedgerBucket"]
	if b == nil {
		t.Fatal("template has no LedgerBucket")
	}
	if b["DeletionPolicy"] != "Retain" || b["UpdateReplacePolicy"] != "Retain" {
		t.Errorf("LedgerBucket: DeletionPolicy %v, UpdateReplacePolicy %v; want Retain: it is an audit record", b["DeletionPolicy"], b["UpdateReplacePolicy"])
	}
	p := props(b)
	rules, _ := dig(p, "BucketEncryption", "ServerSideEncryptionConfiguration").([]any)
	if len(rules) == 0 || dig(asMap(rules[0]), "ServerSideEncryptionByDefault", "SSEAlgorithm") == nil {
		t.Errorf("LedgerBucket has no default encryption: %v", p["BucketEncryption"])
	}
	for _, k := range []string{"BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"} {
		if dig(p, "PublicAccessBlockConfiguration", k) != true {
			t.Errorf("LedgerBucket: PublicAccessBlockConfiguration.%s is not true", k)
		}
	}
	if own, _ := dig(p, "OwnershipControls", "Rules").([]any); len(own) != 1 || asMap(own[0])["ObjectOwnership"] != "BucketOwnerEnforced" {
		t.Errorf("LedgerBucket: OwnershipControls %v, want BucketOwnerEnforced (no ACLs)", p["OwnershipControls"])
	}
	if dig(p, "VersioningConfiguration", "Status") != "Enabled" {
		t.Error("LedgerBucket is not versioned")
	}
	tls := false
	for _, pol := range resources(l.doc, "AWS::S3::BucketPolicy") {
		if props(pol)["Bucket"] != "REF:LedgerBucket" {
			continue
		}
		sts, err := statementsOf("LedgerBucketPolicy", props(pol)["PolicyDocument"])
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range sts {
			f := st.fields
			res := asStrings(f["Resource"])
			if f["Effect"] == "Deny" && f["Principal"] == "*" && slices.Equal(asStrings(f["Action"]), []string{"s3:*"}) &&
				slices.Contains(res, "GETATT:LedgerBucket.Arn") && slices.Contains(res, "SUB:${LedgerBucket.Arn}/*") &&
				dig(asMap(f["Condition"]), "Bool", "aws:SecureTransport") == "false" {
				tls = true
			}
		}
	}
	if !tls {
		t.Error("no bucket policy of LedgerBucket denies every request without TLS (aws:SecureTransport false) to the bucket and its objects")
	}
}

// TestExportStream: the export reads only the inserts of numbered events,
// retries a failing run from its first record, halves a batch that fails
// outright, names a batch it gives up on in an encrypted, watched queue
// with time left to act on it; and the table's stream has at most two
// readers, as many as DynamoDB Streams serve a shard without throttling.
func TestExportStream(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	var p map[string]any
	readers := 0
	for _, m := range resources(l.doc, "AWS::Lambda::EventSourceMapping") {
		if props(m)["EventSourceArn"] == "GETATT:Table.StreamArn" {
			readers++
		}
		if props(m)["FunctionName"] == "REF:ExportFunction" {
			p = props(m)
		}
	}
	if readers > 2 {
		t.Errorf("%d mappings read the table's stream; DynamoDB Streams throttle past two readers a shard", readers)
	}
	if p == nil {
		t.Fatal("no mapping feeds ExportFunction")
	}
	filters, _ := dig(p, "FilterCriteria", "Filters").([]any)
	want := `{"eventName":["INSERT"],"dynamodb":{"Keys":{"sk":{"S":[{"prefix":"EV#"}]},"pk":{"S":[{"prefix":"RUN#"}]}}}}`
	if len(filters) != 1 || asMap(filters[0])["Pattern"] != want {
		t.Errorf("ExportStream filters %v, want the inserts of numbered events only, %s", filters, want)
	}
	if !slices.Equal(asStrings(p["FunctionResponseTypes"]), []string{"ReportBatchItemFailures"}) {
		t.Errorf("FunctionResponseTypes = %v, want ReportBatchItemFailures (a failing run is retried from its first record)", p["FunctionResponseTypes"])
	}
	if p["BisectBatchOnFunctionError"] != true {
		t.Error("ExportStream does not bisect a failing batch")
	}
	if p["StartingPosition"] != "TRIM_HORIZON" {
		t.Errorf("StartingPosition = %v, want TRIM_HORIZON: every event still on the stream", p["StartingPosition"])
	}
	if n, ok := num(p["MaximumRetryAttempts"]); !ok || n < 1 {
		t.Errorf("MaximumRetryAttempts = %v, want a bound", p["MaximumRetryAttempts"])
	}
	if age, ok := num(p["MaximumRecordAgeInSeconds"]); !ok || age < 60 || age > streamRetentionSeconds/2 {
		t.Errorf("MaximumRecordAgeInSeconds = %v, want at most half the stream's 24 h", p["MaximumRecordAgeInSeconds"])
	}
	if id, q := queueOf(l, dig(p, "DestinationConfig", "OnFailure", "Destination")); q == nil || id != "ExportFailureQueue" {
		t.Errorf("ExportStream's on-failure destination = %v, want ExportFailureQueue", dig(p, "DestinationConfig", "OnFailure", "Destination"))
	}
	vars, _ := dig(props(resources(l.doc, "AWS::Serverless::Function")["ExportFunction"]), "Environment", "Variables").(map[string]any)
	if vars["FLUIDBOX_LEDGER_BUCKET"] != "REF:LedgerBucket" {
		t.Errorf("ExportFunction's FLUIDBOX_LEDGER_BUCKET = %v, want !Ref LedgerBucket", vars["FLUIDBOX_LEDGER_BUCKET"])
	}
}
