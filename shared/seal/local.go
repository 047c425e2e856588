package seal

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// localVersion is the first byte of every value the local sealer produces. It is also
// part of the associated data, so a value cannot be re-labelled as another version.
const localVersion byte = 1

const (
	localKeySize = 32 // AES-256
	localAADTag  = "fluidbox-seal-local-v1\x00"
)

// Local seals with AES-256-GCM under a key kept in a file: the `fluidbox dev` stand-in for
// KMS. The Context is the GCM associated data, so it authenticates exactly as a KMS
// EncryptionContext does. Sealed layout: version byte || 12-byte nonce || ciphertext+tag.
type Local struct {
	aead cipher.AEAD
}

// NewLocal loads the key in keyFile, generating it on first use: 32 random bytes written
// with mode 0600 into a directory created 0700. An existing key file that is readable by
// group or others, or that is not exactly 32 bytes, is refused rather than used.
func NewLocal(keyFile string) (*Local, error) {
	if keyFile == "" {
		return nil, errors.New("seal: local key file: empty path")
	}
	key, err := loadOrCreateKey(keyFile)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	clear(key)
	if err != nil {
		return nil, fmt.Errorf("seal: local key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("seal: local key: %w", err)
	}
	return &Local{aead: aead}, nil
}

func loadOrCreateKey(path string) ([]byte, error) {
	key, err := readKey(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("seal: local key dir: %w", err)
	}
	key = make([]byte, localKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("seal: local key: %w", err)
	}
	// Write a complete temporary file, then link it into place: the key file appears
	// atomically, and if another process won the race, its key is the one used.
	tmp, err := os.CreateTemp(dir, ".sealkey-*")
	if err != nil {
		return nil, fmt.Errorf("seal: local key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := writeKey(tmp, key); err != nil {
		return nil, err
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			clear(key)
			return readKey(path)
		}
		return nil, fmt.Errorf("seal: local key: %w", err)
	}
	return key, nil
}

func writeKey(f *os.File, key []byte) error {
	err := f.Chmod(0o600) // CreateTemp already uses 0600; make it explicit.
	if err == nil {
		_, err = f.Write(key)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("seal: local key: write: %w", err)
	}
	return nil
}

func readKey(path string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("seal: local key: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("seal: local key file %s: not a regular file", path)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("seal: local key file %s: mode %#o is accessible to others, want 0600", path, perm)
	}
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("seal: local key: %w", err)
	}
	if len(key) != localKeySize {
		clear(key)
		return nil, fmt.Errorf("seal: local key file %s: %d bytes, want %d", path, len(key), localKeySize)
	}
	return key, nil
}

// Seal encrypts plaintext for c.
func (l *Local) Seal(_ context.Context, plaintext []byte, c Context) ([]byte, error) {
	aad, err := l.aad(c)
	if err != nil {
		return nil, err
	}
	if err := checkPlaintext(plaintext); err != nil {
		return nil, err
	}
	ns := l.aead.NonceSize()
	out := make([]byte, 1+ns, 1+ns+len(plaintext)+l.aead.Overhead())
	out[0] = localVersion
	if _, err := rand.Read(out[1 : 1+ns]); err != nil {
		return nil, fmt.Errorf("seal: nonce: %w", err)
	}
	return l.aead.Seal(out, out[1:1+ns], plaintext, aad), nil
}

// Open decrypts sealed for c.
func (l *Local) Open(_ context.Context, sealed []byte, c Context) ([]byte, error) {
	aad, err := l.aad(c)
	if err != nil {
		return nil, err
	}
	ns := l.aead.NonceSize()
	if len(sealed) < 1+ns+l.aead.Overhead() {
		return nil, fmt.Errorf("%w: too short", ErrMalformed)
	}
	if sealed[0] != localVersion {
		return nil, fmt.Errorf("%w: unknown version %d", ErrMalformed, sealed[0])
	}
	pt, err := l.aead.Open(nil, sealed[1:1+ns], sealed[1+ns:], aad)
	if err != nil {
		return nil, ErrContextMismatch
	}
	return pt, nil
}

// aad is the associated data for c: a domain tag, the version byte and the canonical
// context.
func (l *Local) aad(c Context) ([]byte, error) {
	if l == nil || l.aead == nil {
		return nil, errors.New("seal: local sealer not initialised")
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	canon, err := c.canonical()
	if err != nil {
		return nil, fmt.Errorf("seal: encode context: %w", err)
	}
	aad := make([]byte, 0, len(localAADTag)+1+len(canon))
	aad = append(aad, localAADTag...)
	aad = append(aad, localVersion)
	return append(aad, canon...), nil
}
