package store

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// PolicyVersion is one immutable version of a policy.
type PolicyVersion struct {
	PolicyID  string `dynamodbav:"policy_id"`
	Version   int    `dynamodbav:"version"`
	Name      string `dynamodbav:"name"`
	Digest    string `dynamodbav:"digest"`
	Document  string `dynamodbav:"document"`
	CreatedAt string `dynamodbav:"created_at"`
}

// policyListing is a policy's first version as the listing indexes it.
type policyListing struct {
	PolicyVersion
	GSI1PK string `dynamodbav:"gsi1pk"`
	GSI1SK string `dynamodbav:"gsi1sk"`
}

func policyPK(id string) string { return "POL#" + id }

func versionSK(n int) string { return fmt.Sprintf("V#%010d", n) }

// PutPolicyVersion writes version v.Version of a policy and moves the
// policy's latest pointer to it. Version 1 creates the policy; version n>1
// requires the latest to be n-1, so two concurrent updates cannot both win
// (the loser gets ErrConditionFailed). Versions are never overwritten.
func (s *Store) PutPolicyVersion(ctx context.Context, v PolicyVersion) error {
	pk := policyPK(v.PolicyID)
	var first any = v
	if v.Version == 1 {
		// The first version, never rewritten, is the policy's entry in
		// the listing (ListPolicies).
		first = policyListing{PolicyVersion: v, GSI1PK: policyIndex, GSI1SK: v.CreatedAt + "#" + v.PolicyID}
	}
	ver, err := item(pk, versionSK(v.Version), first)
	if err != nil {
		return err
	}
	latest, err := item(pk, "LATEST", v)
	if err != nil {
		return err
	}
	latestPut := &types.Put{TableName: aws.String(s.table), Item: latest}
	if v.Version == 1 {
		latestPut.ConditionExpression = aws.String("attribute_not_exists(pk)")
	} else {
		latestPut.ConditionExpression = aws.String("version = :prev")
		latestPut.ExpressionAttributeValues = map[string]types.AttributeValue{":prev": num(int64(v.Version - 1))}
	}
	err = s.transactWrite(ctx, []types.TransactWriteItem{
		putNew(s.table, ver),
		{Put: latestPut},
	})
	// Only a failed condition means another version won; a cancellation
	// for anything else (conflict, throttling past the retries) is not a
	// "policy changed".
	if conditionFailed(err) {
		return fmt.Errorf("store: policy %s v%d: %w", v.PolicyID, v.Version, ErrConditionFailed)
	}
	return translate("put policy "+v.PolicyID, err)
}

// GetPolicy reads a policy's version n, or its latest version when n is 0.
func (s *Store) GetPolicy(ctx context.Context, id string, n int) (PolicyVersion, error) {
	sk := "LATEST"
	if n > 0 {
		sk = versionSK(n)
	}
	var v PolicyVersion
	err := s.get(ctx, policyPK(id), sk, &v)
	return v, err
}
