package seal_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/fluidbox/fluidbox/shared/seal"
)

// testSealer is the behaviour every Sealer must have, run against the KMS sealer (on
// local-kms) and the local AES-GCM sealer.
func testSealer(t *testing.T, s seal.Sealer) {
	ctx := context.Background()
	sc := seal.Context{ConnectionID: "con_abc", Generation: 3}
	plaintext := []byte(`{"type":"bearer","token":"canary-sealer"}`)

	sealed, err := s.Seal(ctx, plaintext, sc)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	if bytes.Contains(sealed, []byte("canary-sealer")) {
		t.Fatalf("sealed value contains the plaintext")
	}

	t.Run("round trip", func(t *testing.T) {
		got, err := s.Open(ctx, sealed, sc)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if !bytes.Equal(got, plaintext) {
			t.Errorf("Open = %q, want %q", got, plaintext)
		}
	})

	t.Run("sealing twice differs", func(t *testing.T) {
		again, err := s.Seal(ctx, plaintext, sc)
		if err != nil {
			t.Fatalf("Seal: %v", err)
		}
		if bytes.Equal(again, sealed) {
			t.Errorf("two seals of the same plaintext are identical")
		}
	})

	mismatches := []struct {
		name string
		sc   seal.Context
	}{
		{"older generation", seal.Context{ConnectionID: "con_abc", Generation: 2}},
		{"newer generation", seal.Context{ConnectionID: "con_abc", Generation: 4}},
		{"other connection", seal.Context{ConnectionID: "con_abd", Generation: 3}},
		{"connection prefix", seal.Context{ConnectionID: "con_ab", Generation: 3}},
	}
	for _, tc := range mismatches {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Open(ctx, sealed, tc.sc)
			if !errors.Is(err, seal.ErrContextMismatch) {
				t.Errorf("Open(%+v) = %q, %v; want ErrContextMismatch", tc.sc, got, err)
			}
		})
	}

	t.Run("tampered", func(t *testing.T) { testTampered(t, s, sealed, sc) })

	t.Run("invalid context", func(t *testing.T) { testInvalidContext(t, s, sealed, plaintext) })

	t.Run("limits", func(t *testing.T) { testLimits(t, s, sc) })

	t.Run("credential round trip", func(t *testing.T) { testCredentialRoundTrip(t, s, sc) })
}

// testTampered: a sealed value with a bit flipped in its ciphertext or tag, or
// cut short, does not open, and not as a passing unavailability.
func testTampered(t *testing.T, s seal.Sealer, sealed []byte, sc seal.Context) {
	ctx := context.Background()
	// Bytes in the ciphertext and the tag. (Not the middle: local-kms prefixes its blob
	// with the key ARN and ignores it, unauthenticated, when Decrypt names the key.)
	for _, i := range []int{len(sealed) - 20, len(sealed) - 1} {
		bad := bytes.Clone(sealed)
		bad[i] ^= 0x01
		got, err := s.Open(ctx, bad, sc)
		if err == nil {
			t.Errorf("Open(tampered at %d) = %q, want an error", i, got)
		}
		if errors.Is(err, seal.ErrUnavailable) {
			t.Errorf("Open(tampered at %d) = %v, want a permanent error", i, err)
		}
	}
	if _, err := s.Open(ctx, sealed[:len(sealed)-1], sc); err == nil {
		t.Errorf("Open(truncated) succeeded")
	}
}

// testInvalidContext: an incomplete or unprintable context neither seals nor
// opens.
func testInvalidContext(t *testing.T, s seal.Sealer, sealed, plaintext []byte) {
	ctx := context.Background()
	for _, bad := range []seal.Context{{}, {ConnectionID: "con_abc"}, {ConnectionID: "con_abc", Generation: -1}, {Generation: 1}, {ConnectionID: "a\nb", Generation: 1}} {
		if _, err := s.Seal(ctx, plaintext, bad); !errors.Is(err, seal.ErrInvalidContext) {
			t.Errorf("Seal(%+v) = %v, want ErrInvalidContext", bad, err)
		}
		if _, err := s.Open(ctx, sealed, bad); !errors.Is(err, seal.ErrInvalidContext) {
			t.Errorf("Open(%+v) = %v, want ErrInvalidContext", bad, err)
		}
	}
}

// testLimits: nothing empty or over MaxPlaintext seals, MaxPlaintext does, and
// nothing empty opens.
func testLimits(t *testing.T, s seal.Sealer, sc seal.Context) {
	ctx := context.Background()
	if _, err := s.Seal(ctx, nil, sc); err == nil {
		t.Errorf("Seal(empty) succeeded")
	}
	if _, err := s.Seal(ctx, make([]byte, seal.MaxPlaintext+1), sc); !errors.Is(err, seal.ErrTooLarge) {
		t.Errorf("Seal(%d bytes) = %v, want ErrTooLarge", seal.MaxPlaintext+1, err)
	}
	if _, err := s.Seal(ctx, make([]byte, seal.MaxPlaintext), sc); err != nil {
		t.Errorf("Seal(%d bytes) = %v, want success", seal.MaxPlaintext, err)
	}
	if _, err := s.Open(ctx, nil, sc); err == nil {
		t.Errorf("Open(empty) succeeded")
	}
}

// testCredentialRoundTrip: credentials open as sealed, only under their
// generation, and an empty one is refused.
func testCredentialRoundTrip(t *testing.T, s seal.Sealer, sc seal.Context) {
	ctx := context.Background()
	for _, c := range []seal.Credential{
		{Type: seal.TypeBearer, Token: "canary-bearer"},
		{Type: seal.TypeHeader, Name: "X-Api-Key", Value: "canary header value"},
	} {
		sealed, err := seal.SealCredential(ctx, s, c, sc)
		if err != nil {
			t.Fatalf("SealCredential(%v): %v", c, err)
		}
		got, err := seal.OpenCredential(ctx, s, sealed, sc)
		if err != nil {
			t.Fatalf("OpenCredential: %v", err)
		}
		if got != c {
			t.Errorf("OpenCredential = %#v, want %#v", got, c) // redacted output, by design
		}
		if _, err := seal.OpenCredential(ctx, s, sealed, seal.Context{ConnectionID: "con_abc", Generation: 4}); !errors.Is(err, seal.ErrContextMismatch) {
			t.Errorf("OpenCredential(next generation) = %v, want ErrContextMismatch", err)
		}
	}
	if _, err := seal.SealCredential(ctx, s, seal.Credential{Type: seal.TypeBearer}, sc); !errors.Is(err, seal.ErrInvalidCredential) {
		t.Errorf("SealCredential(empty token) = %v, want ErrInvalidCredential", err)
	}
}
