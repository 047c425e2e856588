// Package objects is the ledger export's bucket in Amazon S3
// (export.Bucket), apart so that what only reads the export's lines (the
// CLI) does not link the S3 client.
package objects

import (
	"bytes"
	"context"
	"errors"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/fluidbox/fluidbox/shared/export"
)

// S3 is an export.Bucket in Amazon S3. Objects are created with If-None-Match: *,
// so S3 itself refuses a second object at a key (412 PreconditionFailed);
// the bucket's default encryption applies.
type S3 struct {
	client *s3.Client
	bucket string
}

// NewS3 returns the bucket named bucket, reached through client.
func NewS3(client *s3.Client, bucket string) *S3 {
	return &S3{client: client, bucket: bucket}
}

// Create writes body at key unless an object is there.
func (b *S3) Create(ctx context.Context, key string, body []byte) (bool, error) {
	_, err := b.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:      aws.String(b.bucket),
		Key:         aws.String(key),
		Body:        bytes.NewReader(body),
		IfNoneMatch: aws.String("*"),
		ContentType: aws.String("application/x-ndjson"),
	})
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "PreconditionFailed" {
		return false, nil
	}
	return err == nil, err
}

// Get reads the object at key.
func (b *S3) Get(ctx context.Context, key string) ([]byte, error) {
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key)})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(io.LimitReader(out.Body, export.MaxObjectBytes+maxItem))
}

// maxItem bounds one event's line: a DynamoDB item is at most 400 KB.
const maxItem = 400 << 10
