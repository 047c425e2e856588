package seal_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/fluidbox/fluidbox/shared/seal"
)

func TestLocalConformance(t *testing.T) {
	t.Parallel()
	s, err := seal.NewLocal(filepath.Join(t.TempDir(), "keys", "seal.key"))
	if err != nil {
		t.Fatalf("NewLocal: %v", err)
	}
	testSealer(t, s)
}

func TestLocalKeyFile(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state", "keys")
	keyFile := filepath.Join(dir, "seal.key")
	a, err := seal.NewLocal(keyFile)
	if err != nil {
		t.Fatalf("NewLocal: %v", err)
	}
	info, err := os.Stat(keyFile)
	if err != nil {
		t.Fatalf("key file: %v", err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("key file mode = %#o, want 0600", perm)
	}
	if info.Size() != 32 {
		t.Errorf("key file size = %d, want 32", info.Size())
	}
	dinfo, err := os.Stat(dir)
	if err != nil {
		t.Fatalf("key dir: %v", err)
	}
	if perm := dinfo.Mode().Perm(); perm != 0o700 {
		t.Errorf("key dir mode = %#o, want 0700", perm)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("key dir holds %d entries, want only the key file", len(entries))
	}

	ctx := context.Background()
	sc := seal.Context{ConnectionID: "con_1", Generation: 1}
	sealed, err := a.Seal(ctx, []byte("secret"), sc)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	// A second instance (a restart) reuses the key.
	b, err := seal.NewLocal(keyFile)
	if err != nil {
		t.Fatalf("NewLocal again: %v", err)
	}
	if got, err := b.Open(ctx, sealed, sc); err != nil || string(got) != "secret" {
		t.Errorf("second instance Open = %q, %v; want %q", got, err, "secret")
	}
	// An instance with another key cannot open it.
	c, err := seal.NewLocal(filepath.Join(t.TempDir(), "other.key"))
	if err != nil {
		t.Fatalf("NewLocal other: %v", err)
	}
	if _, err := c.Open(ctx, sealed, sc); !errors.Is(err, seal.ErrContextMismatch) {
		t.Errorf("Open under another key = %v, want ErrContextMismatch", err)
	}
}

func TestLocalConcurrentFirstUse(t *testing.T) {
	t.Parallel()
	keyFile := filepath.Join(t.TempDir(), "seal.key")
	const n = 16
	sealers := make([]*seal.Local, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s, err := seal.NewLocal(keyFile)
			if err != nil {
				t.Errorf("NewLocal: %v", err)
			}
			sealers[i] = s
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	ctx := context.Background()
	sc := seal.Context{ConnectionID: "con_1", Generation: 1}
	sealed, err := sealers[0].Seal(ctx, []byte("x"), sc)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	for i, s := range sealers {
		if _, err := s.Open(ctx, sealed, sc); err != nil {
			t.Errorf("sealer %d cannot open: %v (racing first use produced different keys)", i, err)
		}
	}
}

func TestLocalRefusesBadKeyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []struct {
		name string
		data []byte
		perm os.FileMode
	}{
		{"world readable", bytes.Repeat([]byte{1}, 32), 0o644},
		{"group readable", bytes.Repeat([]byte{1}, 32), 0o640},
		{"short", bytes.Repeat([]byte{1}, 16), 0o600},
		{"long", bytes.Repeat([]byte{1}, 64), 0o600},
		{"empty", nil, 0o600},
	}
	for _, tc := range cases {
		path := filepath.Join(dir, tc.name)
		if err := os.WriteFile(path, tc.data, tc.perm); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.perm); err != nil {
			t.Fatal(err)
		}
		if _, err := seal.NewLocal(path); err == nil {
			t.Errorf("NewLocal(%s) succeeded, want refusal", tc.name)
		}
	}
	if _, err := seal.NewLocal(dir); err == nil {
		t.Errorf("NewLocal(directory) succeeded, want refusal")
	}
	if _, err := seal.NewLocal(""); err == nil {
		t.Errorf(`NewLocal("") succeeded, want refusal`)
	}
}

func TestLocalMalformed(t *testing.T) {
	t.Parallel()
	s, err := seal.NewLocal(filepath.Join(t.TempDir(), "seal.key"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sc := seal.Context{ConnectionID: "con_1", Generation: 1}
	sealed, err := s.Seal(ctx, []byte("x"), sc)
	if err != nil {
		t.Fatal(err)
	}
	if sealed[0] != 1 {
		t.Errorf("version byte = %d, want 1", sealed[0])
	}
	bad := bytes.Clone(sealed)
	bad[0] = 2
	if _, err := s.Open(ctx, bad, sc); !errors.Is(err, seal.ErrMalformed) {
		t.Errorf("Open(version 2) = %v, want ErrMalformed", err)
	}
	if _, err := s.Open(ctx, sealed[:10], sc); !errors.Is(err, seal.ErrMalformed) {
		t.Errorf("Open(short) = %v, want ErrMalformed", err)
	}
}

func BenchmarkLocalSealOpen(b *testing.B) {
	s, err := seal.NewLocal(filepath.Join(b.TempDir(), "seal.key"))
	if err != nil {
		b.Fatal(err)
	}
	benchSealOpen(b, s)
}

// benchSealOpen seals and opens a credential with s, once per iteration.
func benchSealOpen(b *testing.B, s seal.Sealer) {
	ctx := context.Background()
	sc := seal.Context{ConnectionID: "con_bench", Generation: 1}
	cred := seal.Credential{Type: seal.TypeBearer, Token: "bench-token"}
	for b.Loop() {
		sealed, err := seal.SealCredential(ctx, s, cred, sc)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := seal.OpenCredential(ctx, s, sealed, sc); err != nil {
			b.Fatal(err)
		}
	}
}
