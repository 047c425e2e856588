package seal

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/smithy-go"
)

// KMS seals with AWS KMS Encrypt/Decrypt under a symmetric key, passing the Context as
// the EncryptionContext. KMS authenticates the context, so a value sealed for one
// connection or generation cannot be opened for another.
type KMS struct {
	client *kms.Client
	keyID  string
}

// NewKMS returns a KMS sealer using keyID (key id, ARN or alias). The client carries the
// caller's retry and timeout policy; Seal and Open also honour ctx.
func NewKMS(client *kms.Client, keyID string) *KMS {
	return &KMS{client: client, keyID: keyID}
}

// Seal encrypts plaintext for c.
func (k *KMS) Seal(ctx context.Context, plaintext []byte, c Context) ([]byte, error) {
	if err := k.check(c); err != nil {
		return nil, err
	}
	// Checked here and not left to KMS: some KMS implementations (local-kms) echo an
	// oversized plaintext back in their validation message.
	if err := checkPlaintext(plaintext); err != nil {
		return nil, err
	}
	out, err := k.client.Encrypt(ctx, &kms.EncryptInput{
		KeyId:             aws.String(k.keyID),
		Plaintext:         plaintext,
		EncryptionContext: c.encryptionContext(),
	})
	if err != nil {
		return nil, kmsError("Encrypt", err)
	}
	if len(out.CiphertextBlob) == 0 {
		return nil, &KMSError{Op: "Encrypt", Code: "EmptyCiphertext"}
	}
	return out.CiphertextBlob, nil
}

// Open decrypts sealed for c. The key id is passed explicitly so that a ciphertext
// produced under any other key is refused rather than decrypted with that key.
func (k *KMS) Open(ctx context.Context, sealed []byte, c Context) ([]byte, error) {
	if err := k.check(c); err != nil {
		return nil, err
	}
	if len(sealed) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrMalformed)
	}
	out, err := k.client.Decrypt(ctx, &kms.DecryptInput{
		KeyId:             aws.String(k.keyID),
		CiphertextBlob:    sealed,
		EncryptionContext: c.encryptionContext(),
	})
	if err != nil {
		return nil, kmsError("Decrypt", err)
	}
	return out.Plaintext, nil
}

func (k *KMS) check(c Context) error {
	if k == nil || k.client == nil || k.keyID == "" {
		return errors.New("seal: KMS sealer not configured")
	}
	return c.Validate()
}

// KMSError is a failed KMS call. Its text holds only the operation and the KMS error code
// (or a network-level reason), never request or response bodies. Kind, when set, is
// ErrContextMismatch or ErrUnavailable.
type KMSError struct {
	Op   string // "Encrypt" or "Decrypt"
	Code string // KMS error code, e.g. "InvalidCiphertextException"; empty for transport failures
	Kind error  // ErrContextMismatch, ErrUnavailable or nil
	Err  error  // the SDK error, for errors.As on SDK types
}

func (e *KMSError) Error() string {
	s := "seal: kms " + e.Op + ": "
	switch {
	case e.Code != "":
		s += e.Code
	case errors.Is(e.Err, context.DeadlineExceeded):
		s += "unavailable: deadline exceeded"
	case errors.Is(e.Err, context.Canceled):
		s += "unavailable: canceled"
	default:
		s += "unavailable"
		var op *net.OpError
		if errors.As(e.Err, &op) {
			// A net.OpError names the endpoint and the socket failure; it carries no
			// request data.
			s += ": " + op.Error()
		}
	}
	return s
}

// Unwrap exposes the kind sentinel and the SDK error.
func (e *KMSError) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// kmsError classifies an SDK error. Anything that is not an answer from KMS (no API error
// code: connection refused, timeout, unreadable response) counts as unavailable.
func kmsError(op string, err error) error {
	e := &KMSError{Op: op, Err: err}
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) && (status.HTTPStatusCode() >= 500 || status.HTTPStatusCode() == 429) {
		e.Kind = ErrUnavailable
	}
	var api smithy.APIError
	if !errors.As(err, &api) {
		e.Kind = ErrUnavailable
		return e
	}
	e.Code = api.ErrorCode()
	switch e.Code {
	case "InvalidCiphertextException", "IncorrectKeyException":
		e.Kind = ErrContextMismatch
	case "KMSInternalException", "DependencyTimeoutException", "KeyUnavailableException",
		"ThrottlingException", "ServiceUnavailableException", "InternalFailure":
		e.Kind = ErrUnavailable
	}
	return e
}
